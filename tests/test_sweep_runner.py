"""Sweeps: running to the end, resume without recomputing, Ctrl-C, retries, CSV, CLI."""

import argparse
import csv
import json

import fake_jobs
import pytest
from fake_jobs import executions

from dpmix_core.cli.sweep import TextProgress, add_sweep_arguments, cli_sweep
from dpmix_core.experiments.sweeps import export_csv, run_sweep, running_detail, submit_sweep, waiting_detail
from dpmix_core.runtime.store import ResultStore, config_key


@pytest.fixture
def store(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    yield store
    fake_jobs.kill_leftovers(store)


def grid(marker, xs=(1, 2, 3), repeats=2, kind="fake_jobs:quick", **base):
    """(kind, config, key) triples: each x repeated with seeds 0..repeats-1."""
    configs = [{"marker": str(marker), **base, "x": x, "seed": r} for x in xs for r in range(repeats)]
    return [(kind, c, config_key(c)) for c in configs]


def test_sweep_runs_everything_and_exports(store, tmp_path):
    marker = tmp_path / "marker"
    calls = []
    summary = run_sweep(
        store,
        "grid",
        grid(marker),
        backend=fake_jobs.backend(store),
        poll_s=0.05,
        progress=lambda *a: calls.append(a),
        spec={"note": "test"},
    )
    assert summary.ok and summary.total == 6 and summary.new == 6 and summary.done == 6
    assert calls[-1] == (6, 6, 0, 0, "") and all(total == 6 for _, total, _, _, _ in calls)
    assert executions(marker) == 6
    sweep = store.get_sweep("grid")
    assert sweep.spec == {"note": "test"} and sweep.backend == "local" and sweep.location
    out = tmp_path / "results.csv"
    assert export_csv(store, "grid", out) == 6
    rows = list(csv.DictReader(out.open()))
    assert [(r["config.x"], r["config.seed"], r["result.value"]) for r in rows[:2]] == [
        ("1", "0", "2"),
        ("1", "1", "2"),
    ]
    assert {r["status"] for r in rows} == {"done"} and "result.nested.a" in rows[0]


def test_resume_reuses_done_runs(store, tmp_path):
    marker = tmp_path / "marker"
    be = fake_jobs.backend(store)
    run_sweep(store, "first", grid(marker), backend=be, poll_s=0.05)
    again = run_sweep(store, "first", grid(marker), backend=be, poll_s=0.05)
    assert again.ok and again.reused == 6 and again.new == 0 and executions(marker) == 6  # nothing recomputed
    wider = run_sweep(store, "wider", grid(marker, xs=(1, 2, 3, 4)), backend=be, poll_s=0.05)
    assert wider.ok and wider.total == 8 and wider.new == 2 and wider.reused == 6 and executions(marker) == 8
    assert len(store.list_runs()) == 8 and len(store.list_runs(sweep="first")) == 6


def test_ctrl_c_leaves_queued_runs_for_the_next_run(store, tmp_path):
    marker = tmp_path / "marker"
    be = fake_jobs.backend(store, max_parallel=1)
    runs = grid(marker, xs=(1, 2, 3, 4), repeats=1, kind="fake_jobs:slow", epochs=3, step_s=0.05)

    def interrupt(*_):
        raise KeyboardInterrupt

    first = run_sweep(store, "s", runs, backend=be, poll_s=0.05, progress=interrupt)
    assert first.interrupted and not first.ok
    assert first.counts["queued"] == 3 and first.counts["running"] == 1  # the running one goes on alone
    second = run_sweep(store, "s", runs, backend=be, poll_s=0.05)
    assert second.ok and second.new == 0 and second.reused == 4
    assert executions(marker) == 4 and all(r.attempts == 1 for r in store.list_runs())


def test_failed_runs_are_retried_only_when_asked(store, tmp_path):
    marker = tmp_path / "marker"
    be = fake_jobs.backend(store)
    runs = [("fake_jobs:crash", {"msg": "nope"}, None), ("fake_jobs:quick", {"x": 1, "marker": str(marker)}, None)]
    first = run_sweep(store, "f", runs, backend=be, poll_s=0.05)
    assert not first.ok and first.counts["failed"] == 1 and first.failed == 1
    again = run_sweep(store, "f", runs, backend=be, poll_s=0.05)
    assert again.requeued == 0 and store.list_runs(status="failed")[0].attempts == 1
    retried = run_sweep(store, "f", runs, backend=be, poll_s=0.05, retry=True)
    assert retried.requeued == 1 and store.list_runs(status="failed")[0].attempts == 2
    assert executions(marker) == 1


def test_a_changed_spec_counts_only_its_own_runs(store, tmp_path):
    """Re-running a sweep name whose spec changed: the old runs stay linked to the sweep but are not this
    submission's; progress, summary and exit status count only the new runs (once "15/15 done" before any ran)."""
    marker = tmp_path / "marker"
    be = fake_jobs.backend(store)
    assert run_sweep(store, "s", grid(marker, xs=(1, 2), repeats=1), backend=be, poll_s=0.05).ok
    calls = []
    changed = [("fake_jobs:crash", {"msg": "new spec", "x": x}, None) for x in (1, 2)]
    summary = run_sweep(store, "s", changed, backend=be, poll_s=0.05, progress=lambda *a: calls.append(a))
    assert summary.total == 2 and summary.done == 0 and summary.failed == 2 and not summary.ok
    assert all(done == 0 for done, *_ in calls) and calls[-1] == (0, 2, 0, 2, "")
    assert store.counts(sweep="s")["done"] == 2  # the earlier spec's runs are kept
    assert store.counts(run_ids=[]) == dict.fromkeys(store.counts(), 0)


def test_interrupted_runs_are_rerun_on_resume(store, tmp_path):
    marker = tmp_path / "marker"
    runs = grid(marker, xs=(1, 2), repeats=1)
    sweep, submitted = submit_sweep(store, "r", runs, backend=fake_jobs.backend(store))
    victim = submitted[0][0]
    store.claim(victim.id, pid=1)
    store.mark_interrupted(victim.id, "no heartbeat for 40 s (worker killed, server restarted or machine slept)")
    summary = run_sweep(store, "r", runs, backend=fake_jobs.backend(store), poll_s=0.05)
    assert summary.ok and summary.requeued == 1 and store.get(victim.id).attempts == 2
    assert executions(marker) == 2


def test_the_cli_entry_point(store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(fake_jobs.TESTS_DIR))  # workers import fake_jobs
    marker = tmp_path / "marker"
    specs = {
        "sigma": grid(marker, xs=(1, 2)),
        "crash": [("fake_jobs:crash", {"msg": "a"}, None)],
        "dead": grid(marker, xs=(9,), repeats=1, collapsed=True),
    }

    def expand(text):
        return text, specs[text], {"name": text}

    parser = argparse.ArgumentParser()
    add_sweep_arguments(parser)
    out = tmp_path / "out.csv"
    args = parser.parse_args(["sigma", "--store", str(store.path), "--export", str(out), "--poll", "0.05", "--json"])
    assert cli_sweep(args, expand=expand) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["name"] == "sigma" and printed["done"] == 4 and printed["exported_rows"] == 4
    assert len(list(csv.DictReader(out.open()))) == 4 and executions(marker) == 4
    assert cli_sweep(parser.parse_args(["sigma", "--store", str(store.path), "--poll", "0.05"]), expand=expand) == 0
    text = capsys.readouterr().out
    assert "4/4 done" in text and "WARNING" not in text and executions(marker) == 4  # resumed: nothing re-ran
    assert cli_sweep(parser.parse_args(["dead", "--store", str(store.path), "--poll", "0.05"]), expand=expand) == 0
    assert "WARNING: 1 of 1 done run(s) collapsed: the model never learned" in capsys.readouterr().out
    assert cli_sweep(parser.parse_args(["crash", "--store", str(store.path), "--poll", "0.05"]), expand=expand) == 1
    assert "ValueError: boom: a" in capsys.readouterr().err


def test_cli_store_errors_are_usage_errors(tmp_path):
    parser = argparse.ArgumentParser()
    add_sweep_arguments(parser)
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(ValueError, match="results store .*dir.sqlite is a folder"):
        cli_sweep(
            parser.parse_args(["s", "--store", str(tmp_path / "dir.sqlite")]),
            expand=lambda text: (text, [("fake_jobs:quick", {"x": 1}, None)], {}),
        )


def test_sweep_results_leave_out_runs_of_an_earlier_spec_version(tmp_path):
    from dataclasses import replace

    from dpmix_core.experiments.spec import load_spec
    from dpmix_core.experiments.trade_offs import JOB_KIND, sweep_jobs, sweep_results, sweep_run_ids

    store = ResultStore(tmp_path / "r.sqlite")
    old = load_spec(
        {
            "name": "p",
            "axis": "sigma",
            "values": [0.5],
            "base": {
                "method": "mixing",
                "dataset": "embedded",
                "model": "linear",
                "lr": 1e-3,
                "synthesis": {"mechanism": "dpmix", "l": 4, "T": 100, "sigma_x": 0.5},
            },
        }
    )
    new = replace(old, base=old.base.replace(lr=1e-4))  # the protocol changed: same sweep name, other runs

    def finish_all(spec, accuracy):
        sweep = store.create_sweep("p", spec.to_dict())
        for kind, config, key in sweep_jobs(spec):
            run = store.submit(kind, config, key, sweep=sweep.id)
            assert kind == JOB_KIND and store.claim(run.id) is not None
            store.finish(run.id, {"test_accuracy": accuracy, "epsilon": {}, "delta": 1e-5})

    finish_all(old, 0.2)
    finish_all(new, 0.8)
    agg, axis, _ = sweep_results(store, "p")
    assert axis == "sigma" and len(store.results(store.get_sweep("p").id)) == 2  # both stay stored
    assert agg["test_accuracy_count"].tolist() == [1] and agg["test_accuracy_mean"].tolist() == [0.8]
    # the progress table after a reload (?sweep=) lists the current spec's run only, not "2 done" for 1 run
    (current,) = sweep_run_ids(store, "p")
    assert store.get(current).result["test_accuracy"] == 0.8


def test_a_sweep_run_with_more_repeats_than_its_spec_shows_every_seed(tmp_path):
    """`sweep preset:X --repeats 10` on a 3-seed preset: the stored spec says 10, so the views count all 10 seeds;
    a later piece with fewer repeats (`--repeats 1`) keeps them; another protocol replaces the spec."""
    from dpmix_core.experiments.spec import load_spec
    from dpmix_core.experiments.sweeps import keep_widest_repeats
    from dpmix_core.experiments.trade_offs import expand_cli_spec, sweep_run_ids

    base = {"method": "mixing", "dataset": "embedded", "model": "linear", "lr": 1e-3,
            "synthesis": {"mechanism": "dpmix", "l": 4, "T": 100, "sigma_x": 0.5}}  # fmt: skip
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "p", "axis": "sigma", "values": [0.5], "repeats": 3, "base": base}))
    name, runs, wide = expand_cli_spec(str(path), repeats=5)
    assert len(runs) == 5 and wide["repeats"] == 5
    assert expand_cli_spec(str(path), repeats=1)[2]["repeats"] == 3  # a piece: the spec's own count
    store = ResultStore(tmp_path / "r.sqlite")
    for kind, config, key in runs:  # what the sweep's workers would have done
        run = store.submit(kind, config, key, sweep=store.create_sweep(name, wide).id)
        assert store.claim(run.id) is not None
        store.finish(run.id, {"test_accuracy": 0.5, "epsilon": {}, "delta": 1e-5})
    assert len(sweep_run_ids(store, "p")) == 5
    narrow = expand_cli_spec(str(path), repeats=1)[2]
    kept = keep_widest_repeats(narrow, store.get_sweep("p").spec)
    assert kept["repeats"] == 5
    store.create_sweep("p", kept)
    assert len(sweep_run_ids(store, "p")) == 5
    other = load_spec({**json.loads(path.read_text()), "repeats": 1, "values": [0.7]}).to_dict()
    assert keep_widest_repeats(other, store.get_sweep("p").spec) == other  # another protocol: replaced
    assert keep_widest_repeats(None, wide) is None and keep_widest_repeats(wide, None) == wide


