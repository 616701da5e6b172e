"""Tiny job functions and helpers for the store / jobs / sweep tests.

Workers import these as kind ``"fake_jobs:NAME"``: the tests' backends put this folder on the
workers' PYTHONPATH (``extra_pythonpath=[TESTS_DIR]``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from dpmix_core.runtime.jobs import Cancelled as CoreCancelled
from dpmix_core.runtime.jobs import LocalProcessBackend
from dpmix_core.runtime.store import ResultStore

TESTS_DIR = Path(__file__).resolve().parent


def backend(store: ResultStore, **options) -> LocalProcessBackend:
    options.setdefault("max_parallel", 2)
    return LocalProcessBackend(store, extra_pythonpath=[TESTS_DIR], **options)


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.05, pump=None):
    """Poll ``predicate()`` (pumping ``pump`` first) until it is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        if pump is not None:
            pump.pump()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")
        time.sleep(interval)


def status_is(store: ResultStore, run_id: int, *statuses: str):
    def check():
        run = store.get(run_id)
        return run if run is not None and run.status in statuses else None

    return check


def kill_leftovers(store: ResultStore) -> None:
    """Test teardown: no worker outlives its test (even a failed one). Only real workers of these
    runs are signalled (the helper checks /proc), never a made-up pid of a store test."""
    from dpmix_core.runtime.jobs import _signal_worker

    for run in store.list_runs(status="running"):
        if run.pid and run.pid != os.getpid():
            _signal_worker(run, signal.SIGKILL, store.path)


def _mark(config: dict) -> None:
    """Append one line per execution to config["marker"]: counts how often a run really ran."""
    if config.get("marker"):
        with open(config["marker"], "a") as fh:
            fh.write(f"{os.getpid()} {config.get('x')}\n")


def executions(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


# -- job functions: fn(config, reporter) -> dict -----------------------------------------------------
def quick(config, reporter):
    reporter.progress(epoch=1, epochs=1, loss=0.5, accuracy=0.9)
    _mark(config)
    return {
        "value": config.get("x", 0) * 2,
        "pid": os.getpid(),
        "threads": os.environ.get("DPMIX_WORKER_THREADS"),
        "nested": {"a": 1, "list": [1, 2]},
        **({"collapsed": True} if config.get("collapsed") else {}),  # a model that never learned
    }


def slow(config, reporter):
    epochs, step = config.get("epochs", 50), config.get("step_s", 0.1)
    for epoch in range(epochs):
        if reporter.should_stop():
            raise CoreCancelled(f"at epoch {epoch}")
        time.sleep(step)
        reporter.progress(
            epoch=epoch + 1,
            epochs=epochs,
            loss=1 / (epoch + 1),
            accuracy=epoch / epochs,
            eta_seconds=(epochs - epoch - 1) * step,
        )
    _mark(config)
    return {"epochs": epochs, "value": config.get("x", 0)}


def crash(config, reporter):
    reporter.progress(epoch=0)
    raise ValueError(f"boom: {config.get('msg', 'bad config')}")


def sleep_forever(config, reporter):
    """No progress and (with DPMIX_WORKER_NO_HEARTBEAT=1) no heartbeat: goes stale."""
    time.sleep(config.get("seconds", 3600))
    return {}


def hard_exit(config, reporter):
    reporter.progress(epoch=0)
    os._exit(config.get("code", 3))


def stubborn(config, reporter):
    """Never checks should_stop; with ignore_term also ignores SIGTERM (only SIGKILL stops it)."""
    if config.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    reporter.progress(ready=True)
    deadline = time.monotonic() + config.get("seconds", 60)
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return {}


class Cancelled(Exception):  # a job's own class named "Cancelled" also means cancelled
    pass


def own_cancel(config, reporter):
    while True:
        if reporter.should_stop():
            raise Cancelled("stopping (own exception class)")
        time.sleep(0.02)


def not_json(config, reporter):
    return {"x": object()}


# -- multiprocessing helpers for the store tests --------------------------------------------------
def claim_and_write(store_path: str, writes: int) -> list[int]:
    """Claim runs until none is left; for each, write progress ``writes`` times, then finish."""
    store = ResultStore(store_path)
    pid = os.getpid()
    claimed = []
    while True:
        run = store.claim(pid=pid, host="test")
        if run is None:
            return claimed
        claimed.append(run.id)
        for i in range(writes):
            assert store.update_progress(run.id, {"step": i, "by": pid}, pid=pid)
            assert store.heartbeat(run.id, pid=pid) == "ok"
        assert store.finish(run.id, {"by": pid, "writes": writes, "x": run.config["x"]}, pid=pid)


def race_claim(store_path: str, run_id: int) -> bool:
    return ResultStore(store_path).claim(run_id, pid=os.getpid()) is not None


def memo_probe(config, reporter):
    """Computes a small array through the worker's memo: says whether this run computed it (a miss)."""
    import numpy as np

    from dpmix_core.resources.memo import memoized

    computed = []
    value = memoized(("probe", config.get("key", "k")), lambda: computed.append(1) or np.arange(1000))
    return {"pid": os.getpid(), "computed": bool(computed), "read_only": not value.flags.writeable}


def killed_run(config, reporter):
    """The real training job; with ``$FAKE_KILL_AT_EPOCH=N`` its process dies (SIGKILL, no clean-up at all)
    as epoch N reports, as a worker does when its machine goes away."""
    from dpmix_core.experiments.runner import run_job

    at = int(os.environ.get("FAKE_KILL_AT_EPOCH") or 0)

    class Dies:
        def __getattr__(self, name):
            return getattr(reporter, name)

        def progress(self, **fields):
            if at and fields.get("phase") == "train" and fields.get("epoch") == at:
                os.kill(os.getpid(), signal.SIGKILL)
            reporter.progress(**fields)

    return run_job(config, Dies())


def finish_sweep(store: ResultStore, spec, result_for, *, name: str | None = None):
    """The spec's sweep in ``store`` (under ``name``, by default the spec's), with a finished run for every run
    config ``result_for(config)`` gives a result for (None: no run); returns the stored sweep."""
    from dpmix_core.experiments.trade_offs import sweep_jobs

    sweep = store.create_sweep(name or spec.name, spec.to_dict())
    for kind, config, key in sweep_jobs(spec):
        result = result_for(config)
        if result is not None:
            run = store.submit(kind, config, key, sweep=sweep.id)
            store.claim(run.id)
            store.finish(run.id, result)
    return sweep
