"""Quick presets next to their full protocol, from the runs in the store (issue #13: "within 5 points")."""

from pathlib import Path
from statistics import mean

import pandas as pd
import pytest
from fake_jobs import finish_sweep
from streamlit.testing.v1 import AppTest

from dpmix_core.experiments.presets import get_preset
from dpmix_core.experiments.quick_vs_full import (
    MAX_FULL_SEEDS,
    QUICK_WITHIN_PTS,
    QuickVsFull,
    full_protocol,
    quick_vs_full,
)
from dpmix_core.experiments.trade_offs import narrow_spec, sweep_jobs
from dpmix_core.runtime.store import ResultStore

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
SERIES = "uniform, Cx = Cy = 1 / rdp-wor"
# docs/REPRODUCTION.md, DPFMix Table 1's uniform row on clipped records: the quick's three seeds and App. E's five
QUICK = {1.0: (53.72, 46.87, 52.81), 2.0: (63.13, 65.77, 66.13), 4.0: (75.19, 69.63, 69.53), 8.0: (74.58, 75.77, 73.30)}
FULL = {
    1.0: (12.44, 39.72, None, 15.20, 23.47),  # None: seed 2 collapsed (11.49 %): left out of the mean
    2.0: (40.88, 58.13, 51.79, 45.23, 54.71),
    4.0: (73.22, 69.33, 74.98, 67.64, 67.12),
    8.0: (78.75, 72.36, 76.75, 74.08, 75.90),
}


def _finish(store: ResultStore, spec, accuracy, *, sweep_name: str | None = None) -> None:
    """Run ``spec``'s jobs into the store as done, with ``accuracy(eps, seed)`` in % (None: collapsed at 11.49 %;
    False: not run)."""

    def result(config: dict) -> dict | None:
        acc = accuracy(config["synthesis"]["target_epsilon"], config["seed"])
        if acc is False:
            return None
        return {"test_accuracy": (11.49 if acc is None else acc) / 100, "collapsed": acc is None, "delta": 1e-5}

    finish_sweep(store, spec, result, name=sweep_name)


def _stores(tmp_path, *, full_seeds: int = 5) -> ResultStore:
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], repeats=3)
    _finish(store, quick, lambda eps, seed: QUICK[eps][seed])
    # the full protocol as a narrowed re-run would store it: its own sweep name, five seeds
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], repeats=full_seeds)
    _finish(store, full, lambda eps, seed: FULL[eps][seed], sweep_name="my full re-run")
    return store


def _page(store: ResultStore, sweep: str, monkeypatch) -> AppTest:
    """Train & trade-offs opened on a stored sweep (no exception raised)."""
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["sweep"] = str(store.get_sweep(sweep).id)
    at.run()
    assert not at.exception
    return at


def test_the_clipped_uniform_quick_is_compared_with_app_e_point_by_point(tmp_path):
    """The report's own numbers: +28.4 / +14.9 / +1.0 / -1.0 (REPRODUCTION, the quick-vs-full table)."""
    out = quick_vs_full(_stores(tmp_path), "dpfmix-table1-quick")
    assert isinstance(out, QuickVsFull) and out.full_name == "dpfmix-table1"
    t = out.table.set_index("axis value")
    assert list(t["series"].unique()) == [SERIES]
    assert t.loc[1.0, "full (%)"] == pytest.approx(22.71, abs=0.01)  # the collapsed run is left out of the mean
    assert list(t["full seeds"]) == [4, 5, 5, 5] and list(t["quick seeds"]) == [3, 3, 3, 3]
    assert list(t["full collapsed"]) == [1, 0, 0, 0] and list(t["quick collapsed"]) == [0, 0, 0, 0]
    gaps = [mean(QUICK[e]) - mean(a for a in FULL[e] if a is not None) for e in QUICK]
    assert list(t["gap (pts)"]) == pytest.approx(gaps, abs=0.006)
    assert [round(g, 1) for g in gaps] == [28.4, 14.9, 1.0, -1.0]  # as the report prints them
    assert list(t["verdict"]) == ["quick above", "quick above", "within 5 points", "within 5 points"]
    assert out.full_runs == 20
    assert out.sentence().startswith("2 of 4 points compared are within 5 points of the full protocol")


