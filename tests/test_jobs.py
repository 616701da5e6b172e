"""Background jobs: worker processes launched through the store, cancel, kill -9, crashes, staleness,
a worker outliving its launcher, the parallel bound, worker exit codes and the reporter."""

import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import fake_jobs
import pytest
from fake_jobs import status_is, wait_for

from dpmix_core.runtime.jobs import (
    Backend,
    Cancelled,
    InlineReporter,
    JobManager,
    child_returncode,
    default_max_parallel,
    is_alive,
    is_cancellation,
)
from dpmix_core.runtime.store import ResultStore
from dpmix_core.runtime.worker import EXIT_LOST, Reporter

ROOT = Path(__file__).resolve().parents[1]
FINAL = ("done", "failed", "cancelled", "interrupted")


@pytest.fixture
def store(tmp_path):
    store = ResultStore(tmp_path / "results.sqlite")
    yield store
    fake_jobs.kill_leftovers(store)


def manager(store, **options):
    return JobManager(store, backend=fake_jobs.backend(store, **options))


def test_quick_job_runs_in_its_own_process(store):
    mgr = manager(store)
    assert isinstance(mgr.backend, Backend) and "local processes" in mgr.describe()
    run = mgr.submit("fake_jobs:quick", {"x": 21})
    assert run.status in ("running", "done")  # submit pumps at once
    done = wait_for(status_is(store, run.id, *FINAL), pump=mgr)
    assert done.status == "done", done.error
    assert done.result["value"] == 42 and done.result["pid"] == done.pid != os.getpid()
    assert done.result["threads"] == str(max(1, default_max_parallel() // 2))
    assert done.progress == {"epoch": 1, "epochs": 1, "loss": 0.5, "accuracy": 0.9}
    assert done.started <= done.finished and done.attempts == 1 and done.backend == "local"
    assert "ended: exit code 0" in Path(done.log_path).read_text()
    assert mgr.submit("fake_jobs:quick", {"x": 21}).id == run.id  # the same config is reused
    assert [r.id for r in mgr.runs([run.id, 999])] == [run.id]


def test_cores_are_the_ones_this_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3}, raising=False)
    assert default_max_parallel() == 2  # taskset / a container's cpuset, not the host's 64
    monkeypatch.delattr(os, "sched_getaffinity")
    assert default_max_parallel() == 64  # no affinity API: every core
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert default_max_parallel() == 1


def test_crash_marks_the_run_failed_with_its_error(store):
    mgr = manager(store)
    good = mgr.submit("fake_jobs:quick", {"x": 1})
    bad = mgr.submit("fake_jobs:crash", {"msg": "no such dataset"})
    exits = mgr.submit("fake_jobs:hard_exit", {"code": 3})
    junk = mgr.submit("fake_jobs:not_json", {"x": "junk"})
    missing = mgr.submit("fake_jobs:no_such_function", {"x": "missing"})
    for run in (good, bad, exits, junk, missing):
        wait_for(status_is(store, run.id, *FINAL), pump=mgr)
    failed = store.get(bad.id)
    assert failed.status == "failed" and failed.error_summary == "ValueError: boom: no such dataset"
    assert "Traceback" in failed.error and "fake_jobs.py" in failed.error and failed.progress == {"epoch": 0}
    crashed = store.get(exits.id)
    assert crashed.status == "failed" and "exited with code 3 without reporting a result" in crashed.error
    assert "started" in crashed.error  # the log's tail comes along
    assert store.get(junk.id).error_summary.startswith("TypeError: the job's result is not JSON-serialisable")
    assert store.get(missing.id).error_summary.startswith("AttributeError")
    assert store.get(good.id).status == "done" and store.get(good.id).result["value"] == 2


def test_cancel_stops_a_cooperative_job(store):
    mgr = manager(store)
    run = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    wait_for(lambda: store.get(run.id).progress.get("epoch", 0) >= 2, pump=mgr)
    t0 = time.monotonic()
    assert mgr.cancel(run.id).cancel_requested is not None
    cancelled = wait_for(status_is(store, run.id, *FINAL), timeout=5, pump=mgr)
    assert time.monotonic() - t0 < 5
    assert cancelled.status == "cancelled" and cancelled.error.startswith("cancelled (at epoch")
    assert cancelled.result is None and cancelled.progress["epochs"] == 400
    wait_for(lambda: not is_alive(cancelled.pid), timeout=5)


def test_cancel_queued_run_never_starts(store):
    mgr = manager(store, max_parallel=1)
    first = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    second = mgr.submit("fake_jobs:quick", {"x": 2})
    assert store.get(second.id).status == "queued"
    assert mgr.cancel(second.id).status == "cancelled"
    mgr.cancel(first.id)
    wait_for(status_is(store, first.id, "cancelled"), pump=mgr)
    mgr.pump()
    assert store.get(second.id).pid is None and store.get(second.id).status == "cancelled"


