"""Privacy accounting: what was released (release.py) and how much privacy it costs (accountants/,
analysis/, calibration.py, curves.py). Depends on nothing else in dpmix_core.
"""