def test_the_verdict_follows_the_gap_at_the_threshold(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[4.0, 8.0], repeats=1)
    _finish(store, quick, lambda eps, seed: 70.0)
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], values=[4.0, 8.0], repeats=1)
    _finish(store, full, lambda eps, seed: 70.0 - QUICK_WITHIN_PTS if eps == 4.0 else 70.0 + QUICK_WITHIN_PTS + 0.01)
    t = quick_vs_full(store, quick.name).table.set_index("axis value")
    assert t.loc[4.0, "verdict"] == "within 5 points" and t.loc[8.0, "verdict"] == "quick below"


def test_collapsed_points_have_no_number_and_say_which_side_never_learned(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], repeats=1)
    _finish(store, quick, lambda eps, seed: None if eps in (1.0, 2.0) else 60.0)
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], repeats=1)
    _finish(store, full, lambda eps, seed: None if eps in (1.0, 4.0) else (False if eps == 8.0 else 50.0))
    out = quick_vs_full(store, quick.name)
    t = out.table.set_index("axis value")
    assert list(t["verdict"]) == ["both collapsed", "quick collapsed", "full collapsed", "full protocol not run"]
    assert t[["quick (%)", "full (%)", "gap (pts)"]].loc[[1.0, 2.0, 4.0]].isna().sum().tolist() == [2, 2, 3]
    assert out.sentence().startswith("1 of 3 points compared are within 5 points")


def test_full_runs_count_whichever_seed_and_sweep_ran_them_but_not_another_protocol(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[8.0], repeats=1)
    _finish(store, quick, lambda eps, seed: 74.0)
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], values=[8.0], repeats=MAX_FULL_SEEDS + 1)
    # only the last two seeds ran: seed MAX_FULL_SEEDS - 1 counts, seed MAX_FULL_SEEDS is beyond the lookup
    _finish(store, full, lambda eps, seed: 75.0 if seed >= MAX_FULL_SEEDS - 1 else False, sweep_name="late seeds")
    other = narrow_spec(get_preset("dpfmix-table1-m"), series=[f"{SERIES}, eps = 8"], values=[16], repeats=1)
    _finish(store, other, lambda eps, seed: 10.0)  # m = 16: another protocol's run, never counted
    out = quick_vs_full(store, quick.name)
    assert out.full_runs == 1 and out.table["full seeds"].tolist() == [1]
    assert out.table["gap (pts)"].tolist() == [-1.0]


def test_without_the_full_protocol_it_says_what_to_run_and_a_full_sweep_has_no_comparison(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[1.0], repeats=1)
    _finish(store, quick, lambda eps, seed: 50.0)
    out = quick_vs_full(store, quick.name)
    assert out.table["verdict"].tolist() == ["full protocol not run"] and out.full_runs == 0
    run = f"python -m dpmix_core sweep preset:dpfmix-table1 --series '{SERIES}' --values 1"  # the quick's points
    assert f"run it with {run} (far" in out.sentence() and f"`{run}`" in out.sentence(markdown=True)
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], values=[1.0], repeats=1)
    _finish(store, full, lambda eps, seed: 20.0)
    assert quick_vs_full(store, full.name) is None  # a full protocol previews nothing
    with pytest.raises(ValueError, match="No sweep"):
        quick_vs_full(store, "nope")


def test_a_baseline_at_eps_infinity_does_not_break_what_to_run(tmp_path):
    """DPFMix Table 3's quick has a non-private baseline (axis value ∞, on no point of the axis): with no full
    protocol in the store the comparison still says what to run (it raised 'values [inf] are not on the axis',
    which failed `sweep` after its runs and the page's results)."""
    from dpmix_core.experiments.quick_vs_full import quick_vs_full_by_test_inputs

    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table3-quick"), values=[1.0])

    def result(config: dict) -> dict:
        return {"test_accuracy": 0.99 if config["method"] == "non-private" else 0.9, "delta": 1e-5}

    finish_sweep(store, quick, result)
    assert any(run.config["method"] == "non-private" for run in store.list_runs(sweep=quick.name))
    out = quick_vs_full(store, quick.name)
    assert out.full_runs == 0 and "run it with python -m dpmix_core sweep preset:dpfmix-table3" in out.sentence()
    assert "--values 1" in out.sentence() and "inf" not in out.sentence()
    assert quick_vs_full_by_test_inputs(store, quick.name)