def test_own_cancelled_class_counts_as_cancellation(store):
    assert is_cancellation(fake_jobs.Cancelled()) and is_cancellation(Cancelled())
    assert not is_cancellation(ValueError())
    mgr = manager(store)
    run = mgr.submit("fake_jobs:own_cancel", {})
    wait_for(status_is(store, run.id, "running"), pump=mgr)
    mgr.cancel(run.id)
    assert wait_for(status_is(store, run.id, *FINAL), pump=mgr).status == "cancelled"


def test_cancel_escalates_to_sigterm_then_sigkill(store):
    mgr = manager(store, cancel_grace_s=0.3)
    polite = mgr.submit("fake_jobs:stubborn", {"x": 1})  # ignores should_stop, dies on SIGTERM
    deaf = mgr.submit("fake_jobs:stubborn", {"x": 2, "ignore_term": True})  # only SIGKILL stops it
    wait_for(lambda: all(store.get(r.id).progress.get("ready") for r in (polite, deaf)), pump=mgr)
    mgr.cancel(polite.id)
    mgr.cancel(deaf.id)
    stopped = wait_for(status_is(store, polite.id, *FINAL), timeout=8, pump=mgr)
    assert stopped.status == "cancelled" and stopped.error == "cancelled (worker stopped by SIGTERM)"
    killed = wait_for(status_is(store, deaf.id, *FINAL), timeout=8, pump=mgr)
    assert killed.status == "cancelled" and killed.error == "cancelled (worker stopped)"
    assert not is_alive(killed.pid)


def test_sigterm_without_cancel_fails_cleanly(store):
    mgr = manager(store)
    run = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    pid = wait_for(lambda: store.get(run.id).progress.get("epoch") and store.get(run.id).pid, pump=mgr)
    os.kill(pid, signal.SIGTERM)
    failed = wait_for(status_is(store, run.id, *FINAL), pump=mgr)
    assert failed.status == "failed" and failed.error == "worker terminated by SIGTERM"


def test_a_watching_pump_notices_a_dead_worker_and_starts_nothing(store):
    """pump(start=False), what a page watching someone else's sweep does: a killed worker's run stops showing
    'running', and the queued run is left for its launcher (no worker started)."""
    mgr = manager(store, max_parallel=1)
    victim = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    pid = wait_for(lambda: store.get(victim.id).progress.get("epoch") and store.get(victim.id).pid, pump=mgr)
    waiting = mgr.submit("fake_jobs:quick", {"x": 1}, start=False)
    watcher = fake_jobs.backend(store, max_parallel=1)
    os.kill(pid, signal.SIGKILL)
    watching = types.SimpleNamespace(pump=lambda: watcher.pump(start=False))
    killed = wait_for(status_is(store, victim.id, *FINAL), pump=watching)
    assert killed.status == "interrupted" and f"worker process {pid}" in killed.error
    time.sleep(0.5)
    watcher.pump(start=False)
    assert store.get(waiting.id).status == "queued"  # a pool worker of the launcher's would have taken it
    assert watcher.pump().started == [waiting.id]  # asked to start: it does


def test_kill_9_marks_interrupted_and_leaves_other_results_alone(store):
    mgr = manager(store)
    done = mgr.submit("fake_jobs:quick", {"x": 5})
    wait_for(status_is(store, done.id, "done"), pump=mgr)
    before = store.get(done.id)
    victim = mgr.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    bystander = mgr.submit("fake_jobs:slow", {"epochs": 10, "step_s": 0.05, "x": 7})
    pid = wait_for(lambda: store.get(victim.id).progress.get("epoch") and store.get(victim.id).pid, pump=mgr)
    os.kill(pid, signal.SIGKILL)
    killed = wait_for(status_is(store, victim.id, *FINAL), pump=mgr)
    assert killed.status == "interrupted" and f"worker process {pid} was killed by SIGKILL" in killed.error
    assert wait_for(status_is(store, bystander.id, *FINAL), pump=mgr).result == {"epochs": 10, "value": 7}
    assert store.get(done.id) == before  # untouched, byte for byte


def test_kill_9_without_the_launcher_goes_stale(store):
    """The launcher is gone (server restarted): only the missing heartbeat tells."""
    run = store.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    pid = _launch_from_a_subprocess(store, run.id)
    wait_for(lambda: store.get(run.id).progress.get("epoch"))
    os.kill(pid, signal.SIGKILL)
    time.sleep(1.2)
    assert store.mark_stale(1.0) == [run.id]
    gone = store.get(run.id)
    assert gone.status == "interrupted" and re.match(r"no heartbeat for \d+ s \(worker killed", gone.error)


