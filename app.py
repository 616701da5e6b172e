"""DPMix Studio: the frame and router. Page scripts live in app_pages/ (not pages/: Streamlit would auto-discover
that folder and serve its legacy multipage mode on a deep link to a fresh server)."""

import streamlit as st

from app_pages.shared.widgets import HEADLINE_KEY_PREFIX
from dpmix_core.resources.limits import limits_from_env
from dpmix_core.runtime.jobs import cap_torch_threads

cap_torch_threads()  # leave the cores to the training workers

_PRESENT_URL = st.query_params.get("present") in ("1", "true", "yes")
st.set_page_config(
    page_title="DPMix Studio",
    page_icon=":material/shuffle:",
    layout="wide",
    initial_sidebar_state="collapsed" if _PRESENT_URL else "auto",  # ?present=1 opens with the sidebar closed
)

PAGES = [
    st.Page("app_pages/privacy_accountant.py", title="Privacy accountant", icon=":material/calculate:", default=True),
    st.Page("app_pages/mixed_samples.py", title="Mixed samples", icon=":material/grid_view:"),
    st.Page("app_pages/train_tradeoffs.py", title="Train & trade-offs", icon=":material/monitoring:"),
    st.Page("app_pages/best_release.py", title="Best release", icon=":material/travel_explore:"),
    st.Page("app_pages/privacy_audit.py", title="Privacy audit", icon=":material/policy:"),
    st.Page("app_pages/dp_foundations.py", title="DP foundations", icon=":material/school:"),
]

# Presentation mode (a toggle, or ?present=1 in the URL): controls collapsed (the sidebar closed on ?present=1, the
# pages' controls in a closed expander), larger type, no toolbars, one chart or number per screen and the settings
# printed under each chart (the pages read st.session_state["present"]), for a projector
PRESENT_CSS = """<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 20px; }
[data-testid="stMetricValue"] { font-size: 3.2rem; }
h1 { font-size: 3rem !important; }
[data-testid="stHeader"], [data-testid="stToolbar"] { display: none; }
/* one chart or headline per screen: a page's headline (widgets.headline_area: a number with its reading beside
   it) gets a screen of its own, centred, number and reading together; a chart is drawn tall (the pages set its
   height) with room after it. Never a min-height on a chart or on a lone number: Streamlit's box keeps the
   figure's height and would cut off the stretched plot's x axis and legend, and a number stretched alone is
   pushed a screen away from the sentence that reads it. */
[class*="st-key-HEADLINE_KEY_PREFIX"] { min-height: 85vh; justify-content: center; }
[data-testid="stElementContainer"]:has([data-testid="stPlotlyChart"]) { margin-bottom: 10vh; }
</style>""".replace("HEADLINE_KEY_PREFIX", HEADLINE_KEY_PREFIX)

st.session_state.setdefault("present", _PRESENT_URL)
page = st.navigation(PAGES)
with st.sidebar:
    st.caption(
        "DPMix Studio — differentially private data release by random mixing. "
        "Every ε names its accountant and whether it is a rigorous upper bound."
    )
    st.toggle(
        "Presentation mode",
        key="present",
        help="Larger type, no toolbar, one chart or number per screen with its settings under it (or ?present=1).",
    )
if st.session_state["present"]:
    st.markdown(PRESENT_CSS, unsafe_allow_html=True)
try:
    limits_from_env()  # DPMIX_MAX_MEMORY / DPMIX_MAX_SECONDS are read by every refusal: check them once, up front
except ValueError as exc:
    st.error(f"{exc} Fix it in the environment and restart the app (unset, it means the default).")
    st.stop()
page.run()