def test_a_piece_by_series_and_seed_has_the_whole_specs_keys_and_stores_the_whole_spec():
    """`--series`/`--seeds` on a preset: the piece's run keys are the preset's own (so the whole sweep reuses
    them); the stored spec keeps every series and published number; a seed past the spec needs --repeats."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import expand_cli_spec, sweep_jobs

    whole = {key for _, _, key in sweep_jobs(get_preset("dpfmix-table1"))}
    name, runs, stored = expand_cli_spec("preset:dpfmix-table1", series=["Poisson / gdp-clt"], seeds=[2, 1])
    assert name == "dpfmix-table1" and len(runs) == 8  # 4 epsilons x 2 seeds, one series
    assert {(cfg["label"], cfg["seed"]) for _, cfg, _ in runs} == {("Poisson / gdp-clt", 1), ("Poisson / gdp-clt", 2)}
    assert {key for _, _, key in runs} <= whole
    assert stored == get_preset("dpfmix-table1").to_dict()  # the views still compare every series with the paper
    name, runs, stored = expand_cli_spec("preset:dpfmix-table1", seeds=[5], repeats=6, values=[2])
    assert [cfg["seed"] for _, cfg, _ in runs] == [5, 5, 5] and stored["repeats"] == 6  # one per series
    with pytest.raises(ValueError, match=r"seeds \[3\] are not among .*--repeats 4 widens it"):
        expand_cli_spec("preset:dpfmix-table1", seeds=[3])
    with pytest.raises(ValueError, match="its series: uniform / rdp-wor; Poisson / gdp-clt; uniform, Cx = Cy = 1"):
        expand_cli_spec("preset:dpfmix-table1", series=["Poisson"])


def test_submit_sweep_keeps_the_widest_repeats(store, tmp_path):
    marker = tmp_path / "marker"
    submit_sweep(store, "w", grid(marker, repeats=1), backend=fake_jobs.backend(store), spec={"n": 1, "repeats": 4})
    submit_sweep(store, "w", grid(marker, repeats=1), backend=fake_jobs.backend(store), spec={"n": 1, "repeats": 1})
    assert store.get_sweep("w").spec == {"n": 1, "repeats": 4}
    submit_sweep(store, "w", grid(marker, repeats=1), backend=fake_jobs.backend(store), spec={"n": 2, "repeats": 1})
    assert store.get_sweep("w").spec == {"n": 2, "repeats": 1}


def test_published_comparison_verdicts():
    import pandas as pd

    from dpmix_core.experiments.spec import Published
    from dpmix_core.experiments.trade_offs import published_comparison
    from dpmix_core.views.accuracy_figure import trade_off_figure

    agg = pd.DataFrame(
        {
            "label": ["a", "a", "b"],
            "axis_value": [1.0, 2.0, 1.0],
            "test_accuracy_mean": [0.80, 0.50, 0.9],
            "test_accuracy_std": [0.01, float("nan"), 0.0],
            "test_accuracy_count": [3, 1, 1],
        }
    )
    published = (Published("a", 1.0, 0.82, "paper"), Published("a", 2.0, 0.60), Published("a", 4.0, 0.7))
    table = published_comparison(agg, published)
    assert table["verdict"].tolist() == ["reproduced", "not reproduced", "pending"]
    above = published_comparison(agg, (Published("a", 1.0, 0.765), Published("a", 1.0, 0.77)))
    assert above["verdict"].tolist() == ["above the paper", "reproduced"]  # +3.5 is not a miss; +3.0 is within
    assert table["gap (pts)"].tolist()[:2] == [-2.0, -10.0] and table["seeds"].tolist() == [3, 1, 0]
    assert table["± std"].tolist()[0] == 1.0 and pd.isna(table["± std"].tolist()[1])
    fig = trade_off_figure(agg, "target_epsilon", published=published)
    stars = [t for t in fig.data if t.name == "published — a"]
    assert len(stars) == 1 and list(stars[0].y) == pytest.approx([82.0, 60.0, 70.0])
    # a point whose every run collapsed is no result: not compared with the paper (issue #13 §3)
    dead = agg.assign(collapsed=[0, 1, 0], runs=[3, 1, 1])
    table = published_comparison(dead, published)
    assert table["verdict"].tolist() == ["reproduced", "collapsed (no result)", "pending"]
    assert pd.isna(table["ours (%)"].tolist()[1]) and pd.isna(table["gap (pts)"].tolist()[1])
    assert table["collapsed runs"].tolist() == [0, 1, 0]
    # some runs collapsed: ours is the others' mean, and the count stands beside it (9 of 10 at DP-CDA eps = 10, l = 4)
    partly = agg.assign(collapsed=[9, 0, 0], runs=[10, 1, 1], test_accuracy_count=[1, 1, 1])
    table = published_comparison(partly, published)
    assert table["collapsed runs"].tolist()[0] == 9 and table["seeds"].tolist()[0] == 1
    assert table["verdict"].tolist()[0] == "reproduced" and table["ours (%)"].tolist()[0] == 80.0
    assert published_comparison(agg, published)["collapsed runs"].tolist() == [0, 0, 0]  # no column: none counted


def test_a_published_point_the_sweep_never_runs_is_not_pending():
    """A spec for l = 1 and 2 that carries the paper's whole row: its other values get no verdict (not "pending")
    unless the store has results there; the values it runs keep theirs, finished or not."""
    import pandas as pd

    from dpmix_core.experiments.spec import Published
    from dpmix_core.experiments.trade_offs import published_comparison

    agg = pd.DataFrame(
        {
            "label": ["a", "a"],
            "axis_value": [2.0, 8.0],  # 8: a result from an earlier spec of the same sweep
            "test_accuracy_mean": [0.60, 0.71],
            "test_accuracy_std": [0.01, 0.01],
            "test_accuracy_count": [3, 3],
        }
    )
    published = tuple(Published("a", float(v), 0.7) for v in (1, 2, 4, 8))
    assert published_comparison(agg, published)["verdict"].tolist() == [
        "pending",
        "not reproduced",
        "pending",
        "reproduced",
    ]
    table = published_comparison(agg, published, axis_values=(1, 2))
    assert table["axis value"].tolist() == [1.0, 2.0, 8.0]  # 4: never run by this sweep, no row
    assert table["verdict"].tolist() == ["pending", "not reproduced", "reproduced"]


def test_a_stored_sweep_is_compared_at_the_values_its_spec_runs(tmp_path):
    """sweep_comparison reads the values off the stored spec: the report of an l = 2 sweep that carries DP-CDA's
    whole printed row gives one verdict, not nine 'without a result yet', and the chart keeps the row's stars."""
    from dataclasses import replace

    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import narrow_spec, sweep_comparison, sweep_published, sweep_results
    from dpmix_core.views.sweep_report import sweep_report

    full = get_preset("dpcda-table2")
    spec = narrow_spec(full, values=[2], series=["eps = 20"], repeats=1)
    spec = replace(spec, published=tuple(p for p in full.published_for("mnist") if p.series == "eps = 20"))
    store = ResultStore(tmp_path / "results.sqlite")
    fake_jobs.finish_sweep(store, spec, lambda config: {"test_accuracy": 0.55, "collapsed": False, "delta": 1e-5})
    agg, _, _ = sweep_results(store, spec.name)
    table = sweep_comparison(store, spec.name, agg)
    assert table["axis value"].tolist() == [2] and table["verdict"].tolist() == ["not reproduced"]
    assert len(sweep_published(store, spec.name)) == 10  # the whole row stays on the chart
    assert "0 of 1 published point(s)" in sweep_report(store, spec.name)


