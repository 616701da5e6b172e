"""Which test rows a result reads: every row, or the half that never touched the release's public constants.

A release whose per-pixel z-score constants came from the even rows of the test split (`zscore-constants --rows
even`) is read on the odd rows. The sweep's spec says so (``test_rows``); the page, the report and the CLI read the
accuracy there by default and let the user pick another half or every row.
"""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main
from dpmix_core.data import TEST_ROWS, pick_rows
from dpmix_core.experiments.results import accuracy_on_rows, aggregate
from dpmix_core.experiments.spec import SweepSpec, load_spec

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
SPECS = Path(__file__).resolve().parents[1] / "docs" / "specs"
# (l, seed) -> (all rows, [even rows, odd rows]); the odd rows disagree with the whole split on purpose
RESULTS = {
    (128, 0): (0.70, [0.72, 0.68]),
    (128, 1): (0.74, [0.78, 0.70]),
    (32, 0): (0.60, [0.50, 0.70]),
}


def test_the_halves_of_a_test_split_are_its_even_and_odd_rows():
    x = np.arange(5)
    assert [pick_rows(x, rows).tolist() for rows in TEST_ROWS] == [[0, 1, 2, 3, 4], [0, 2, 4], [1, 3]]
    with pytest.raises(ValueError, match="rows must be one of all, even, odd. Found 'first'"):
        pick_rows(x, "first")


def test_a_result_reads_every_row_or_one_half():
    result = {"test_accuracy": 0.7, "test_accuracy_halves": [0.72, 0.68]}
    assert [accuracy_on_rows(result, rows) for rows in ("all", "even", "odd")] == [0.7, 0.72, 0.68]
    assert accuracy_on_rows({"test_accuracy": 0.7}, "odd") is None  # stored before the halves were recorded
    assert accuracy_on_rows({"test_accuracy": 0.7, "test_accuracy_halves": [None, None]}, "even") is None
    assert accuracy_on_rows({}, "all") is None
    with pytest.raises(ValueError, match="test_rows must be one of all, even, odd"):
        accuracy_on_rows(result, "first")


@pytest.fixture
def spec():
    from dpmix_core.experiments.presets import get_preset

    return replace(get_preset("thesis-4.2-l-quick"), name="rows-demo", repeats=2, test_rows="odd")


def _rows(spec: SweepSpec) -> list[dict]:
    rows = []
    for config in spec.runs():
        l, seed = config.synthesis.l, config.seed - spec.base.seed
        if (l, seed) in RESULTS:
            accuracy, halves = RESULTS[l, seed]
            result = {"test_accuracy": accuracy, "test_accuracy_halves": halves, "epsilon": {"rdp-wor": 2.0}}
            rows.append({"config": config.to_dict(), "result": result})
    return rows


def test_the_aggregate_reads_the_chosen_rows_and_skips_runs_without_them(spec):
    rows = _rows(spec)
    by_rows = {r: aggregate(rows, axis="l", test_rows=r).set_index("axis_value") for r in ("all", "even", "odd")}
    assert by_rows["all"].loc[128.0, "test_accuracy_mean"] == pytest.approx(0.72)
    assert by_rows["even"].loc[128.0, "test_accuracy_mean"] == pytest.approx(0.75)
    assert by_rows["odd"].loc[128.0, "test_accuracy_mean"] == pytest.approx(0.69)
    assert by_rows["odd"].loc[128.0, "test_accuracy_std"] == pytest.approx(math.sqrt(0.0002))
    assert by_rows["odd"].loc[32.0, "test_accuracy_mean"] == pytest.approx(0.70)
    old = [{**row, "result": {k: v for k, v in row["result"].items() if k != "test_accuracy_halves"}} for row in rows]
    assert aggregate(old, axis="l", test_rows="odd").empty  # no per-half accuracy: no point, not the whole split's
    assert len(aggregate(old, axis="l")) == 2


