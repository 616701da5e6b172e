"""From a dataset and a release description to released data and its privacy card
(pipeline.py, export.py, previews.py).
"""
