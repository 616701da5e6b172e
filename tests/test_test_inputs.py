"""Which test loader a result reads: the test split through the release's clip, or z-scored only.

A clipped class-centric z-score release (DP-CDA) can be tested through its own map, clip included, or without the
clip (the paper's "original test partition" read either way). Training never reads the test split, so one trained
model is read through both (a run's ``test_accuracy_by_inputs``); the page, the report and the CLI read the sweep's
own loader by default and let the user pick the other, without retraining.
"""

import html
import json
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main
from dpmix_core.experiments.results import accuracy_on_rows, aggregate, reading
from dpmix_core.experiments.trade_offs import TEST_INPUTS_TITLES
from dpmix_core.training.names import TEST_INPUTS

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
SERIES = "eps = 20"
# (l, seed) -> {loader: (all rows, [even, odd], collapsed)}; at l = 4 seed 1 the clipped reading collapsed (BatchNorm
# statistics of the noisy release do not fit norm-1 images) and the unclipped one did not
RESULTS = {
    (4, 0): {"release": (0.58, [0.59, 0.57], False), "unclipped": (0.66, [0.66, 0.66], False)},
    (4, 1): {"release": (0.10, [0.10, 0.10], True), "unclipped": (0.64, [0.65, 0.63], False)},
    (32, 0): {"release": (0.68, [0.69, 0.67], False), "unclipped": (0.51, [0.52, 0.50], False)},
}


def _result(readings: dict, own: str = "release", epsilon: float = 20.0) -> dict:
    acc, halves, collapsed = readings[own]
    by_inputs = {name: {"accuracy": a, "halves": h, "collapsed": c} for name, (a, h, c) in readings.items()}
    return {
        "test_accuracy": acc,
        "test_accuracy_halves": halves,
        "collapsed": collapsed,
        "test_accuracy_by_inputs": by_inputs,
        "epsilon": {"dpcda": epsilon},
        "delta": 1e-5,
    }


def test_every_test_loader_has_a_title():
    assert tuple(TEST_INPUTS_TITLES) == TEST_INPUTS


def test_a_result_reads_its_own_loader_or_the_other_with_its_collapse():
    result = _result(RESULTS[4, 1])
    assert reading(result) is result and reading(result, "release") is result
    other = reading(result, "unclipped")
    assert other is not None and other["test_accuracy"] == 0.64 and other["collapsed"] is False
    assert [accuracy_on_rows(result, rows, "unclipped") for rows in ("all", "even", "odd")] == [0.64, 0.65, 0.63]
    # a run whose own loader is the unclipped one reads the clipped reading as "the other"
    assert accuracy_on_rows({**_result(RESULTS[4, 1], "unclipped"), "config": {"test_inputs": "unclipped"}}) == 0.64
    old = {k: v for k, v in result.items() if k != "test_accuracy_by_inputs"}  # stored before both were recorded
    assert reading(old, "unclipped") is None and accuracy_on_rows(old, "all", "unclipped") is None
    with pytest.raises(ValueError, match=f"test_inputs must be one of {', '.join(TEST_INPUTS)}. Found 'raw'"):
        reading(result, "raw")


@pytest.fixture
def spec():
    from dpmix_core.experiments.presets import get_preset

    return replace(get_preset("dpcda-table2-quick"), name="inputs-demo", repeats=2)


@pytest.fixture
def stored(spec, tmp_path, finished_sweep):
    from dpmix_core.runtime.store import ResultStore

    def result_for(config: dict) -> dict | None:
        l, seed = config["synthesis"]["l"], config["seed"] - spec.base.seed
        if config["label"] != SERIES or (l, seed) not in RESULTS:
            return None
        return _result(RESULTS[l, seed], epsilon=80 / l)

    store = ResultStore(tmp_path / "results.sqlite")
    finished_sweep(store, spec, result_for)
    return store, spec


def _accuracy(agg, l: float) -> float:
    return float(agg.set_index("axis_value").loc[l, "test_accuracy_mean"])


def test_a_stored_sweep_reads_its_own_loader_unless_told_otherwise(stored):
    from dpmix_core.experiments.trade_offs import sweep_results, sweep_rows, sweep_test_inputs

    store, spec = stored
    assert sweep_test_inputs(store, spec.name) == ("release", ("release", "unclipped"))
    agg, _, title = sweep_results(store, spec.name)
    row = agg.set_index("axis_value").loc[4.0]
    assert row["test_accuracy_mean"] == pytest.approx(0.58) and row["collapsed"] == 1  # the collapsed run left out
    assert "test images" not in title
    agg, _, title = sweep_results(store, spec.name, test_inputs="unclipped")
    row = agg.set_index("axis_value").loc[4.0]
    assert row["test_accuracy_mean"] == pytest.approx(0.65) and row["collapsed"] == 0  # learned through this loader
    assert _accuracy(agg, 32.0) == pytest.approx(0.51)
    assert title.endswith(f"(the same models read with test images {TEST_INPUTS_TITLES['unclipped']})")
    assert _accuracy(sweep_results(store, spec.name, test_rows="odd", test_inputs="unclipped")[0], 4.0) == 0.645
    old = [
        {**r, "result": {k: v for k, v in r["result"].items() if k != "test_accuracy_by_inputs"}}
        for r in sweep_rows(store, spec.name)
    ]
    assert aggregate(old, axis="l", test_inputs="unclipped").empty and len(aggregate(old, axis="l")) == 2
    assert sweep_test_inputs(store, store.create_sweep("no spec").id) == ("release", ("release",))