def test_a_quick_point_the_full_preset_leaves_to_another_is_run_by_that_one(tmp_path):
    """thesis-4.2-sigma-quick's sigma = 0.7 is not a point of thesis-4.2-sigma: the same run is thesis-4.2-l's
    l = 128, so "what to run" names both commands (the first alone would never fill that point)."""
    from dataclasses import replace

    from dpmix_core.experiments.config import run_key
    from dpmix_core.experiments.quick_vs_full import other_full_commands, sweep_points
    from dpmix_core.experiments.trade_offs import with_dataset

    quick = get_preset("thesis-4.2-sigma-quick")
    full = full_protocol(quick)
    assert 0.7 in quick.values and 0.7 not in full.values
    assert other_full_commands(quick, full) == ("preset:thesis-4.2-l --values 128",)
    sigma = sweep_points(replace(full, values=(0.7,)))
    ell = sweep_points(replace(get_preset("thesis-4.2-l"), values=(128,)))
    assert {run_key(c) for c in sigma.values()} == {run_key(c) for c in ell.values()}  # one run, two names
    embedded = with_dataset(quick, "embedded")
    assert other_full_commands(embedded, full_protocol(embedded)) == (
        "preset:thesis-4.2-l --values 128 --dataset embedded",
    )
    from dpmix_core.experiments.presets import preset_names

    others = {
        name: other_full_commands(get_preset(name), full_protocol(get_preset(name)))
        for name in preset_names(quick=True)
    }
    assert {name: c for name, c in others.items() if c} == {
        "thesis-4.2-sigma-quick": ("preset:thesis-4.2-l --values 128",)
    }
    store = ResultStore(tmp_path / "results.sqlite")
    _finish(store, narrow_spec(quick, values=[0.2, 0.7]), lambda value, seed: 60.0)
    sentence = quick_vs_full(store, quick.name).sentence()
    assert sentence.endswith(
        "run it with python -m dpmix_core sweep preset:thesis-4.2-sigma --values 0.2 and "
        "python -m dpmix_core sweep preset:thesis-4.2-l --values 128 (far longer than the quick)."
    ), sentence
    whole = store.create_sweep("whole quick, 0.7 done", quick.to_dict())  # as `sweep --values 0.7` stores it
    for kind, config, key in sweep_jobs(narrow_spec(quick, values=[0.7])):
        store.submit(kind, config, key, sweep=whole.id)  # the 0.7 runs finished above: linked, already done
    expected = "run it with python -m dpmix_core sweep preset:thesis-4.2-l --values 128 (far longer than the quick)."
    assert quick_vs_full(store, whole.id).sentence().endswith(expected)  # only the points that have results


def test_every_quick_preset_and_quick_spec_file_names_a_full_protocol_with_the_quick_points(monkeypatch):
    """Each quick preset's (and documented quick spec file's) points exist in its full protocol (at the quick's
    axis values: the full preset may leave one to another preset), else nothing could be compared. The one
    exception is declared: the per-pixel l grid's full file runs the noisy series only (REPRODUCTION 3b), so the
    quick's eps = inf points say "no full-protocol point"."""
    from dataclasses import replace

    from dpmix_core.experiments.presets import preset_names
    from dpmix_core.experiments.quick_vs_full import sweep_points
    from dpmix_core.experiments.spec import load_spec

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)  # spec files name their files from the repository root
    files = [load_spec(p) for p in sorted((root / "docs" / "specs").glob("*.json"))]
    quick_files = [spec for spec in files if spec.quick]
    assert [spec.name for spec in quick_files] == ["dpcda-table2-quick-public-pixel-zscore"]
    for quick in [get_preset(name) for name in preset_names(quick=True)] + quick_files:
        name = quick.name
        noisy_only = quick in quick_files  # the per-pixel l grid's full file runs eps = 20 and 10 only
        full = full_protocol(quick)
        assert full is not None and not full.quick, name
        missing = set(sweep_points(quick)) - set(sweep_points(replace(full, values=quick.values)))
        expected = {(s, v) for s, v in sweep_points(quick) if noisy_only and s == "eps = inf (no noise)"}
        assert missing == expected, (name, sorted(missing, key=str)[:3])


