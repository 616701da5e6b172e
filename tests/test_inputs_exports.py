"""Typed numbers are parsed exactly or refused by name; chart and table downloads; the background store."""

import threading
import time

import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmix_core.views.background import BackgroundResults
from dpmix_core.views.exports import (
    chart_export,
    figure_data_csv,
    file_stem,
    latex_text,
    settings_caption,
    table_csv,
    table_latex,
)
from dpmix_core.views.inputs import format_count, format_real, parse_count, parse_real


@pytest.mark.parametrize(
    "text, value",
    [("1e9", 10**9), ("60000", 60000), ("60,000", 60000), (" 6e4 ", 60000), ("1.5e3", 1500), ("10**0", None)],
)
def test_parse_count_reads_scientific_notation_exactly(text, value):
    if value is None:
        with pytest.raises(ValueError, match="invalid: T = '10\\*\\*0' is not a number"):
            parse_count(text, name="T")
    else:
        assert parse_count(text, name="T") == value


def test_parse_count_never_clamps():
    with pytest.raises(ValueError, match="invalid: T = 0 must be at least 1"):
        parse_count("0", name="T")
    with pytest.raises(ValueError, match="at most 1,000"):
        parse_count("1e9", name="T", maximum=1000)
    with pytest.raises(ValueError, match="whole number"):
        parse_count("2.5", name="T")
    with pytest.raises(ValueError, match="empty"):
        parse_count("  ", name="T")
    with pytest.raises(ValueError, match="finite"):
        parse_count("inf", name="T")
    assert parse_count("12345678901234567890", name="T") == 12345678901234567890  # no float rounding


def test_parse_real_bounds_and_round_trips():
    assert parse_real("1e-5", name="δ", minimum=0, strict_minimum=True) == 1e-5
    with pytest.raises(ValueError, match="invalid: δ = -0.1 must be greater than 0"):
        parse_real("-0.1", name="δ", minimum=0, strict_minimum=True)
    with pytest.raises(ValueError, match="invalid: δ = 0 must be greater than 0"):
        parse_real("0", name="δ", minimum=0, strict_minimum=True)
    with pytest.raises(ValueError, match="at most 0.5"):
        parse_real("0.7", name="δ", maximum=0.5)
    for value in (1e-5, 0.0711, 1.6667e-5):
        assert parse_real(format_real(value), name="x") == pytest.approx(value, rel=1e-5)
    assert parse_count(format_count(60000), name="n") == 60000


def test_chart_export_needs_a_title_and_carries_the_data():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3.0, 4.0], name="lee2019"))
    with pytest.raises(ValueError, match="title"):
        chart_export(fig)
    fig.update_layout(title="ε as T grows (δ = 1e-05)")
    export = chart_export(fig)
    assert export.file_stem == "as_t_grows_1e_05"
    assert file_stem("dpmix_preview_class_T-shirt/top") == "dpmix_preview_class_t_shirt_top"  # a user's class name
    csv = export.csv.decode("utf-8-sig").splitlines()
    assert csv == ["trace,x,y", "lee2019,1,3.0", "lee2019,2,4.0"]
    assert b"<html>" in export.html()[:200].lower() or b"<html" in export.html()[:500].lower()


def test_image_and_error_bar_data():
    heat = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    assert figure_data_csv(heat).decode("utf-8-sig").splitlines()[1:] == ["trace 0,0,0,1", "trace 0,1,0,2"] + [
        "trace 0,0,1,3",
        "trace 0,1,1,4",
    ]
    bars = go.Figure(go.Scatter(x=[1], y=[0.5], error_y={"array": [0.1]}, name="s"))
    assert figure_data_csv(bars).decode("utf-8-sig").splitlines() == ["trace,x,y,error_y", "s,1,0.5,0.1"]
    assert table_csv(pd.DataFrame({"ε": [1.5]})).decode("utf-8-sig") == "ε\n1.5\n"


def test_settings_caption():
    text = settings_caption({"n": 60000, "σx": 0.0711, "δ": 1e-5, "class-centric": False, "skip": None})
    assert text == "Settings: n = 60,000 · σx = 0.0711 · δ = 1.00e-05 · class-centric = no"
    with pytest.raises(ValueError):
        settings_caption({})


