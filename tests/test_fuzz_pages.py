"""Every box a page reads as text, given what people mistype (words, zero, a number past a float's range): the
page never raises, and a bad entry is said in an error, not turned into a result."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[1] / "app_pages"
TYPED = ["privacy_accountant", "mixed_samples", "best_release", "privacy_audit", "train_tradeoffs"]
MISTYPED = ["abc", "0", "1e400"]


BUILDER = ("train_tradeoffs", "tr_mode", "Build your own")  # Train & trade-offs' boxes are in its builder


def _page(page: str) -> AppTest:
    """The page as it opens; Train & trade-offs with its builder open."""
    if page == BUILDER[0]:
        at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=120).run()
        return at.radio(key=BUILDER[1]).set_value(BUILDER[2]).run()
    return AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=120).run()


def _boxes(page: str) -> list[str]:
    return [box.key for box in _page(page).text_input]


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))


def test_every_typed_page_has_boxes_to_mistype():
    assert all(_boxes(page) for page in TYPED)  # a page that lost its boxes would make the test below empty


@pytest.mark.parametrize("page", TYPED)
def test_a_mistyped_box_is_an_error_never_an_exception(page):
    at = _page(page)
    for key in [box.key for box in at.text_input]:
        before = at.text_input(key=key).value
        for text in MISTYPED:
            at.text_input(key=key).input(text).run()
            assert not at.exception, (page, key, text, [e.value for e in at.exception])
            if text == "abc":
                assert at.error, (page, key, text)  # never read as a value
        at.text_input(key=key).input(before).run()
        assert not at.exception and not at.error, (page, key, [e.value for e in at.error])