def test_a_quick_on_another_dataset_compares_with_the_full_protocol_on_that_dataset():
    from dpmix_core.experiments.quick_vs_full import full_command
    from dpmix_core.experiments.trade_offs import with_dataset

    quick = with_dataset(get_preset("dpfmix-table1-quick"), "embedded")
    full = full_protocol(quick)
    assert full is not None and full.base.dataset == "embedded" and full.name == "dpfmix-table1@embedded"
    assert full_command(quick, full) == "preset:dpfmix-table1 --dataset embedded"  # the whole preset: no narrowing
    narrowed = narrow_spec(get_preset("dpcda-table2-quick"), values=[4, 16], series=["eps = 10"])
    assert full_command(narrowed, full_protocol(narrowed)) == "preset:dpcda-table2 --series 'eps = 10' --values 4 16"


def test_the_store_filters_runs_by_identity_key(tmp_path):
    store = ResultStore(tmp_path / "s.sqlite")
    a = store.submit("tests.fake_jobs:ok", {"x": 1})
    store.submit("tests.fake_jobs:ok", {"x": 2})
    assert [r.id for r in store.list_runs(keys=[a.key])] == [a.id]
    assert store.list_runs(keys=[]) == [] and store.results(status=None, keys=["nope"]) == []


def test_the_page_shows_the_quick_next_to_its_full_protocol(tmp_path, monkeypatch):
    at = _page(_stores(tmp_path), "dpfmix-table1-quick", monkeypatch)
    text = " ".join(m.value for m in at.markdown)
    assert "Quick vs its full protocol" in text and "2 of 4 points compared are within 5 points" in text
    tables = [df.value for df in at.dataframe]
    table = next(t for t in tables if isinstance(t, pd.DataFrame) and "quick (%)" in t.columns)
    assert table["verdict"].tolist() == ["quick above", "quick above", "within 5 points", "within 5 points"]


def test_the_html_report_and_the_cli_json_carry_the_comparison(tmp_path):
    import json

    from dpmix_core.views.sweep_report import sweep_report

    store = _stores(tmp_path)
    page = sweep_report(store, "dpfmix-table1-quick")
    assert "<h2>Quick vs its full protocol</h2>" in page and "quick above" in page
    assert "Quick vs its full protocol" not in sweep_report(store, "my full re-run")
    data = json.loads(json.dumps(quick_vs_full(store, "dpfmix-table1-quick").to_json()))  # JSON-ready: no NaN
    assert data["full_variant"] == "dpfmix-table1" and data["full_runs"] == 20 and len(data["points"]) == 4
    assert data["points"][0]["verdict"] == "quick above" and data["summary"].startswith("2 of 4 points")


def test_the_sweep_cli_prints_the_comparison_after_a_quick_sweep(tmp_path, capsys, monkeypatch):
    """Every run of the quick is already done, so the CLI reuses them and only reports."""
    import json

    from dpmix_core.cli.main import main

    store = _stores(tmp_path)
    argv = ["sweep", "preset:dpfmix-table1-quick", "--series", SERIES, "--repeats", "3", "--store", str(store.path)]
    assert main(argv) == 0
    assert "quick vs full: 2 of 4 points compared are within 5 points" in capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [p["verdict"] for p in out["quick_vs_full"]["points"]][:2] == ["quick above", "quick above"]