def test_background_results_are_keyed_and_newer_requests_drop_queued_ones():
    store = BackgroundResults()
    gate = threading.Event()
    first = store.request("a", gate.wait, 10)  # occupies the worker
    queued = store.request("b", lambda: "b")
    latest = store.request("c", lambda: "c")  # "b" has not started: dropped
    assert queued.cancelled() and not store.ready("b")
    assert store.request("c", lambda: "other") is latest  # same key, same future
    gate.set()
    assert store.wait_all(10) and latest.result() == "c" and first.result() is True
    assert store.ready("a") and store.ready("c")
    failing = store.request("boom", lambda: 1 / 0)
    assert store.wait("boom", 10) and isinstance(failing.exception(), ZeroDivisionError)
    assert not store.wait("never asked", 0)
    t0 = time.perf_counter()
    store.request("slow", time.sleep, 0.3)
    assert time.perf_counter() - t0 < 0.1  # asking never waits
    assert store.wait_all(5)


def test_background_results_drop_only_what_nobody_else_waits_for():
    """A classroom on one server: one user's new request never cancels another user's queued one."""
    store = BackgroundResults()
    gate = threading.Event()
    first = store.request("busy", gate.wait, 10, group="teacher")  # occupies the worker
    while not first.running():
        time.sleep(0.01)
    alice = store.request("x", lambda: "x", group="alice")
    bob = store.request("y", lambda: "y", group="bob")
    assert not alice.cancelled()  # bob's request leaves alice's queued one alone
    assert store.request("x", lambda: "other", group="bob") is alice  # the same curve is computed once
    alice_next = store.request("z", lambda: "z", group="alice")  # alice moves on; bob still waits for "x"
    assert not alice.cancelled() and store.known("x")
    assert store.ahead_of("x") == 1 and store.ahead_of("z") == 3  # "busy" runs; "x", "y" wait before "z"
    bob_next = store.request("w", lambda: "w", group="bob")  # bob moves on: nobody waits for "x" or "y" now
    assert alice.cancelled() and bob.cancelled() and not store.known("x") and not store.known("y")
    assert store.ahead_of("z") == 1 and store.ahead_of("w") == 2 and store.ahead_of("busy") == 0
    gate.set()
    assert store.wait_all(10) and alice_next.result() == "z" and bob_next.result() == "w"
    assert store.ahead_of("z") == 0 and store.ahead_of("never asked") == 0
    small = BackgroundResults(max_results=2)
    for key in "abc":
        small.request(key, str, key, group=key)
        assert small.wait(key, 10)
    assert not small.known("a") and small.known("b") and small.known("c")  # least recently used dropped


def _die_once(marker: str) -> int:
    """Kills the worker process the first time (leaving ``marker``), answers its pid after."""
    import os

    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)
    return os.getpid()


def test_background_in_a_worker_process_keeps_the_contract_and_survives_a_dead_worker(tmp_path, monkeypatch):
    import operator
    import os
    import signal
    from pathlib import Path

    from dpmix_core.views.background import WorkerDied

    monkeypatch.delenv("PYTHONPATH", raising=False)
    elsewhere = BackgroundResults(processes=True)
    alone = elsewhere.request("pid", os.getpid).result(60)
    unknown = elsewhere.request("not importable there", _die_once, str(tmp_path / "never"))
    assert isinstance(unknown.exception(60), ModuleNotFoundError)  # this test module is not on its path
    assert elsewhere.request("then", os.getpid).result(60) == alone  # a request it cannot load kills nothing
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # the worker can import this module's _die_once
    store = BackgroundResults(processes=True, preload=("json",))
    worker = store.request("pid", os.getpid).result(60)
    assert worker != os.getpid()  # the call ran in another interpreter (no GIL shared with the page)
    first = store.request("a", time.sleep, 1.0)
    while not first.running():
        time.sleep(0.01)
    queued = store.request("b", os.getpid)
    latest = store.request("c", os.getpid)  # "b" has not started: dropped, as with threads
    assert queued.cancelled() and latest.result(60) == worker
    failing = store.request("boom", operator.truediv, 1, 0)
    assert isinstance(failing.exception(60), ZeroDivisionError)  # fn's exception; the worker lives on
    assert store.request("lambda", lambda: 1).exception(60) is not None  # does not pickle: refused, not queued
    assert store.request("after boom", os.getpid).result(60) == worker
    killed = worker
    os.kill(killed, signal.SIGKILL)  # the idle worker is killed (as for memory): the next request starts another
    worker = store.request("after a kill", os.getpid).result(60)
    assert worker not in (killed, os.getpid())
    marker = tmp_path / "died"
    replaced = store.request("die once", _die_once, str(marker)).result(60)  # killed (as for memory), retried
    assert marker.exists() and replaced not in (worker, os.getpid())  # on a fresh worker
    dying = store.request("die", os._exit, 3)  # dies again on the retry: the request's exception
    assert isinstance(dying.exception(60), WorkerDied)
    assert store.request("die", os._exit, 3) is not dying  # asked again, a lost result is computed again
    assert store.request("after", os.getpid).result(60) not in (replaced, os.getpid())  # the next one is served


