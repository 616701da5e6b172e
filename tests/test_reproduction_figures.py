"""The report's figures (bench/make_reproduction_figures.py) never draw a collapsed run as a result (issue #13 §3)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest


@pytest.fixture(scope="module")
def figures(bench_script):
    return bench_script("make_reproduction_figures")


def _agg() -> pd.DataFrame:
    # eps = 20 at l = 1 collapsed in its only run; l = 4 learned; l = 2 has one collapsed run of two (a result)
    return pd.DataFrame(
        {
            "label": ["eps = 20"] * 3,
            "axis_value": [1.0, 2.0, 4.0],
            "test_accuracy_mean": [0.1135, 0.70, 0.78],
            "test_accuracy_std": [float("nan"), float("nan"), 0.01],
            "test_accuracy_count": [1, 2, 3],
            "runs": [1, 2, 3],
            "collapsed": [1, 1, 0],
        }
    )


def test_collapsed_points_are_grey_crosses_not_points_of_the_line(figures):
    import matplotlib.pyplot as plt
    from matplotlib.collections import PathCollection

    fig, ax = plt.subplots()
    try:
        handles = figures._plot_series(ax, _agg(), "test_accuracy", 100)
        labels = [h.get_label() for h in handles]
        assert labels == [
            "eps = 20",
            "open: some runs collapsed (mean of the others)",
            "collapsed (did not learn): eps = 20",  # the legend names whose crosses they are
        ]
        line_x = list(handles[0].lines[0].get_xdata())
        assert line_x == [2.0, 4.0]  # the collapsed l = 1 is not on the line
        crosses = handles[2].get_offsets()
        assert [tuple(p) for p in crosses] == [(1.0, pytest.approx(11.35))]
        scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
        hollow = [c for c in scatters if len(c.get_offsets()) and c.get_label().startswith("_")]
        assert [tuple(p) for c in hollow for p in c.get_offsets()] == [(2.0, pytest.approx(70.0))]  # l = 2 only
    finally:
        plt.close(fig)


def test_the_crosses_legend_says_where_each_series_collapsed(figures):
    assert figures._dead_label({"a": [1.0, 2.0]}) == "collapsed (did not learn): a"
    assert figures._dead_label({"a": [1.0], "b": [0.5, 8.0]}) == "collapsed (did not learn): a at 1; b at 0.5, 8"
    many = {f"uniform / rdp-wor, eps = {e}": [16.0, 32.0, 256.0] for e in (1, 2, 4)}
    label = figures._dead_label(many)  # too long for one line: one series per line, none left out
    assert label.splitlines()[0] == "collapsed (did not learn):"
    assert [line.strip() for line in label.splitlines()[1:]] == [f"{k} at 16, 32, 256" for k in many]


def test_the_markdown_table_says_collapsed(figures):
    agg = _agg().assign(
        test_mse_count=0, test_mse_mean=float("nan"), test_mse_std=float("nan"), delta=1e-5, seconds_mean=10.0
    )
    rows = figures.markdown_table(agg, "l", {}).splitlines()[2:]
    assert "collapsed" in rows[0] and "no result" in rows[0]
    assert "70.00 (1 of 2 runs collapsed, left out of the mean)" in rows[1]
    assert "collapsed" not in rows[2]


def test_the_combined_figure_saves_its_whole_legend_and_title(figures, tmp_path):
    """Every series' legend entry and the title are inside the saved image (they were cut at its left edge)."""
    from matplotlib.image import imread

    labels = [f"a long series name that a real sweep gives its method, number {k}" for k in range(24)]
    agg = pd.DataFrame(
        {
            "label": [x for x in labels for _ in range(2)],
            "axis_value": [1.0, 2.0] * len(labels),
            "test_accuracy_mean": [0.5, 0.6] * len(labels),
            "certified_epsilon": [1.0, 2.0] * len(labels),  # results.aggregate's reading of each point
            "certified_by": ["pld-poisson"] * 2 * len(labels),
        }
    )
    path = tmp_path / "combined.png"
    table = figures.combined_figure({"all-methods": (agg, "target_epsilon")}, path)
    assert table.count("| all-methods |") == 2 * len(labels)
    height, width = imread(path).shape[:2]
    assert height > 6.5 * 110  # grown to hold 12 rows of legend under the plot, not cut at 6.5 inches
    assert width >= 11 * 110 * 0.9