def test_the_page_says_what_to_run_when_the_store_has_no_full_protocol(tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[1.0], repeats=1)
    _finish(store, quick, lambda eps, seed: 50.0)
    at = _page(store, quick.name, monkeypatch)
    text = " ".join(m.value for m in at.markdown)
    assert (
        "has no finished run at these points" in text
        and "`python -m dpmix_core sweep preset:dpfmix-table1 --series" in text
    )
    assert not [df for df in at.dataframe if "quick (%)" in getattr(df.value, "columns", [])]


def test_the_chart_draws_the_full_protocol_as_open_diamonds_in_the_series_colour(tmp_path):
    from dpmix_core.experiments.trade_offs import sweep_results
    from dpmix_core.views.accuracy_figure import trade_off_figure

    store = _stores(tmp_path)
    check = quick_vs_full(store, "dpfmix-table1-quick")
    agg, axis, _ = sweep_results(store, "dpfmix-table1-quick")
    fig = trade_off_figure(agg, axis, full_protocol=check.table)
    (full,) = [t for t in fig.data if t.name == f"full protocol — {SERIES}"]
    (quick,) = [t for t in fig.data if t.name == SERIES]
    assert list(full.x) == [1.0, 2.0, 4.0, 8.0] and list(full.y) == pytest.approx(
        [22.71, 50.15, 70.46, 75.57], abs=0.01
    )
    assert full.marker.symbol == "diamond-open" and full.marker.color == quick.line.color
    assert list(full.error_y.array) == pytest.approx(list(check.table["full ± std"]))
    assert not [t for t in trade_off_figure(agg, axis).data if (t.name or "").startswith("full protocol")]
    mse = trade_off_figure(agg, axis, metric="test_mse", full_protocol=check.table)  # accuracies only
    assert not [t for t in mse.data if (t.name or "").startswith("full protocol")]
    from dpmix_core.views.sweep_report import sweep_report

    page = sweep_report(store, "dpfmix-table1-quick")
    assert '"diamond-open"' in page and "Open diamonds: the full protocol" in page
    assert "Open diamonds" not in sweep_report(store, "my full re-run")


QUICK_FILE = "docs/specs/dpcda-table2-quick-public-pixel-zscore.json"
FULL_FILE = "docs/specs/dpcda-table2-public-pixel-zscore-l-lr1e-4.json"


def _odd_rows(accuracy: float) -> dict:
    """A finished run's result read on the odd test rows (the even rows gave the public constants)."""
    return {"test_accuracy": 0.5, "test_accuracy_halves": [0.5, accuracy / 100], "collapsed": False, "delta": 1e-5}


def test_a_quick_spec_file_is_compared_with_the_full_spec_file_it_names(tmp_path, monkeypatch, finished_sweep):
    """The quick per-pixel l grid names its full protocol by file (no preset holds either): the page, the report
    and the CLI compare the two point by point, and say which file to run where the full one has no runs."""
    from dpmix_core.experiments.spec import load_spec
    from dpmix_core.experiments.trade_offs import with_dataset

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # spec files name their files from the repository root
    quick = load_spec(QUICK_FILE)
    assert quick.quick and quick.full_variant == FULL_FILE
    quick = narrow_spec(with_dataset(quick, "fashion-mnist"), series=["eps = 20"], values=[8, 512])
    full = full_protocol(quick)
    assert (
        full is not None and not full.quick and full.name == "dpcda-table2-public-pixel-zscore-l-lr1e-4@fashion-mnist"
    )
    store = ResultStore(tmp_path / "results.sqlite")
    finished_sweep(store, quick, lambda c: _odd_rows(61.00 if c["synthesis"]["l"] == 8 else 58.84))
    before = quick_vs_full(store, quick.name)
    assert before.full_name == FULL_FILE and before.full_runs == 0
    run = f"python -m dpmix_core sweep {FULL_FILE} --series 'eps = 20' --values 8 512 --dataset fashion-mnist"
    assert f"run it with {run} (far" in before.sentence()
    # the full protocol's seeds 0 and 1 at l = 8, run by the file's own sweep (REPRODUCTION 3b: 65.14 and 66.82 %)
    full_runs = narrow_spec(with_dataset(load_spec(FULL_FILE), "fashion-mnist"), values=[8], repeats=2)
    finished_sweep(
        store, full_runs, lambda c: _odd_rows(65.14 if c["seed"] == 0 else 66.82) if c["label"] == "eps = 20" else None
    )
    out = quick_vs_full(store, quick.name).table.set_index("axis value")
    assert out.loc[8.0, "full (%)"] == pytest.approx(65.98) and out.loc[8.0, "full seeds"] == 2
    assert out.loc[8.0, "gap (pts)"] == pytest.approx(61.00 - 65.98) and out.loc[8.0, "verdict"] == "within 5 points"
    assert out.loc[512.0, "verdict"] == "full protocol not run"
    at = _page(store, quick.name, monkeypatch)
    text = " ".join(m.value for m in at.markdown)
    assert f"1 of 1 points compared are within 5 points of the full protocol (`{FULL_FILE}`, 2 finished runs" in text