def test_one_rerun_completes_a_sweep_whose_driver_and_worker_were_killed(store, tmp_path):
    """#14 §5: a run left 'running' by a dead worker (driver killed too) is detected before queuing,
    so the very first re-run re-queues and runs it."""
    import subprocess
    import sys

    marker = tmp_path / "marker"
    runs = grid(marker, xs=(1, 2), repeats=1)
    store.submit_many(runs)
    from dpmix_core.runtime.store import HOST

    orphan = store.claim(backend="local", host=HOST)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: the killed worker
    assert store.set_worker(orphan.id, dead.pid)
    summary = run_sweep(store, "killed", runs, backend=fake_jobs.backend(store), poll_s=0.05)
    assert summary.ok and summary.requeued == 1 and executions(marker) == 2


def test_a_sweep_counts_its_collapsed_runs_and_warns_as_train_does(store, tmp_path):
    """Runs that finished with a model that never learned are done, yet no result: the summary says how many."""
    from dpmix_core.experiments.sweeps import SweepSummary, collapsed_runs

    runs = [store.submit("fake_jobs:quick", {"x": x}) for x in range(4)]
    for run, collapsed in zip(runs[:3], (True, False, True)):
        store.claim(run.id)
        store.finish(run.id, {"test_accuracy": 0.1 if collapsed else 0.9, "collapsed": collapsed})
    ids = [run.id for run in runs]
    assert collapsed_runs(store, ids) == 2 and collapsed_runs(store, ids[1:2]) == 0  # the queued run is not counted
    summary = SweepSummary(1, "s", 4, {"done": 3, "queued": 1}, 4, 0, 0, 1.0, collapsed=2)
    assert summary.collapse_warning().startswith("WARNING: 2 of 3 done run(s) collapsed: the model never learned")
    assert summary.to_dict()["collapsed"] == 2 and "collapsed" not in summary.line()
    assert SweepSummary(1, "s", 1, {"done": 1}, 1, 0, 0, 1.0).collapse_warning() is None


