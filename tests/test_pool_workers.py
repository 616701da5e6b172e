"""Long-lived pool workers (issue #16): one process takes many runs; a crash or kill -9 costs only the
run in hand; cancel and resume work while the pool runs; the memo it keeps is bounded and read-only."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import fake_jobs
import numpy as np
import pytest
from fake_jobs import executions, status_is, wait_for

from dpmix_core.resources.memo import ArrayMemo, MemoLimits, active_memo, memoized
from dpmix_core.runtime.jobs import JobManager, is_alive, pool_command, pool_log_path
from dpmix_core.runtime.store import ResultStore
from dpmix_core.runtime.worker import PoolSettings

ROOT = Path(__file__).resolve().parents[1]
FINAL = ("done", "failed", "cancelled", "interrupted")


@pytest.fixture
def store(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    yield store
    fake_jobs.kill_leftovers(store)


def drain(mgr, ids, timeout=30.0):
    """Pump until every run in ``ids`` is final; the runs."""
    wait_for(lambda: all(mgr.get(i).status in FINAL for i in ids), timeout=timeout, pump=mgr)
    return mgr.runs(ids)


def test_one_worker_runs_several_runs_in_one_process(store, tmp_path):
    marker = tmp_path / "marker"
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))
    ids = [mgr.submit("fake_jobs:quick", {"x": x, "marker": str(marker)}, start=False).id for x in range(4)]
    runs = drain(mgr, ids)
    assert [r.status for r in runs] == ["done"] * 4
    pids = {r.result["pid"] for r in runs}
    assert len(pids) == 1 and pids == {r.pid for r in runs} and os.getpid() not in pids  # one process, not ours
    assert [r.result["value"] for r in runs] == [0, 2, 4, 6] and executions(marker) == 4
    for run in runs:  # each run's output still lands in its own log
        text = Path(run.log_path).read_text()
        assert run.log_path == str(store.log_path(run.id)) and f"run {run.id} ended: exit code 0" in text
        assert all(f"run {other} ended" not in text for other in ids if other != run.id)
    assert "pool worker exits after 4 run(s)" in wait_for(
        lambda: "exits after" in pool_log_path(store).read_text() and pool_log_path(store).read_text()
    )


def test_per_run_workers_are_still_available(store):
    """pool=False keeps one process per run (the comparison the benchmark makes)."""
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1, pool=False))
    ids = [mgr.submit("fake_jobs:quick", {"x": x}, start=False).id for x in range(3)]
    runs = drain(mgr, ids)
    assert len({r.result["pid"] for r in runs}) == 3 and "one process per run" in mgr.describe()


def test_killed_worker_fails_only_its_run_and_the_rest_complete(store):
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))
    victim = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05}, start=False)
    rest = [mgr.submit("fake_jobs:quick", {"x": x}, start=False).id for x in range(3)]
    pid = wait_for(lambda: store.get(victim.id).progress.get("epoch") and store.get(victim.id).pid, pump=mgr)
    assert all(store.get(i).status == "queued" for i in rest)  # one worker, busy with the victim
    os.kill(pid, signal.SIGKILL)
    runs = drain(mgr, [victim.id, *rest])
    killed, others = runs[0], runs[1:]
    assert killed.status == "interrupted" and f"worker process {pid} was killed by SIGKILL" in killed.error
    assert [r.status for r in others] == ["done"] * 3 and [r.result["value"] for r in others] == [0, 2, 4]
    assert {r.pid for r in others} != {pid} and len({r.pid for r in others}) == 1  # the next worker took the rest


def test_a_crashing_job_ends_its_worker_and_the_next_worker_takes_the_rest(store):
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))
    first = mgr.submit("fake_jobs:quick", {"x": 1}, start=False)
    crash = mgr.submit("fake_jobs:hard_exit", {"code": 3}, start=False)
    after = mgr.submit("fake_jobs:quick", {"x": 2}, start=False)
    a, b, c = drain(mgr, [first.id, crash.id, after.id])
    assert a.status == "done" and c.status == "done" and a.pid == b.pid != c.pid
    assert b.status == "failed" and f"worker process {b.pid} exited with code 3" in b.error


def test_cancel_a_queued_run_while_the_pool_runs(store, tmp_path):
    marker = tmp_path / "marker"
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))
    busy = mgr.submit("fake_jobs:slow", {"epochs": 30, "step_s": 0.05, "marker": str(marker)}, start=False)
    keep = mgr.submit("fake_jobs:quick", {"x": 1, "marker": str(marker)}, start=False)
    drop = mgr.submit("fake_jobs:quick", {"x": 2, "marker": str(marker)}, start=False)
    wait_for(status_is(store, busy.id, "running"), pump=mgr)
    assert mgr.cancel(drop.id).status == "cancelled"
    runs = drain(mgr, [busy.id, keep.id, drop.id])
    assert [r.status for r in runs] == ["done", "done", "cancelled"]
    assert runs[0].pid == runs[1].pid and runs[2].pid is None and executions(marker) == 2


def test_cancel_a_running_run_and_the_worker_goes_on(store):
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))
    busy = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05}, start=False)
    nxt = mgr.submit("fake_jobs:quick", {"x": 3}, start=False)
    wait_for(lambda: store.get(busy.id).progress.get("epoch"), pump=mgr)
    mgr.cancel(busy.id)
    cancelled, done = drain(mgr, [busy.id, nxt.id])
    assert cancelled.status == "cancelled" and cancelled.error.startswith("cancelled (at epoch")
    assert done.status == "done" and done.pid == cancelled.pid  # the same worker took the next run


def test_resume_after_the_pool_was_killed_between_runs(store):
    """kill -9 of the whole pool: the run in hand is interrupted; a re-submit re-queues and completes it."""
    be = fake_jobs.backend(store, max_parallel=1)
    mgr = JobManager(store, backend=be)
    victim = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05}, start=False)
    queued = mgr.submit("fake_jobs:quick", {"x": 9}, start=False)
    pid = wait_for(lambda: store.get(victim.id).progress.get("epoch") and store.get(victim.id).pid, pump=mgr)
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not is_alive(pid))
    runs = drain(mgr, [victim.id, queued.id])
    assert runs[0].status == "interrupted" and runs[1].status == "done"
    again = be.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05}, requeue=True)
    assert again.id == victim.id and again.status == "queued"
    mgr.cancel(victim.id)  # (not waiting 20 s for it: the requeue is what resume means)
    assert store.get(victim.id).status == "cancelled"


def test_a_worker_exits_when_the_queue_stays_empty(store):
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1, idle_exit_s=0.3))
    run = mgr.submit("fake_jobs:quick", {"x": 1})
    done = drain(mgr, [run.id])[0]
    wait_for(lambda: not is_alive(done.pid), timeout=10)


def test_worker_memo_survives_across_runs_of_one_process_only(store):
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1, idle_exit_s=0.3))
    ids = [mgr.submit("fake_jobs:memo_probe", {"x": x}, start=False).id for x in range(3)]
    runs = drain(mgr, ids)
    assert [r.result["computed"] for r in runs] == [True, False, False]  # computed once per worker
    assert all(r.result["read_only"] for r in runs)
    # the idle pool worker still reads this store's queue until it exits: let it go, or it may take the runs below
    wait_for(lambda: not is_alive(runs[0].result["pid"]), timeout=10)
    per_run = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1, pool=False))
    ids = [per_run.submit("fake_jobs:memo_probe", {"x": x, "key": "other"}, start=False).id for x in range(2)]
    assert [r.result["computed"] for r in drain(per_run, ids)] == [True, True]


def test_pool_command_line_and_settings(store):
    cmd = pool_command(store.path, max_running=2, idle_exit_s=1.5, cache_mb=64.0, first_run=7)
    assert cmd[1:4] == ["-m", "dpmix_core.cli.worker", "--pool"] and cmd[-2:] == ["--first-run", "7"]
    for bad in ({"max_running": 0}, {"idle_exit_s": -1}, {"poll_s": 0}, {"max_runs": 0}, {"cache_bytes": -1}):
        with pytest.raises(ValueError):
            PoolSettings(**bad)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{fake_jobs.TESTS_DIR}"}
    run = store.submit("fake_jobs:quick", {"x": 5})
    worker = [sys.executable, "-m", "dpmix_core.cli.worker"]
    out = subprocess.run([*worker, "--pool", "--store", str(store.path), "--idle-exit", "0"], env=env, timeout=60)
    assert out.returncode == 0 and store.get(run.id).result["value"] == 10
    assert subprocess.run([*worker, "3", "--pool"], env=env, timeout=60, capture_output=True).returncode == 2
    assert subprocess.run([*worker], env=env, timeout=60, capture_output=True).returncode == 2


# -- the memo ------------------------------------------------------------------------------------------
def test_memo_is_a_bounded_lru_of_read_only_values():
    memo = ArrayMemo(MemoLimits(max_bytes=3000, max_entries=8))
    calls = []

    def make(i):
        return lambda: calls.append(i) or np.full(100, i, dtype=np.float64)  # 800 bytes

    a = memo.get_or_compute("a", make(1))
    assert memo.get_or_compute("a", make(1)) is a and calls == [1] and (memo.hits, memo.misses) == (1, 1)
    with pytest.raises(ValueError):
        a[0] = 5  # shared between runs: read-only
    for key in "bcd":
        memo.get_or_compute(key, make(2))
    assert "a" not in memo and len(memo) == 3 and memo.nbytes == 2400  # the oldest went first
    big = memo.get_or_compute("big", lambda: np.zeros(1000))  # 8000 bytes > bound: returned, not kept
    assert big.shape == (1000,) and "big" not in memo and big.flags.writeable
    with pytest.raises(ValueError):
        MemoLimits(max_entries=0)


def test_memoized_without_a_memo_always_computes():
    calls = []
    for _ in range(2):
        memoized("k", lambda: calls.append(1) or 1)
    assert calls == [1, 1]
    with active_memo(ArrayMemo()):
        for _ in range(2):
            memoized("k", lambda: calls.append(1) or 1)
    assert calls == [1, 1, 1]
    memoized("k", lambda: calls.append(1) or 1)  # the block ended: no memo again
    assert calls == [1, 1, 1, 1]


def test_scattering_features_are_memoised_by_the_worker(monkeypatch):
    from dpmix_core.data import scattering

    computed = []

    def fake(images, **kw):
        computed.append(images.shape)
        return np.ones((len(images), 81, 7, 7), dtype=np.float32)

    monkeypatch.setattr(scattering, "_compute_scattering", fake)
    images = np.zeros((4, 28, 28), dtype=np.uint8)
    scattering.scattering_features(images)
    scattering.scattering_features(images)
    assert len(computed) == 2  # no memo lent: computed (or read from disk) every time
    with active_memo(ArrayMemo()):
        first = scattering.feature_transform("scattering", images)
        again = scattering.feature_transform("scattering", images)
        other = scattering.scattering_features(images + 1)
    assert again is first and first.shape == (4, 81 * 49) and len(computed) == 4  # + one miss, + other input
    assert other.shape == (4, 81, 7, 7)


def test_a_real_run_gives_the_same_result_in_a_pool_as_in_its_own_process(tmp_path):
    """The runner's results do not depend on what the worker ran before (seeds come from the config)."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.trade_offs import JOB_KIND
    from dpmix_core.runtime.jobs import LocalProcessBackend
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    def config(seed):
        return RunConfig(
            method="mixing",
            dataset="embedded",
            synthesis=SynthesisConfig(mechanism="dpmix", l=4, T=200, sigma_x=0.5, sigma_y=0.5),
            model="linear",
            epochs=1,
            train_limit=300,
            test_limit=100,
            seed=seed,
            device="cpu",
        ).to_dict()

    results = {}
    for pool, seeds in ((True, (1, 2)), (False, (2,))):
        store = ResultStore(tmp_path / f"{pool}.sqlite")
        mgr = JobManager(store, backend=LocalProcessBackend(store, max_parallel=1, pool=pool))
        ids = [mgr.submit(JOB_KIND, config(seed), start=False).id for seed in seeds]
        runs = drain(mgr, ids, timeout=240)
        assert all(r.status == "done" for r in runs), [r.error_summary for r in runs]
        results[pool] = runs[-1].result

    def trace(result):
        return [(h["epoch"], h["loss"], h["val_accuracy"]) for h in result["history"]]

    assert trace(results[True]) == trace(results[False]) and len(trace(results[True])) == 1
    assert results[True]["test_accuracy"] == results[False]["test_accuracy"]
    assert results[True]["epsilon"] == results[False]["epsilon"]


