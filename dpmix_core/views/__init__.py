"""Plain-language text, tables and figures shared by pages, CLI and reports (no Streamlit)."""