def test_the_report_and_the_cli_say_which_test_images_they_read(stored, tmp_path, capsys):
    from dpmix_core.views.sweep_report import sweep_report

    store, spec = stored
    page = sweep_report(store, spec.name)
    assert html.escape(TEST_INPUTS_TITLES["release"]) in page and "58.00 %" in page and "65.00 %" not in page
    out = tmp_path / "unclipped.html"
    argv = ["sweep-report", spec.name, "--store", str(store.path)]
    assert main([*argv, "--out", str(out), "--test-inputs", "unclipped"]) == 0
    text = out.read_text()
    assert "65.00 %" in text and html.escape("the same trained models as the sweep's own reading") in text
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "b.html"), "--test-inputs", "raw"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid choice: 'raw'" in err[0]
    assert not (tmp_path / "b.html").exists()


def test_solve_epsilon_reads_the_chosen_loader(stored, capsys):
    store, spec = stored
    argv = ["solve-epsilon", "--sweep", spec.name, "--accuracy", "60", "--store", str(store.path), "--json"]
    best = {}
    for inputs in (None, "release", "unclipped"):
        assert main([*argv, *(["--test-inputs", inputs] if inputs else [])]) == 0
        (answer,) = json.loads(capsys.readouterr().out)
        best[inputs] = answer["best_accuracy"]
    assert best[None] == best["release"] == pytest.approx(0.68) and best["unclipped"] == pytest.approx(0.65)


def test_the_page_offers_the_other_loader_only_where_the_runs_have_it(stored, tmp_path, monkeypatch):
    store, _ = stored
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception and not at.error
    table = lambda: next(df.value for df in at.dataframe if "test_accuracy_mean" in df.value.columns)  # noqa: E731
    loaders = next(r for r in at.radio if r.label == "Test images")
    assert loaders.value == "release" and _accuracy(table(), 4.0) == pytest.approx(0.58)
    loaders.set_value("unclipped").run()
    assert not at.exception and not at.error and _accuracy(table(), 4.0) == pytest.approx(0.65)
    assert any("test images z-scored" in str(c.proto) for c in at.get("plotly_chart"))


def test_the_release_scale_is_the_released_points_median_norm_over_the_clip():
    import numpy as np

    from dpmix_core.training.data import release_scale

    x = np.zeros((5, 4), dtype=np.float32)
    x[:, 0] = [3.0, -4.0, 10.0, 1.0, 2.0]  # norms 3, 4, 10, 1, 2: median 3
    assert release_scale(x, 1.0) == pytest.approx(3.0) and release_scale(x, 2.0) == pytest.approx(1.5)
    assert release_scale(x.reshape(5, 2, 2), 1.0) == pytest.approx(3.0)  # image-shaped points are flattened
    with pytest.raises(ValueError, match="no points"):
        release_scale(x[:0], 1.0)


def test_a_release_without_a_clip_refuses_the_other_loaders_in_one_line():
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    syn = SynthesisConfig(mechanism="dpmix", l=4, T=200, sigma_x=0.3, sigma_y=0.3)
    for loader, what in (("unclipped", "lifts the clip of"), ("release-scale", "rescales the clipped test images of")):
        with pytest.raises(ValueError, match=f"test_inputs '{loader}' {what} a class-centric z-score release"):
            RunConfig("mixing", dataset="embedded", synthesis=syn, test_inputs=loader)


def test_the_reproduction_figures_read_the_chosen_loader(stored, bench_script, tmp_path, capsys):
    store, spec = stored
    figures = bench_script("make_reproduction_figures")
    out = tmp_path / "figs"
    argv = ["--store", str(store.path), "--out", str(out), "--sweeps", spec.name]
    assert figures.main([*argv, "--test-inputs", "unclipped"]) == 0
    printed = capsys.readouterr().out
    assert (out / f"{spec.name}-unclipped.png").exists() and not (out / f"{spec.name}.png").exists()
    assert TEST_INPUTS_TITLES["unclipped"] in printed and "65.00" in printed
    assert figures.main(argv) == 0 and (out / f"{spec.name}.png").exists()
    assert "58.00" in capsys.readouterr().out


def test_runs_without_the_chosen_reading_are_counted_as_left_out(stored, tmp_path, monkeypatch):
    from dpmix_core.experiments.trade_offs import runs_left_out, sweep_jobs, sweep_results
    from dpmix_core.views.sweep_report import sweep_report

    store, spec = stored
    sweep = store.get_sweep(spec.name)
    for kind, config, key in sweep_jobs(spec):  # l = 32, seed 1: a run stored before the readings were recorded
        if config["label"] == SERIES and (config["synthesis"]["l"], config["seed"] - spec.base.seed) == (32, 1):
            run = store.submit(kind, config, key, sweep=sweep.id)
            store.claim(run.id)
            old = _result(RESULTS[32, 0], epsilon=2.5)
            store.finish(run.id, {k: v for k, v in old.items() if k != "test_accuracy_by_inputs"})
    own, other = (sweep_results(store, spec.name, test_inputs=t)[0] for t in ("release", "unclipped"))
    assert runs_left_out(store, spec.name, own) == 0 and runs_left_out(store, spec.name, other) == 1
    assert "Also not in it: 1 finished run(s)" in sweep_report(store, spec.name, test_inputs="unclipped")
    assert "Also not in it" not in sweep_report(store, spec.name)
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not any("left out" in c.value for c in at.caption if "finished run(s)" in c.value)
    next(r for r in at.radio if r.label == "Test images").set_value("unclipped").run()
    assert not at.exception and any("1 finished run(s) of this sweep have no reading" in c.value for c in at.caption)
