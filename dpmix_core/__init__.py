"""DPMix Studio core: differentially private data release by random mixing.

No Streamlit here: accountants, mechanisms, data, training, experiments, storage.
"""

__version__ = "0.1.0"