def test_a_full_spec_file_that_no_longer_loads_gives_no_comparison(tmp_path, monkeypatch, finished_sweep):
    from dataclasses import replace

    from dpmix_core.experiments.spec import SweepSpec

    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[1.0], repeats=1)
    moved = replace(quick, name="moved full", full_variant=str(tmp_path / "gone.json"))
    store = ResultStore(tmp_path / "results.sqlite")
    finished_sweep(store, moved, lambda c: {"test_accuracy": 0.5, "collapsed": False, "delta": 1e-5})
    assert full_protocol(moved) is None and quick_vs_full(store, "moved full") is None
    for bad in ("", "  ", 3):
        with pytest.raises(ValueError, match="full_variant names a preset or a spec file"):
            SweepSpec.from_dict({**quick.to_dict(), "full_variant": bad})


def _read_through(release: float, release_scale: float) -> dict:
    """A result (odd rows, %) read through the clipped loader (its own) and at the release's scale."""
    by_inputs = {
        "release": {"accuracy": 0.5, "halves": [0.5, release / 100], "collapsed": False},
        "release-scale": {"accuracy": 0.6, "halves": [0.6, release_scale / 100], "collapsed": False},
    }
    return {**_odd_rows(release), "test_accuracy_by_inputs": by_inputs}


def _read_through_store(tmp_path, monkeypatch, finished_sweep):
    """A store with the quick per-pixel l grid and its full file at l = 4 and 128, eps = 20, two readings each (on
    the files' own dataset, so that `sweep` finds every run done without reading any data)."""
    from dpmix_core.experiments.spec import load_spec

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # spec files name their files from the repository root
    quick = narrow_spec(load_spec(QUICK_FILE), series=["eps = 20"], values=[4, 128])
    full = narrow_spec(load_spec(FULL_FILE), series=["eps = 20"], values=[4, 128])
    quick_reads = {4: (37.62, 63.90), 128: (61.48, 65.06)}
    full_reads = {4: (57.22, 66.10), 128: (66.58, 66.64)}
    store = ResultStore(tmp_path / "results.sqlite")
    finished_sweep(store, quick, lambda c: _read_through(*quick_reads[c["synthesis"]["l"]]))
    finished_sweep(store, full, lambda c: _read_through(*full_reads[c["synthesis"]["l"]]))
    return store, quick


def test_both_sides_are_read_through_the_test_images_and_rows_shown(tmp_path, monkeypatch, finished_sweep):
    """The quick per-pixel l grid's clipped reading misses its full protocol by 20 points at l = 4 while the same
    models read at the release's scale agree (this session's runs: 37.62 and 63.90 % for the quick, seed 0): the
    comparison follows the chosen reading on both sides, so the diamonds sit next to the points plotted."""
    store, quick = _read_through_store(tmp_path, monkeypatch, finished_sweep)
    own = quick_vs_full(store, quick.name).table.set_index("axis value")
    assert own["gap (pts)"].tolist() == pytest.approx([37.62 - 57.22, 61.48 - 66.58])
    assert own["verdict"].tolist() == ["quick below", "quick below"]
    scaled = quick_vs_full(store, quick.name, test_inputs="release-scale").table.set_index("axis value")
    assert scaled["gap (pts)"].tolist() == pytest.approx([63.90 - 66.10, 65.06 - 66.64])
    assert scaled["verdict"].tolist() == ["within 5 points", "within 5 points"]
    every_row = quick_vs_full(store, quick.name, test_rows="all", test_inputs="release-scale").table
    assert every_row["gap (pts)"].tolist() == pytest.approx([0.0, 0.0])  # 60 % on every row on both sides
    at = _page(store, quick.name, monkeypatch)
    other = "Through the other test images (pick them under Test images above): z-scored and clipped, then scaled"
    assert f"{other} to the released points' median norm: 2 of 2 points within 5." in [c.value for c in at.caption]
    next(r for r in at.radio if r.label == "Test images").set_value("release-scale").run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "quick (%)" in getattr(df.value, "columns", []))
    assert table["verdict"].tolist() == ["within 5 points", "within 5 points"]
    clipped = "through the release's map, its clip included: 0 of 2 points within 5."
    assert any(c.value.endswith(clipped) for c in at.caption)