@pytest.mark.filterwarnings("ignore:No artists with labels")  # plot is replaced by a recorder
def test_the_combined_figure_lists_a_collapsed_point_but_does_not_plot_it(figures, tmp_path, monkeypatch):
    """The all-methods-vs-certified-eps figure: a point whose runs all collapsed is "collapsed (no result)" in the
    table and is not on the plot; a partly collapsed one is plotted and says how many runs were left out."""
    import matplotlib.pyplot as plt

    agg = _agg().assign(certified_epsilon=[1.0, 2.0, 4.0], certified_by="pld-poisson")
    plotted: list[list[float]] = []
    monkeypatch.setattr(plt.Axes, "plot", lambda self, x, y, **kw: plotted.append(list(x)))
    rows = figures.combined_figure({"dpcda-table2": (agg, "l")}, tmp_path / "c.png").splitlines()[2:]
    assert "collapsed (11.35: did not learn, no result)" in rows[0]
    assert rows[1].endswith("| 70.00 (1 of 2 runs collapsed, left out of the mean) |")
    assert rows[2].endswith("| 78.00 |")
    assert plotted == [[2.0, 4.0]]  # certified eps of l = 2 and l = 4; the collapsed l = 1 is not drawn


def test_the_gpu_sweeps_driver_reads_a_job_as_a_shell_line(bench_script):
    """bench/gpu_sweeps.py: a series name with spaces stays one argument; a malformed job stops with one line."""
    module = bench_script("gpu_sweeps")
    name, args = module.parse_job("p:preset:dpfmix-table1 --series 'Poisson / gdp-clt' --values 1 --seeds 1 2")
    assert name == "p" and args == [
        "preset:dpfmix-table1",
        "--series",
        "Poisson / gdp-clt",
        "--values",
        "1",
        "--seeds",
        "1",
        "2",
    ]
    for bad in ("no-colon", "p:", "1x:preset:a"):
        with pytest.raises(SystemExit, match="expected NAME:SWEEP ARGS"):
            module.parse_job(bad)


def test_the_trajectory_script_finds_runs_that_release_no_mixture(bench_script):
    """bench/epoch_trajectory.py picks a run by its target epsilon as the sweep axis reads it: DP-SGD's too (it
    looked only at a release's synthesis.target_epsilon and said "no run" for DP-SGD)."""
    module = bench_script("epoch_trajectory")
    run = module.pick_run("all-methods-quick", 1.0, "DP-SGD")
    assert run.method == "dp-sgd" and run.dpsgd_epsilon == 1.0
    assert module.pick_run("dpfmix-table1", 2.0, "Poisson").synthesis.target_epsilon == 2.0
    with pytest.raises(SystemExit, match="no run of a series named like 'nothing'"):
        module.pick_run("all-methods-quick", 1.0, "nothing")


def test_the_trajectory_script_takes_a_spec_file_an_axis_value_and_a_dataset(bench_script):
    """bench/epoch_trajectory.py reads a spec file as sweep does (preset: prefix too), picks the run at --value on
    the spec's own axis, and moves it to --dataset as sweep --dataset does."""
    module = bench_script("epoch_trajectory")
    spec = str(Path(__file__).resolve().parents[1] / "docs/specs/dpcda-table2-public-pixel-zscore-l-lr1e-4.json")
    run = module.pick_run(spec, 20.0, "", value=2, dataset="fashion-mnist")
    assert (run.synthesis.l, run.synthesis.target_epsilon, run.dataset) == (2, 20.0, "fashion-mnist")
    assert module.pick_run(spec, 10.0, "", value=512).synthesis.l == 512
    assert module.pick_run("preset:dpcda-table2", 10.0, "", value=8).synthesis.l == 8
    with pytest.raises(SystemExit, match="at target epsilon 20.0 and l = 3"):
        module.pick_run(spec, 20.0, "", value=3)


def test_a_few_sweeps_leave_the_all_methods_chart_alone(figures, tmp_path, capsys):
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import sweep_jobs
    from dpmix_core.runtime.store import ResultStore

    spec = get_preset("dpfmix-table3-quick")
    store = ResultStore(tmp_path / "r.sqlite")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    for kind, config, key in sweep_jobs(spec):
        if not config.get("synthesis"):  # the baselines: not needed here
            continue
        run = store.submit(kind, config, key, sweep=sweep.id)
        store.claim(run.id)
        eps = config["synthesis"]["target_epsilon"]
        store.finish(run.id, {"test_accuracy": 0.8 + eps / 100, "epsilon": {"pld-poisson": eps}, "delta": 1e-5})
    out = tmp_path / "figures"
    common = ["--store", str(store.path), "--out", str(out), "--sweeps", spec.name]
    assert figures.main(common) == 0
    assert (out / f"{spec.name}.png").exists() and not (out / "all-methods-certified-eps.png").exists()
    assert figures.main([*common, "--all-methods"]) == 0
    assert (out / "all-methods-certified-eps.png").exists()
    capsys.readouterr()