def test_a_spec_declares_its_rows_and_keeps_them_through_json_and_another_dataset(spec, tmp_path):
    from dpmix_core.experiments.trade_offs import with_dataset

    assert spec.to_dict()["test_rows"] == "odd"
    assert "test_rows" not in replace(spec, test_rows="all").to_dict()  # specs stored before keep their JSON
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    assert load_spec(path).test_rows == "odd" and load_spec(path).runs() == spec.runs()
    assert with_dataset(spec, "fashion-mnist").test_rows == "odd"
    with pytest.raises(ValueError, match="test_rows must be one of all, even, odd. Found 'half'"):
        SweepSpec.from_dict({**spec.to_dict(), "test_rows": "half"})
    # the documented specs whose constants came from the even test rows read the odd ones
    for name in ("dpcda-table2-public-pixel-zscore-test-unclipped-lr1e-4", "dpcda-table2-quick-public-pixel-zscore"):
        assert load_spec(SPECS / f"{name}.json").test_rows == "odd"
    assert load_spec(SPECS / "dpcda-table2-paper-release-test-unclipped-lr1e-4.json").test_rows == "all"


@pytest.fixture
def stored(spec, tmp_path, finished_sweep):
    from dpmix_core.runtime.store import ResultStore

    def result_for(config: dict) -> dict | None:
        l, seed = config["synthesis"]["l"], config["seed"] - spec.base.seed
        if (l, seed) not in RESULTS:
            return None
        accuracy, halves = RESULTS[l, seed]
        return {
            "test_accuracy": accuracy,
            "test_accuracy_halves": halves,
            "epsilon": {"rdp-wor": 64 / l},
            "delta": 1e-5,
        }

    store = ResultStore(tmp_path / "results.sqlite")
    finished_sweep(store, spec, result_for)
    return store, spec


def test_a_stored_sweep_reads_its_specs_rows_unless_told_otherwise(stored):
    from dpmix_core.experiments.trade_offs import sweep_results, sweep_test_rows

    store, spec = stored
    assert sweep_test_rows(store, spec.name) == "odd"
    agg, _, title = sweep_results(store, spec.name)
    assert agg.set_index("axis_value").loc[128.0, "test_accuracy_mean"] == pytest.approx(0.69)
    assert title.endswith("(accuracy on the odd test rows)")
    agg, _, title = sweep_results(store, spec.name, test_rows="all")
    assert agg.set_index("axis_value").loc[128.0, "test_accuracy_mean"] == pytest.approx(0.72)
    assert "test rows" not in title
    assert sweep_test_rows(store, store.create_sweep("no spec").id) == "all"


def test_the_report_and_the_cli_say_which_rows_they_read(stored, tmp_path, capsys):
    from dpmix_core.views.sweep_report import sweep_report

    store, spec = stored
    page = sweep_report(store, spec.name)
    assert "the odd rows of the test split" in page and "69.00 %" in page and "72.00 %" not in page
    page = sweep_report(store, spec.name, test_rows="all")
    assert "every row of the test split" in page and "72.00 %" in page
    out = tmp_path / "even.html"
    argv = ["sweep-report", spec.name, "--store", str(store.path)]
    assert main([*argv, "--out", str(out), "--test-rows", "even"]) == 0
    assert "the even rows of the test split" in out.read_text() and "75.00 %" in out.read_text()
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "b.html"), "--test-rows", "half"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid choice: 'half'" in err[0]
    assert not (tmp_path / "b.html").exists()


def _shown_accuracy(at, l: float) -> float:
    table = next(df.value for df in at.dataframe if "test_accuracy_mean" in df.value.columns)
    return float(table.set_index("axis_value").loc[l, "test_accuracy_mean"])


def test_the_page_reads_the_sweeps_rows_and_lets_the_user_pick_another(stored, tmp_path, monkeypatch):
    store, _ = stored
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception and not at.error
    rows = next(r for r in at.radio if r.label == "Accuracy on the test split's")
    assert rows.value == "odd" and _shown_accuracy(at, 128.0) == pytest.approx(0.69)
    assert not any(r.label == "Test images" for r in at.radio)  # a [0,1]-pixel release has one test loader
    assert any("(accuracy on the odd test rows)" in str(c.proto) for c in at.get("plotly_chart"))
    rows.set_value("all").run()
    assert not at.exception and not at.error and _shown_accuracy(at, 128.0) == pytest.approx(0.72)


def test_solve_epsilon_reads_the_same_rows(stored, capsys):
    store, spec = stored
    argv = ["solve-epsilon", "--sweep", spec.name, "--accuracy", "65", "--store", str(store.path), "--json"]
    best = {}
    for rows in (None, "odd", "all"):
        assert main([*argv, *(["--test-rows", rows] if rows else [])]) == 0
        (answer,) = json.loads(capsys.readouterr().out)
        best[rows] = answer["best_accuracy"]
    assert best[None] == best["odd"] == pytest.approx(0.70) and best["all"] == pytest.approx(0.72)