def test_stale_heartbeat_is_interrupted_and_the_process_stopped(store):
    mgr = manager(store, stale_after_s=1.0, env={"DPMIX_WORKER_NO_HEARTBEAT": "1"})
    run = mgr.submit("fake_jobs:sleep_forever", {})
    pid = wait_for(lambda: store.get(run.id).pid, pump=mgr)
    stale = wait_for(status_is(store, run.id, *FINAL), timeout=10, pump=mgr)
    assert stale.status == "interrupted"
    assert re.fullmatch(r"no heartbeat for \d+ s \(worker killed, server restarted or machine slept\)", stale.error)
    wait_for(lambda: not is_alive(pid), timeout=5, pump=mgr)


def test_a_copy_of_the_store_never_stops_the_original_stores_worker(store, tmp_path):
    """Run ids are per store. The app opened on a copy of a store (or on a second store with a run of the same
    id) sees that run's heartbeat go stale in *its* file; it may mark its own row interrupted, but it must not
    kill the worker, which serves the original. (It once did: a 200-epoch run died this way.)"""
    import sqlite3

    from dpmix_core.runtime.jobs import _is_worker_of

    run = store.submit("fake_jobs:slow", {"epochs": 400, "step_s": 0.05})
    pid = _launch_from_a_subprocess(store, run.id)  # not our child: identified through /proc, as in the app
    wait_for(lambda: store.get(run.id).progress.get("epoch"))
    copy_path = tmp_path / "copy.sqlite"
    with sqlite3.connect(store.path) as src, sqlite3.connect(copy_path) as dst:
        src.backup(dst)
    copy = ResultStore(copy_path)
    assert _is_worker_of(pid, run.id, store.path) is True and _is_worker_of(pid, run.id, copy_path) is False
    backend = fake_jobs.backend(copy, stale_after_s=0.5)
    time.sleep(1.0)
    report = backend.pump()
    assert report.stale == [run.id] and copy.get(run.id).status == "interrupted"  # the copy's own row
    time.sleep(0.5)
    assert is_alive(pid) and store.get(run.id).status == "running"  # the original's worker goes on
    assert store.get(run.id).progress["epoch"] > copy.get(run.id).progress["epoch"]


def test_which_store_a_worker_serves_is_read_as_the_worker_itself_would(tmp_path):
    """--store (relative to the worker's folder), else $DPMIX_STORE (with the worker's ~), else its $HOME's default."""
    from dpmix_core.runtime.jobs import _worker_store
    from dpmix_core.runtime.store import DEFAULT_STORE_IN_HOME

    def started(env, cwd, args=()):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *args], env=env, cwd=cwd)
        time.sleep(0.3)
        return proc

    home = tmp_path / "home"
    home.mkdir()
    cases = [
        ({"HOME": str(home)}, ["--store", "rel.sqlite"], tmp_path / "rel.sqlite"),
        ({"HOME": str(home)}, ["--store=/abs/s.sqlite"], Path("/abs/s.sqlite")),
        ({"HOME": str(home), "DPMIX_STORE": "~/env.sqlite"}, [], home / "env.sqlite"),
        ({"HOME": str(home)}, [], home / DEFAULT_STORE_IN_HOME),
        ({}, [], None),
    ]
    for env, args, expected in cases:
        proc = started({"PATH": os.environ.get("PATH", ""), **env}, tmp_path, args)
        try:
            assert _worker_store(proc.pid, ["python", "-c", "...", *args]) == expected, (env, args)
        finally:
            proc.kill()
            proc.wait()


def test_heartbeat_thread_keeps_a_silent_job_alive(store):
    mgr = manager(store, stale_after_s=2.0, env={"DPMIX_HEARTBEAT_S": "0.2"})
    run = mgr.submit("fake_jobs:sleep_forever", {"seconds": 3.0})
    assert wait_for(status_is(store, run.id, *FINAL), timeout=10, pump=mgr).status == "done"


def test_a_worker_whose_row_is_taken_away_stops_and_writes_nothing(store):
    """Machine slept: the row was marked interrupted; the worker wakes up, must not resurrect it."""
    mgr = manager(store, env={"DPMIX_HEARTBEAT_S": "0.2"})
    run = mgr.submit("fake_jobs:stubborn", {"seconds": 60})
    wait_for(lambda: store.get(run.id).progress.get("ready"), pump=mgr)
    pid = store.get(run.id).pid
    assert store.mark_interrupted(run.id, "declared dead")
    wait_for(lambda: child_returncode(pid) is not None, timeout=8)
    assert child_returncode(pid) == EXIT_LOST
    after = store.get(run.id)
    assert after.status == "interrupted" and after.error == "declared dead" and after.result is None