def test_progress_says_where_the_running_runs_stand(store, tmp_path):
    """A 200-epoch sweep's line moves between runs ending: the running runs' epochs and the longest estimate."""
    marker = tmp_path / "marker"
    calls = []
    runs = grid(marker, xs=(1, 2), repeats=1, kind="fake_jobs:slow", epochs=6, step_s=0.15)
    summary = run_sweep(
        store,
        "s",
        runs,
        backend=fake_jobs.backend(store, max_parallel=2),
        poll_s=0.05,
        progress=lambda *a: calls.append(a),
    )
    assert summary.ok
    details = [detail for *_, running, _, detail in calls if running]
    assert any(d.startswith("epoch ") and "/6" in d and "done in ≈" in d for d in details), details
    assert calls[-1][-1] == ""  # nothing running at the end: no detail


def test_running_detail_names_epochs_and_the_longest_estimate(store):
    runs = [store.submit("fake_jobs:slow", {"x": x}) for x in range(6)]
    for i, run in enumerate(runs[:5]):
        store.claim(run.id)
        store.update_progress(run.id, {"epoch": 10 + i, "epochs": 200, "eta_seconds": 600.0 * (i + 1)})
    ids = [run.id for run in runs]
    assert running_detail(store, ids) == (
        "epoch 10/200, 11/200, 12/200, 13/200 and 1 more; the running ones done in ≈ 50 min"
    )
    assert running_detail(store, [runs[5].id]) == ""  # queued: nothing to say
    store.claim(runs[5].id)
    store.update_progress(runs[5].id, {"phase": "synthesis"})  # running, no epoch, no estimate yet
    assert running_detail(store, [runs[5].id]) == ""