def test_ctrl_c_on_a_sweep_stops_its_queue_not_its_run_in_hand(store, tmp_path):
    """Ctrl-C on `sweep`: the launcher returns and exits; its pool worker finishes the run in hand and takes no
    new one (it used to drain the whole queue in the background after "interrupted"); a re-run resumes the rest."""
    marker = tmp_path / "marker"
    configs = [{"marker": str(marker), "x": x, "epochs": 4, "step_s": 0.25} for x in range(3)]
    code = (
        "import fake_jobs; from dpmix_core.runtime.store import ResultStore, config_key; "
        "from dpmix_core.experiments.sweeps import run_sweep\n"
        f"store = ResultStore({str(store.path)!r})\n"
        f"runs = [('fake_jobs:slow', c, config_key(c)) for c in {configs!r}]\n"
        "def ctrl_c(*_):\n    raise KeyboardInterrupt\n"
        "s = run_sweep(store, 's', runs, backend=fake_jobs.backend(store, max_parallel=1), poll_s=0.05,"
        " progress=ctrl_c)\n"
        "print(s.interrupted, s.counts['queued'], s.counts['running'])\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{fake_jobs.TESTS_DIR}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "2", "1"]  # the launcher has exited: one run in hand, two queued
    wait_for(lambda: "taking no new run" in pool_log_path(store).read_text(), timeout=20)
    assert store.counts(sweep="s")["done"] == 1 and store.counts(sweep="s")["queued"] == 2 and executions(marker) == 1
    mgr = JobManager(store, backend=fake_jobs.backend(store, max_parallel=1))  # the same command again: resumes
    runs = drain(mgr, [r.id for r in store.list_runs(sweep="s")])
    assert [r.status for r in runs] == ["done"] * 3 and executions(marker) == 3


def test_a_pool_worker_follows_its_launcher_only_when_told(monkeypatch):
    """launcher_gone: re-parented (the launcher exited) or, started through a wrapper, the launcher's pid gone."""
    from dpmix_core.runtime.worker import launcher_gone

    parent = os.getppid()
    assert not launcher_gone(None, parent)  # no launcher to follow: drains the queue
    assert not launcher_gone(parent, parent)  # still our parent
    assert not launcher_gone(os.getpid(), parent)  # not our parent (a wrapper between), but alive
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert launcher_gone(dead.pid, parent)  # not our parent and no longer running
    monkeypatch.setattr(os, "getppid", lambda: 1)  # re-parented to init: the launcher has exited
    assert launcher_gone(parent, parent)
    with pytest.raises(ValueError, match="launcher_pid"):
        PoolSettings(launcher_pid=0)