def test_background_results_fall_back_to_threads_where_no_worker_process_starts(monkeypatch, caplog):
    import os
    import subprocess

    def refuse(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    store = BackgroundResults(processes=True)
    assert store.request("pid", os.getpid).result(60) == os.getpid()  # computed all the same, on a thread
    assert "could not start a worker process (no processes here)" in caplog.text
    monkeypatch.setattr(os, "name", "nt")
    assert BackgroundResults(processes=True).request("pid", os.getpid).result(60) == os.getpid()
    assert "worker processes need a POSIX system" in caplog.text


def test_image_grid_png_lays_out_rows_and_cells_of_the_largest_image():
    import io

    import numpy as np
    import pytest
    from PIL import Image

    from dpmix_core.views.exports import image_grid_png

    a, b = np.zeros((4, 5)), np.ones((4, 5))
    png = image_grid_png([[a, b, a], [b]], scale=2, gap=1)
    img = np.asarray(Image.open(io.BytesIO(png)))
    assert img.shape == (2 * (2 * (4 + 1) + 1), 2 * (3 * (5 + 1) + 1))  # 2 rows x 3 columns, gaps, x2
    assert img[2, 2] == 0 and img[2, 2 + 2 * 6] == 255  # first image black, second white
    rgb = image_grid_png([[np.zeros((3, 3, 3))]], scale=1)
    assert np.asarray(Image.open(io.BytesIO(rgb))).shape == (3 + 2 * 2, 3 + 2 * 2, 3)
    # a record next to a larger feature map (Mixed samples, feature mixing): cells of the largest, top-left
    mixed = np.asarray(Image.open(io.BytesIO(image_grid_png([[np.zeros((3, 3)), np.zeros((6, 6))]], scale=1))))
    assert mixed.shape == (6 + 2 * 2, 2 * (6 + 2) + 2) and mixed[2, 2] == 0 and mixed[2 + 4, 2] == 255
    grey_rgb = np.asarray(Image.open(io.BytesIO(image_grid_png([[np.zeros((3, 3, 3)), np.ones((5, 5))]], scale=1))))
    assert grey_rgb.shape == (5 + 4, 2 * 7 + 2, 3) and (grey_rgb[2, 2 + 7] == 255).all()
    with pytest.raises(ValueError, match=r"\(H, W\) or \(H, W, 3\)"):
        image_grid_png([[np.zeros((3, 3, 2))]])
    with pytest.raises(ValueError, match="at least one"):
        image_grid_png([[]])


def _unescaped_specials(latex: str) -> str:
    """What is left of LaTeX's special characters once escapes, macros and $...$ maths are taken out."""
    import re

    text = re.sub(r"\$\\[A-Za-z]+\$|\$\\\|\$|\$[<>|]\$", "", latex)  # the symbols in maths mode
    text = re.sub(r"\\text(backslash|asciitilde|asciicircum)\{\}", "", text)
    text = re.sub(r"\\[&%$#_{}]", "", text)
    return "".join(ch for ch in text if ch in "\\&%$#_{}~^<>|")


def test_table_latex_escapes_and_keeps_the_shape():
    frame = pd.DataFrame(
        {"accountant": ["rdp_wor", "gdp-clt"], "ε": ["11.8", "∞"], "δ": [1e-5, float("nan")], "k": [3, None]}
    )
    tex = table_latex(frame).decode()
    lines = tex.splitlines()
    assert lines[1] == r"\begin{tabular}{llll}" and r"\toprule" in lines and lines[-1] == r"\end{tabular}"
    assert r"accountant & $\varepsilon$ & $\delta$ & k \\" in lines
    assert r"rdp\_wor & 11.8 & 1e-05 & 3 \\" in lines and r"gdp-clt & $\infty$ & -- & -- \\" in lines


@settings(max_examples=60, deadline=None)
@given(cells=st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_table_latex_never_leaves_a_special_character_unescaped(cells):
    tex = table_latex(pd.DataFrame([cells], columns=[f"c{i}" for i in range(len(cells))])).decode()
    row = tex.splitlines()[5]
    assert row.endswith(r" \\")
    body = row[: -len(r" \\")]
    assert _unescaped_specials(body.replace(" & ", " ")) == ""  # only the column separators stay bare
    assert latex_text("".join(cells)).count("&") == "".join(cells).count("&")