def test_the_sweep_cli_prints_the_comparison_through_every_test_loader(tmp_path, monkeypatch, capsys, finished_sweep):
    """After a quick sweep the terminal shows each reading's verdict, the sweep's own first, so a quick that previews
    its full protocol on one loader only is seen without opening the page."""
    import json

    from dpmix_core.cli.main import main
    from dpmix_core.experiments.quick_vs_full import quick_vs_full_by_test_inputs

    store, quick = _read_through_store(tmp_path, monkeypatch, finished_sweep)
    checks = quick_vs_full_by_test_inputs(store, quick.name)
    assert list(checks) == ["release", "release-scale"]  # the sweep's own loader first, then TEST_INPUTS order
    argv = ["sweep", QUICK_FILE, "--series", "eps = 20", "--values", "4", "128"]
    assert main([*argv, "--store", str(store.path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("quick vs full")]
    assert len(lines) == 2 and lines[0].startswith("quick vs full: 0 of 2 points compared are within 5 points")
    assert "median norm (sweep-report --test-inputs release-scale): 2 of 2 points compared" in lines[1]
    assert main([*argv, "--store", str(store.path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["quick_vs_full"]["summary"].startswith("0 of 2")
    assert {k: v["summary"][:6] for k, v in out["quick_vs_full_by_test_inputs"].items()} == {
        "release": "0 of 2",
        "release-scale": "2 of 2",
    }
    assert quick_vs_full_by_test_inputs(store, "dpcda-table2-public-pixel-zscore-l-lr1e-4") == {}


def test_a_full_protocol_whose_every_run_collapsed_draws_no_diamond_and_breaks_nothing(tmp_path, monkeypatch):
    """dpcda-table2-quick against the paper's Adam 1e-3 at l = 4 (REPRODUCTION §3): no full point has a number, so
    the chart has no full-protocol marker, while the report and the page still open and say 'full collapsed'."""
    from dpmix_core.experiments.trade_offs import sweep_results
    from dpmix_core.views.accuracy_figure import trade_off_figure
    from dpmix_core.views.sweep_report import sweep_report

    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], values=[1.0, 2.0], repeats=1)
    _finish(store, quick, lambda eps, seed: 50.0)
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], values=[1.0, 2.0], repeats=2)
    _finish(store, full, lambda eps, seed: None)  # every full run collapsed
    check = quick_vs_full(store, quick.name)
    assert check.full_runs == 4 and list(check.table["verdict"]) == ["full collapsed", "full collapsed"]
    agg, axis, _ = sweep_results(store, quick.name)
    fig = trade_off_figure(agg, axis, full_protocol=check.table)
    assert [t.name for t in fig.data if t.name == SERIES] == [SERIES]
    assert not [t for t in fig.data if (t.name or "").startswith("full protocol")]
    page = sweep_report(store, quick.name)
    assert "full collapsed" in page and "Open diamonds" not in page  # the caption names no marker it did not draw
    at = _page(store, quick.name, monkeypatch)
    assert not [c for c in at.caption if "Open diamonds" in c.value]
    assert any("full collapsed" in df.value.to_string() for df in at.dataframe if "verdict" in df.value.columns)
