"""Runtime estimates from measured throughput: the cost model rescaled by past runs of this machine (issue 15)."""

import sqlite3

import pytest

from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.presets import estimate_seconds, get_preset
from dpmix_core.experiments.runtime_estimate import (
    NO_HISTORY_RANGE,
    PastRun,
    RuntimeEstimate,
    estimate_runtime,
    estimate_sweep_runtime,
    past_runs,
)
from dpmix_core.experiments.trade_offs import JOB_KIND
from dpmix_core.runtime.store import ResultStore

SPEC = get_preset("dpcda-table2-quick")


def _runs():
    return SPEC.runs()


def test_without_history_the_range_is_the_cost_model_widened_and_says_rough():
    runs = _runs()
    modelled = sum(estimate_seconds(r) for r in runs)
    est = estimate_runtime(runs, [], slots=2)
    assert est.low_minutes == pytest.approx(modelled * NO_HISTORY_RANGE[0] / 2 / 60)
    assert est.high_minutes == pytest.approx(modelled * NO_HISTORY_RANGE[1] / 2 / 60)
    assert est.past_runs == 0 and "rough" in est.text and "no past runs" in est.text


def test_history_of_the_same_model_rescales_the_cost_model():
    """Past runs took 6 to 13 times the model (the issue's numbers): so does the estimate."""
    runs = _runs()
    model = runs[0].model
    modelled = sum(estimate_seconds(r) for r in runs)
    history = [PastRun(model, runs[0].method, 60.0 * k, 10.0) for k in (0.6, 1.3)]  # ratios 3.6 and 7.8
    history += [PastRun("some-other-model", "mixing", 1000.0, 1.0)]  # ignored: another model
    est = estimate_runtime(runs, history, slots=1)
    assert est.low_minutes == pytest.approx(modelled * 3.6 / 60)
    assert est.high_minutes == pytest.approx(modelled * 7.8 / 60)
    assert est.past_runs == 2 and "from 2 past runs of this model" in est.text


def test_many_past_runs_give_the_20_to_80_percent_range():
    run = _runs()[0]
    history = [PastRun(run.model, run.method, float(r), 1.0) for r in range(1, 11)]  # ratios 1..10
    est = estimate_runtime([run], history, slots=1)
    modelled = estimate_seconds(run)
    assert est.low_minutes == pytest.approx(modelled * 2.8 / 60)
    assert est.high_minutes == pytest.approx(modelled * 8.2 / 60)


def test_finished_runs_are_reused_and_cost_nothing():
    runs = _runs()
    est = estimate_runtime(runs, [], slots=2, done_keys=frozenset(run_key(r) for r in runs))
    assert est.runs_to_compute == 0 and est.runs_reused == len(runs) and est.high_minutes == 0.0
    assert "already in the store" in est.text


def test_the_store_history_is_read_with_measured_wall_times(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    cfg = RunConfig(method="non-private", dataset="embedded", model="linear", epochs=1)
    run = store.submit(JOB_KIND, cfg.to_dict(), run_key(cfg))
    store.claim(run.id)
    store.finish(run.id, {"test_accuracy": 0.5})
    with sqlite3.connect(store.path) as conn:  # a run that took 40 s of wall time
        conn.execute("UPDATE runs SET started = 1000.0, finished = 1040.0 WHERE id = ?", (run.id,))
    history = past_runs(store)
    assert len(history) == 1 and history[0].seconds == pytest.approx(40.0) and history[0].model == "linear"
    est = estimate_sweep_runtime(SPEC, store, slots=1)
    assert est.runs_to_compute == len(SPEC.runs())
    keys = {run_key(cfg) for cfg in SPEC.runs()[:2]}  # the runs the data can make, say
    assert estimate_sweep_runtime(SPEC, store, slots=1, keys=keys).runs_to_compute == 2


def test_invalid_estimates_are_refused():
    with pytest.raises(ValueError, match="low <= high"):
        RuntimeEstimate(low_minutes=2.0, high_minutes=1.0, runs_to_compute=1, runs_reused=0, past_runs=0)
    with pytest.raises(ValueError, match="seconds"):
        PastRun("linear", "mixing", 0.0, 1.0)
    with pytest.raises(ValueError, match="slots"):
        estimate_runtime([], [], slots=0)


def test_a_sweep_with_history_for_only_some_models_says_so():
    runs = get_preset("thesis-4.1-quick").runs()
    models = sorted({r.model for r in runs})
    assert len(models) > 1
    history = [PastRun(models[0], "mixing", 30.0, 10.0)]
    est = estimate_runtime(runs, history, slots=2)
    assert 0 < est.runs_from_history < est.runs_to_compute
    assert f"{est.runs_from_history} of {est.runs_to_compute} runs from 1 past run" in est.text and "rough" in est.text
