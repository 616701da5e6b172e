"""Teaching lessons for the DP foundations page (pure data and figures, no Streamlit).
"""
