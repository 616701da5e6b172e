"""Every chart on every page has a title, titled axes and downloads next to it; every table a CSV download;
presentation mode prints the settings under each chart (issue 15 §4)."""

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.views.exports import kaleido_available

ROOT = Path(__file__).resolve().parents[1]
PAGES = re.findall(r'st\.Page\("([^"]+)"', (ROOT / "app.py").read_text())


def _seed_store(tmp_path, monkeypatch) -> None:
    """One finished run of a quick preset, so Train & trade-offs draws its chart and tables."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import sweep_jobs
    from dpmix_core.runtime.store import ResultStore

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    (tmp_path / "no-data").mkdir()
    spec = get_preset("thesis-4.2-l-quick")
    store = ResultStore()
    sweep = store.create_sweep(spec.name, spec.to_dict())
    kind, config, key = sweep_jobs(spec)[0]
    run = store.submit(kind, config, key, sweep=sweep.id)
    store.claim(run.id)
    store.finish(run.id, {"test_accuracy": 0.70, "epsilon": {"lee2019": 2.7}, "delta": 1e-5})


def _open(page: str, *, present: bool) -> AppTest:
    from dpmix_core.views.background import shared_background

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    if present:
        at.query_params["present"] = "1"
    at.run()
    at.switch_page(page).run()
    if page.endswith("privacy_accountant.py"):
        at.toggle(key="acc_attacker").set_value(True).run()  # the attacker's two charts
        assert shared_background().wait_all(120)
        at.run()  # the poll's rerun: the epsilon curve
    assert not at.exception, at.exception
    return at


def _key(element) -> str:
    return element.proto.id.rsplit("-", 1)[-1]


def _axis_titles(layout: dict) -> dict[str, str]:
    """Titles of the numeric axes shown (an image grid's axes carry category labels instead: PC 1, ε = 2)."""
    return {
        name: ((axis.get("title") or {}).get("text") or "")
        for name, axis in layout.items()
        if re.fullmatch(r"[xy]axis\d*", name)
        and axis.get("visible", True)
        and axis.get("showticklabels", True)
        and "ticktext" not in axis
    }


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_has_a_title_axis_titles_and_downloads_and_every_table_a_csv(page, tmp_path, monkeypatch):
    _seed_store(tmp_path, monkeypatch)
    at = _open(page, present=False)
    charts = at.get("plotly_chart")
    downloads = {_key(d): d for d in at.get("download_button")}
    images = kaleido_available()
    for chart in charts:
        spec = json.loads(chart.proto.spec)
        layout = spec.get("layout", {})
        title = (layout.get("title") or {}).get("text")
        assert title, f"a chart on {page} has no title"
        untitled = [name for name, text in _axis_titles(layout).items() if not text]
        assert not untitled, f"{title!r} on {page}: axes without a title (units): {untitled}"
        key = _key(chart)
        assert key + "_csv" in downloads and key + "_html" in downloads, f"{title!r} on {page} has no download"
        if images:  # PNG for slides and SVG for print wherever plotly can render static images
            assert key + "_png" in downloads and key + "_svg" in downloads, f"{title!r} on {page}: no PNG/SVG"
        # without them, plotly's camera stays on the toolbar: a chart always has an image export
        removed = json.loads(chart.proto.config).get("modeBarButtonsToRemove", [])
        assert ("toImage" in removed) == images, f"{title!r} on {page}: no image export, or two"
    csv_buttons = [d for d in at.get("download_button") if "CSV" in d.proto.label]
    assert len(csv_buttons) >= len(at.dataframe), f"{page}: a table without a CSV download"
    if page.endswith(("privacy_accountant.py", "dp_foundations.py", "train_tradeoffs.py")):
        assert charts, f"{page} should draw charts here"


@pytest.mark.parametrize("page", ["app_pages/privacy_accountant.py", "app_pages/dp_foundations.py"])
def test_presentation_mode_prints_the_settings_under_each_chart(page):
    at = _open(page, present=True)
    charts = at.get("plotly_chart")
    captions = [c.value for c in at.caption if c.value.startswith("Settings: ")]
    assert charts and len(captions) >= len(charts)
    if page.endswith("privacy_accountant.py"):
        assert any("n = 60,000" in c and "T = 10,000" in c and "δ = 1.00e-05" in c for c in captions), captions
    for chart in charts:  # one chart per screen: tall figures (room after each; a headline number gets a screen)
        assert json.loads(chart.proto.spec)["layout"]["height"] >= 700
    assert any("min-height: 85vh" in m.value for m in at.markdown)
    if page.endswith("privacy_accountant.py"):  # controls collapsed into a closed expander, no plotly toolbar
        settings = [e for e in at.expander if e.label.startswith("Settings (presentation mode")]
        assert settings and not settings[0].proto.expanded
        assert all('"displayModeBar": false' in c.proto.config for c in charts)
    plain = _open(page, present=False)
    for chart in plain.get("plotly_chart"):  # a short toolbar (zoom, pan, reset) that stays clear of the title
        config = json.loads(chart.proto.config)
        assert config["displayModeBar"] and {"zoomIn2d", "lasso2d"} <= set(config["modeBarButtonsToRemove"])
    assert not [c for c in plain.caption if c.value.startswith("Settings: ")]
    assert not [e for e in plain.expander if e.label.startswith("Settings (presentation mode")]


@pytest.mark.skipif(not kaleido_available(), reason="kaleido or a Chromium browser is missing: no static images")
def test_png_and_svg_downloads_render_the_chart():
    import plotly.graph_objects as go

    from dpmix_core.views.exports import chart_export

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"title": {"text": "eps vs sigma"}})
    export = chart_export(fig)
    png, svg = export.png(), export.svg()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg[:200] and b"eps vs sigma" in svg


def test_a_static_image_is_tried_twice_then_the_failure_is_raised(monkeypatch):
    """kaleido's tab can render before its scripts load on a loaded machine: one retry, then the error as it is."""
    import plotly.graph_objects as go

    from dpmix_core.views.exports import chart_export

    export = chart_export(go.Figure(go.Scatter(x=[1], y=[2]), layout={"title": {"text": "t"}}))
    calls = []

    def flaky(**options):
        calls.append(options)
        if len(calls) == 1:
            raise RuntimeError("ReferenceError: kaleido_scopes is not defined")
        return b"image"

    monkeypatch.setattr(export.figure, "to_image", flaky)
    assert export.png() == b"image" and calls == [{"format": "png", "scale": 2}] * 2

    def broken(**options):
        raise RuntimeError("no browser")

    monkeypatch.setattr(export.figure, "to_image", broken)
    with pytest.raises(RuntimeError, match="no browser"):
        export.svg()


def test_without_static_images_the_toolbar_keeps_its_camera(monkeypatch):
    """No kaleido or no Chromium: the PNG / SVG buttons are hidden, so plotly's own camera is the image export."""
    import app_pages.shared.widgets as widgets

    monkeypatch.setattr(widgets, "kaleido_available", lambda: False)
    at = _open("app_pages/dp_foundations.py", present=False)
    charts = at.get("plotly_chart")
    assert charts and not [d for d in at.get("download_button") if d.proto.label in ("PNG", "SVG")]
    for chart in charts:
        assert "toImage" not in json.loads(chart.proto.config)["modeBarButtonsToRemove"]