def test_waiting_detail_says_why_queued_runs_do_not_start(store):
    """A second sweep on the same store waits for the first one's runs (max_parallel counts every launcher's)."""
    be = fake_jobs.backend(store, max_parallel=1)
    other, mine = (store.submit("fake_jobs:slow", {"x": x}) for x in range(2))
    assert waiting_detail(store, [mine.id], be) == ""  # nothing running: nothing to wait for
    store.claim(other.id, backend="local", host=be.host)
    assert waiting_detail(store, [mine.id], be) == (
        "waiting: 1 run(s) of another sweep or launcher are running on this backend (at most 1 at once here, "
        "counting theirs: --max-parallel); these start as slots free up"
    )
    assert waiting_detail(store, [mine.id, other.id], be) == ""  # a run of this sweep is not a wait
    store.finish(other.id, {"value": 1})
    assert waiting_detail(store, [mine.id], be) == ""


class _Stream:
    def __init__(self, tty):
        self.text, self.tty = "", tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def test_a_log_gets_epochs_at_most_once_a_minute_and_every_run_that_ends():
    now = [0.0]
    log = _Stream(tty=False)
    bar = TextProgress(log, width=4, clock=lambda: now[0])
    bar(0, 2, 2, 0, "epoch 1/200, 1/200")
    now[0] = 30
    bar(0, 2, 2, 0, "epoch 2/200, 2/200")  # 30 s later: not logged
    now[0] = 61
    bar(0, 2, 2, 0, "epoch 3/200, 3/200")
    now[0] = 62
    bar(1, 2, 1, 0, "epoch 4/200")  # a run ended: logged at once
    assert log.text.splitlines() == [
        "[....] 0/2  done 0  running 2  failed or cancelled 0  · epoch 1/200, 1/200",
        "[....] 0/2  done 0  running 2  failed or cancelled 0  · epoch 3/200, 3/200",
        "[##..] 1/2  done 1  running 1  failed or cancelled 0  · epoch 4/200",
    ]


def test_a_terminal_line_is_redrawn_in_place_and_cleared_to_its_end():
    term = _Stream(tty=True)
    bar = TextProgress(term, width=4)
    bar(0, 1, 1, 0, "epoch 1/200; the running one done in ≈ 50 min")
    bar(0, 1, 1, 0, "epoch 2/200")
    bar(1, 1, 0, 0, "")
    assert term.text.count("\r") == 3 and term.text.count("\x1b[K") == 3 and term.text.endswith("\n")
    assert "\r[....] 0/1  done 0  running 1  failed or cancelled 0  · epoch 2/200\x1b[K" in term.text