def _launch_from_a_subprocess(store, run_id) -> int:
    code = (
        "import sys; from dpmix_core.runtime.store import ResultStore; from dpmix_core.runtime.jobs import launch; "
        f"print(launch(ResultStore({str(store.path)!r}), {run_id}, extra_pythonpath=[{str(fake_jobs.TESTS_DIR)!r}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_worker_survives_the_process_that_launched_it(store):
    run = store.submit("fake_jobs:slow", {"epochs": 15, "step_s": 0.1, "x": 3})
    pid = _launch_from_a_subprocess(store, run.id)
    launcher_gone = time.time()
    assert is_alive(pid) and os.getsid(pid) == pid  # its own session: no terminal signal reaches it
    assert store.get(run.id).status == "running"
    done = wait_for(status_is(store, run.id, *FINAL), timeout=15)
    assert done.status == "done" and done.result == {"epochs": 15, "value": 3}
    assert done.pid == pid and done.finished > launcher_gone + 0.5


def test_at_most_max_parallel_run_at_once(store):
    mgr = manager(store, max_parallel=2)
    ids = [mgr.submit("fake_jobs:slow", {"epochs": 3, "step_s": 0.1, "x": x}, start=False).id for x in range(5)]
    peak = 0
    while True:
        report = mgr.pump()
        running = store.list_runs(status="running")
        peak = max(peak, len(running), sum(is_alive(r.pid) for r in running))
        if report.queued + report.running == 0:
            break
        time.sleep(0.05)
    assert peak == 2
    assert [store.get(i).status for i in ids] == ["done"] * 5


def _worker(*args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "dpmix_core.cli.worker", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{fake_jobs.TESTS_DIR}"},
        **kwargs,
    )


def test_worker_command_line_and_exit_codes(store, tmp_path):
    run = store.submit("fake_jobs:quick", {"x": 4})
    assert _worker(str(run.id), "--store", str(store.path)).returncode == 0  # claims a queued run itself
    assert store.get(run.id).result["value"] == 8
    assert _worker(str(run.id), "--store", str(store.path)).returncode == 4  # done: not runnable
    assert _worker("999", "--store", str(store.path)).returncode == 3
    assert _worker("1", "--store", str(tmp_path / "none.sqlite")).returncode == 3
    assert _worker("not-an-id").returncode == 2
    bad = store.submit("fake_jobs:crash", {"x": "bad"})
    assert _worker(str(bad.id), "--store", str(store.path)).returncode == 1
    stop = store.submit("fake_jobs:own_cancel", {"x": "stop"})
    store.claim(stop.id)
    store.request_cancel(stop.id)
    assert _worker(str(stop.id), "--store", str(store.path)).returncode == 5


def test_reporter_rate_limits_reads_and_coalesces_writes(store, monkeypatch):
    run = store.submit("fake_jobs:quick", {"x": 1})
    store.claim(run.id, pid=os.getpid())
    reads, writes = [], []
    real_state, real_update = store.run_state, store.update_progress
    monkeypatch.setattr(store, "run_state", lambda *a, **k: reads.append(1) or real_state(*a, **k))
    monkeypatch.setattr(store, "update_progress", lambda *a, **k: writes.append(1) or real_update(*a, **k))
    reporter = Reporter(store, run.id)
    t0 = time.monotonic()
    stops = [reporter.should_stop() for _ in range(20000)]
    assert not any(stops) and len(reads) <= 1 + (time.monotonic() - t0) / 0.5
    for epoch in range(500):
        reporter.progress(epoch=epoch, loss=1.0 / (epoch + 1))
    assert len(writes) <= 3
    reporter.flush()
    assert store.get(run.id).progress == {"epoch": 499, "loss": 1 / 500}
    with pytest.raises(TypeError):
        reporter.progress(bad=object())
    store.request_cancel(run.id)
    time.sleep(0.55)
    assert reporter.should_stop() and reporter.stop_reason == "cancel"
    with pytest.raises(Cancelled):
        reporter.check()


def test_inline_reporter_runs_a_job_in_process():
    reporter = InlineReporter()
    assert fake_jobs.slow({"epochs": 3, "step_s": 0.0}, reporter) == {"epochs": 3, "value": 0}
    assert [h["epoch"] for h in reporter.history] == [1, 2, 3]
    reporter.cancel()
    with pytest.raises(Cancelled):
        fake_jobs.slow({"epochs": 3, "step_s": 0.0}, reporter)


def test_is_alive():
    assert is_alive(os.getpid()) and not is_alive(None) and not is_alive(0)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not is_alive(proc.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited, not reaped by Popen: a zombie
    assert not is_alive(zombie.pid)
