"""One read of a stored sweep for every view of it (trade_offs.StoredSweep, experiments.sweep_view) and the store's
results_version, the key a page caches that read under."""

from __future__ import annotations

import pandas as pd
import pytest
from fake_jobs import finish_sweep

from dpmix_core.experiments.presets import get_preset
from dpmix_core.experiments.quick_vs_full import quick_vs_full
from dpmix_core.experiments.sweep_view import SweepView, view_sweep
from dpmix_core.experiments.trade_offs import (
    JOB_KIND,
    StoredSweep,
    narrow_spec,
    read_stored_sweep,
    runs_left_out,
    sweep_best_axis,
    sweep_comparison,
    sweep_results,
    sweep_rows,
    sweep_run_ids,
    sweep_test_inputs,
    unreadable_runs,
)
from dpmix_core.runtime.store import ResultStore

SERIES = "uniform, Cx = Cy = 1 / rdp-wor"


def _result(accuracy: float, halves: tuple[float, float] | None = None) -> dict:
    halves = halves or (accuracy - 0.01, accuracy + 0.01)
    card = {"epsilons": [{"accountant": "rdp-wor", "epsilon": 1.0, "upper_bound": True}]}
    return {"test_accuracy": accuracy, "test_accuracy_halves": list(halves), "privacy_card": card, "delta": 1e-5}


class NoStore:
    """A store that fails on any use: what is computed from a StoredSweep must not read the store again."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the store was read again (ResultStore.{name})")


@pytest.fixture
def best_m(tmp_path) -> tuple[ResultStore, int]:
    """DPFMix Table 1's best-m sweep (a full protocol, not a quick), one seed, every run finished; accuracy rises
    with m up to 64."""
    store = ResultStore(tmp_path / "results.sqlite")
    spec = narrow_spec(get_preset("dpfmix-table1-m"), repeats=1)
    sweep = finish_sweep(store, spec, lambda cfg: _result(min(cfg["synthesis"]["l"], 64) / 100))
    return store, sweep.id


def test_one_read_holds_what_each_reader_gave_and_the_readers_take_it_without_the_store(best_m):
    store, sweep = best_m
    stored = read_stored_sweep(store, sweep)
    assert isinstance(stored, StoredSweep) and stored.spec is not None and len(stored.rows) == len(stored.run_ids) > 0
    assert {row["config"]["label"] for row in stored.rows} == {cfg.label for cfg in stored.spec.runs()}
    no_store = NoStore()
    assert sweep_rows(no_store, stored) == list(stored.rows)  # type: ignore[arg-type]
    assert sweep_run_ids(no_store, stored) == list(stored.run_ids)  # type: ignore[arg-type]
    assert unreadable_runs(no_store, stored) == []  # type: ignore[arg-type]
    by_id, _, _ = sweep_results(store, sweep, test_rows="even")
    from_read, _, _ = sweep_results(no_store, stored, test_rows="even")  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(by_id, from_read)
    assert sweep_best_axis(no_store, stored) == sweep_best_axis(store, sweep)  # type: ignore[arg-type]
    view = view_sweep(no_store, stored)  # type: ignore[arg-type]  # not a quick-with-full: nothing else to read
    assert isinstance(view, SweepView) and not view.checks and view.check is None


def test_the_view_is_what_the_separate_readers_give(tmp_path):
    """The page and the report show one SweepView: it must agree with each reader called on its own."""
    store = ResultStore(tmp_path / "results.sqlite")
    quick = narrow_spec(get_preset("dpfmix-table1-quick"), series=[SERIES], repeats=2)
    finish_sweep(store, quick, lambda cfg: _result(0.5 + cfg["seed"] / 10))
    full = narrow_spec(get_preset("dpfmix-table1"), series=[SERIES], repeats=1)
    finish_sweep(store, full, lambda cfg: _result(0.55), name="my full re-run")
    sweep = store.get_sweep(quick.name).id
    view = view_sweep(store, sweep, test_rows="odd")
    agg, axis, title = sweep_results(store, sweep, test_rows="odd")
    pd.testing.assert_frame_equal(view.agg, agg)
    assert (view.axis, view.title, view.test_rows) == (axis, title, "odd")
    assert (view.own_inputs, view.loaders) == sweep_test_inputs(store, sweep)
    assert view.left_out == runs_left_out(store, sweep, agg) == 0
    pd.testing.assert_frame_equal(view.comparison, sweep_comparison(store, sweep, agg))
    expected = quick_vs_full(store, sweep, test_rows="odd", test_inputs=view.test_inputs)
    assert view.check is not None and expected is not None and view.check.full_runs == expected.full_runs == 4
    pd.testing.assert_frame_equal(view.check.table, expected.table)
    assert view.check.table["gap (pts)"].tolist() == pytest.approx([0.0] * 4)  # quick mean 55 %, full 55 %


def test_an_unknown_sweep_is_one_error(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    with pytest.raises(ValueError, match="No sweep 7"):
        read_stored_sweep(store, 7)
    with pytest.raises(ValueError, match="No sweep 'nope'"):
        view_sweep(store, "nope")


def test_results_version_moves_with_what_a_view_reads_and_only_with_it(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    seen = [store.results_version()]

    def moved() -> bool:
        now = store.results_version()
        changed = now != seen[-1]
        seen.append(now)
        return changed

    sweep = store.create_sweep("s", {"name": "s"})
    assert moved()  # a new sweep
    run = store.submit(JOB_KIND, {"x": 1}, sweep=sweep.id)
    assert moved()  # a run joined the sweep
    store.claim(run.id)
    store.update_progress(run.id, epoch=1, loss=0.5)
    store.heartbeat(run.id)
    assert not moved()  # a running run's progress is not a result
    store.finish(run.id, {"test_accuracy": 0.5})
    assert moved()  # a result
    store.create_sweep("s", {"name": "s", "values": [1]})
    assert moved()  # the same sweep, another spec
    other = store.create_sweep("t")
    store.submit(JOB_KIND, {"x": 1}, sweep=other.id)  # the done run reused by another sweep
    assert moved()
    store.delete_run(run.id, force=True)
    assert moved()  # a result gone
    assert len(set(seen)) == len(seen) - 1  # every change gave a new value, and no value came back


def test_the_views_of_one_read_parse_no_run_config_again(best_m, monkeypatch):
    """read_stored_sweep parses each finished run's config once (``row["run_config"]``, under its series name in this
    sweep); aggregating and the best-m table read that, not the stored dict: parsing and validating each config in
    every view was most of a 1000-run sweep's report time."""
    from dpmix_core.experiments.config import RunConfig

    store, sweep = best_m
    stored = read_stored_sweep(store, sweep)
    assert all(row["run_config"] == RunConfig.from_dict(row["config"]) for row in stored.rows)
    expected = (sweep_results(store, sweep), sweep_best_axis(store, sweep))
    parsed = []
    from_dict = RunConfig.from_dict
    monkeypatch.setattr(RunConfig, "from_dict", lambda d: parsed.append(d) or from_dict(d))
    agg, axis, title = sweep_results(store, stored)
    best = sweep_best_axis(store, stored)
    assert parsed == []
    pd.testing.assert_frame_equal(agg, expected[0][0])
    assert (axis, title, best) == (*expected[0][1:], expected[1])
