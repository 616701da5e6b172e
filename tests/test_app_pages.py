"""Every page opens through the router without an exception."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGES = re.findall(r'st\.Page\("([^"]+)"', (ROOT / "app.py").read_text())


def test_router_lists_every_page_file():
    assert sorted(PAGES) == sorted(f"app_pages/{p.name}" for p in (ROOT / "app_pages").glob("*.py"))
    assert not (ROOT / "pages").exists()  # Streamlit would auto-discover it (legacy multipage mode on deep links)


@pytest.mark.parametrize("page", PAGES)
def test_page_opens(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception


def test_presentation_mode_from_the_url_and_the_toggle():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["present"] = "1"
    at.run()
    assert not at.exception and at.toggle(key="present").value
    assert any("font-size: 20px" in m.value for m in at.markdown)
    at.toggle(key="present").set_value(False).run()
    assert not any("font-size: 20px" in m.value for m in at.markdown)


@pytest.mark.parametrize("page", PAGES)
def test_a_wrong_data_folder_is_one_error_not_a_traceback(page, monkeypatch, tmp_path):
    """DPMIX_DATA_DIR naming no folder: each page says so in one line (or needs no data) and never crashes."""
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-such-folder"))
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert all("no-such-folder" in e.value and "\n" not in e.value.strip() for e in at.error if "folder" in e.value)


@pytest.mark.parametrize(("name", "value"), [("DPMIX_MAX_MEMORY", "lots"), ("DPMIX_MAX_SECONDS", "-5")])
def test_a_malformed_limit_in_the_environment_is_one_error_on_every_page(name, value, monkeypatch, tmp_path):
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        assert [e.value for e in at.error] and all(name in e.value for e in at.error)
