"""Worker processes: ``python -m dpmix_core.cli.worker RUN_ID [--store PATH]`` runs one run of the store;
``python -m dpmix_core.cli.worker --pool [--store PATH]`` (:func:`serve`) is a long-lived worker that takes
queued runs one after another until the queue stays empty (what sweeps use: issue #16).

A per-run worker takes the run (claims it if queued, or attaches to the claim its launcher made), imports the
job's callable (``kind = "package.module:function"``), calls ``fn(config, reporter)`` and stores the
returned dict as the result, or the error (one-line message, then the traceback), or the
cancellation. It writes only its own row, and only while that row is running under its pid.

The reporter: ``progress(**fields)`` merges fields (epoch, epochs, loss, accuracy, eta_seconds, any
JSON values) into the row and refreshes the heartbeat (writes coalesced to one per 0.2 s);
``should_stop()`` says whether a cancel was requested (the database is read at most every 0.5 s);
``check()`` raises :class:`dpmix_core.runtime.jobs.Cancelled` when it should stop. A background thread
also beats every ``$DPMIX_HEARTBEAT_S`` (2 s) so long epochs never look stale
(``DPMIX_WORKER_NO_HEARTBEAT=1`` turns it off, for tests of staleness).

Signals: SIGTERM/SIGINT stop the job (an exception raised inside it). The run becomes
``cancelled`` if a cancel had been requested, else ``failed`` ("worker terminated by SIGTERM").

Checkpoints: the reporter also says where the run keeps its training state
(``checkpoint_path()``, beside its log) and how often to save it (``checkpoint_every_s``,
``$DPMIX_CHECKPOINT_S``, default 60 s). A failed, cancelled or interrupted run that is queued again
continues from its last saved epoch (:mod:`dpmix_core.training.checkpoint`).

Threads: ``DPMIX_WORKER_THREADS`` (set by the launcher, default 1) becomes OMP/MKL/OpenBLAS threads
before the job is imported, and ``torch.set_num_threads`` once torch is loaded by the job module.

A pool worker claims the oldest queued run of its backend itself (under its own pid, bounded by
``max_running``), writes that run's output to the run's own log file, runs it exactly as above, and
keeps its imports, the embedded dataset and a bounded memo of derived arrays (ScatterNet features;
:mod:`dpmix_core.resources.memo`) for the next run. It exits 0 when idle for ``idle_exit_s``, or once
the process that launched it (``--launcher-pid``) has exited, before claiming another run, or with the
run's exit code after a run ended by a signal.

Exit codes (of a per-run worker; a pool worker uses them for the run that stopped it):
    0  done: result stored
    1  failed: the job raised (or could not be imported, or returned non-JSON); error stored
    2  usage error (bad arguments)
    3  no such run, or no store at PATH
    4  run not runnable: not queued, or already taken by another worker
    5  cancelled (cooperatively, or stopped by a signal after a cancel request)
    6  lost: the row stopped being ours while running (marked interrupted or deleted); nothing written
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpmix_core.resources.memo import ArrayMemo, MemoLimits, active_memo
from dpmix_core.runtime.jobs import Cancelled, is_cancellation
from dpmix_core.runtime.store import HOST, ResultStore, Run, dumps_json

__all__ = [
    "checkpoint_interval",
    "EXIT_CANCELLED",
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_LOST",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_RUNNABLE",
    "EXIT_USAGE",
    "Reporter",
    "WorkerTerminated",
    "format_error",
    "MOVED_KINDS",
    "PoolSettings",
    "log",
    "resolve_callable",
    "run_worker",
    "serve",
]

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_NOT_RUNNABLE, EXIT_CANCELLED, EXIT_LOST = range(7)
LOST_EXIT_AFTER_S = 30.0  # a lost worker whose job ignores the stop request exits this long after


def log(message: str) -> None:
    print(f"[dpmix worker {os.getpid()} {time.strftime('%H:%M:%S')}] {message}", flush=True)


class WorkerTerminated(BaseException):
    """Raised inside the job when the worker receives SIGTERM/SIGINT (a BaseException, so a job's
    ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(f"worker terminated by {signal.Signals(signum).name}")
        self.signum = signum


class Reporter:
    """What a job function receives: ``progress(**fields)``, ``should_stop()``, ``check()``, and
    ``checkpoint_path()`` with ``checkpoint_every_s`` (where and how often a long job saves its state)."""

    def __init__(
        self,
        store: ResultStore,
        run_id: int,
        *,
        pid: int | None = None,
        check_interval_s: float = 0.5,
        min_write_interval_s: float = 0.2,
        checkpoint_every_s: float | None = None,
    ):
        self.store = store
        self.run_id = int(run_id)
        self.pid = os.getpid() if pid is None else pid
        self.check_interval_s = check_interval_s
        self.min_write_interval_s = min_write_interval_s
        self.checkpoint_every_s = checkpoint_every_s
        self.stop_reason: str | None = None  # "cancel", "lost" or "signal"
        self._pending: dict[str, Any] = {}
        self._last_write = float("-inf")
        self._last_check = float("-inf")
        self._lock = threading.Lock()

    def _note(self, reason: str) -> None:
        if self.stop_reason is None or reason == "lost":
            self.stop_reason = reason

    def progress(self, **fields: Any) -> None:
        """Record progress (epoch, epochs, loss, accuracy, eta_seconds, ...) and refresh the heartbeat."""
        json.loads(dumps_json(fields))  # a non-JSON value is the job's bug: raise here, where it happened
        with self._lock:
            self._pending.update(fields)
        if time.monotonic() - self._last_write >= self.min_write_interval_s:
            self.flush()

    def flush(self) -> bool:
        """Write pending progress now. False when the run is no longer ours."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return self.stop_reason != "lost"
        try:
            ok = self.store.update_progress(self.run_id, pending, pid=self.pid)
        except sqlite3.Error as exc:  # a busy/locked database must not kill a long job; retry next time
            log(f"could not write progress: {exc}")
            with self._lock:
                self._pending = {**pending, **self._pending}
            return True
        self._last_write = time.monotonic()
        if not ok:
            self._note("lost")
        return ok

    def heartbeat(self) -> None:
        try:
            state = self.store.heartbeat(self.run_id, pid=self.pid)
        except sqlite3.Error as exc:
            log(f"could not write heartbeat: {exc}")
            return
        if state != "ok":
            self._note(state)

    def should_stop(self) -> bool:
        """True once a cancel was requested (or the run is no longer ours). Cheap: reads the store at
        most every ``check_interval_s``; call it as often as you like."""
        if self.stop_reason is not None:
            return True
        now = time.monotonic()
        if now - self._last_check < self.check_interval_s:
            return False
        self._last_check = now
        try:
            state = self.store.run_state(self.run_id, pid=self.pid)
        except sqlite3.Error:
            return False
        if state != "ok":
            self._note(state)
        return self.stop_reason is not None

    def checkpoint_path(self) -> Path:
        """The run's checkpoint file (:meth:`ResultStore.checkpoint_path`): a re-queued run resumes from it."""
        return self.store.checkpoint_path(self.run_id)

    def check(self) -> None:
        """Raise :class:`Cancelled` if the job should stop."""
        if self.should_stop():
            raise Cancelled(f"stopped: {self.stop_reason}")

    def log(self, message: str) -> None:
        """A line in the run's log file."""
        log(message)


class _Heartbeat(threading.Thread):
    def __init__(self, reporter: Reporter, interval_s: float, on_lost: Callable[[], None]):
        super().__init__(name="dpmix-heartbeat", daemon=True)
        self.reporter, self.interval_s, self.on_lost = reporter, interval_s, on_lost
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            self.reporter.heartbeat()
            if self.reporter.stop_reason == "lost" and not self.stopped.is_set():
                self.on_lost()


# Job kinds whose function moved (issue 12's layout): stored runs keep the kind they were written with.
MOVED_KINDS = {"dpmix_core.training.runner:run_job": "dpmix_core.experiments.runner:run_job"}


def resolve_callable(kind: str) -> Callable[..., Any]:
    """``"package.module:function"`` (or ``"package.module:Class.method"``) -> the callable."""
    module_name, sep, qualname = MOVED_KINDS.get(kind, kind).partition(":")
    if not sep:
        raise ValueError(f"job kind must be 'package.module:function', got {kind!r}")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{kind} is not callable")
    return obj


def format_error(exc: BaseException, limit: int = 20000) -> str:
    """One line ``Type: message`` (what pages show), a blank line, then the traceback."""
    head = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > limit:
        text = "...\n" + text[-limit:]
    return f"{head}\n\n{text}"


def checkpoint_interval() -> float | None:
    """``$DPMIX_CHECKPOINT_S``: the least seconds between two training checkpoints (0: every epoch); None
    (unset or not a number >= 0) leaves the training checkpoint's own default, once a minute."""
    text = os.environ.get("DPMIX_CHECKPOINT_S", "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        log(f"DPMIX_CHECKPOINT_S={text!r} is not a number of seconds >= 0; using the default (60 s)")
        return None
    return value


def _apply_thread_env() -> int:
    threads = os.environ.get("DPMIX_WORKER_THREADS") or "1"
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    return int(threads)


def _set_torch_threads() -> None:
    """``torch.set_num_threads($DPMIX_WORKER_THREADS)`` when the job has loaded torch (it is not
    imported only for this: OMP_NUM_THREADS already covers a job that imports it later)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(int(os.environ.get("DPMIX_WORKER_THREADS", "1")))
        except Exception as exc:  # pragma: no cover
            log(f"could not set torch threads: {exc}")


class _Signals:
    """SIGTERM/SIGINT while a job runs raise :class:`WorkerTerminated` inside it (once); between jobs
    they are only recorded (a pool worker then stops taking runs). Installed only in the main thread."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.in_job = threading.Event()
        self.reporter: Reporter | None = None
        self.installed = threading.current_thread() is threading.main_thread()
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        if self.reporter is not None:
            self.reporter._note("signal")
        if self.in_job.is_set():
            self.in_job.clear()  # raise once
            raise WorkerTerminated(signum)

    def install(self) -> None:
        """(Re)install the handlers: a job may have replaced them (e.g. ignored SIGTERM) in a pool worker."""
        if not self.installed:
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def run_worker(store: ResultStore, run_id: int, *, heartbeat_s: float | None = None, standalone: bool = False) -> int:
    """Run one run to its end; returns the exit code (see the module docstring).

    ``standalone`` (the ``python -m`` entry point): a worker whose row is lost and whose job ignores
    the stop request exits by itself after :data:`LOST_EXIT_AFTER_S`.
    """
    pid = os.getpid()
    threads = _apply_thread_env()
    run = store.adopt(run_id, pid=pid, host=HOST)
    if run is None:
        current = store.get(run_id)
        if current is None:
            log(f"no run {run_id} in {store.path}")
            return EXIT_NOT_FOUND
        log(f"run {run_id} is not runnable by this worker (status {current.status}, pid {current.pid})")
        return EXIT_NOT_RUNNABLE
    signals = _Signals()
    signals.install()
    try:
        code, _ = _execute(store, run, pid, signals, threads=threads, heartbeat_s=heartbeat_s, standalone=standalone)
    finally:
        signals.restore()
    return code


def _execute(
    store: ResultStore,
    run: Run,
    pid: int,
    signals: _Signals,
    *,
    threads: int,
    heartbeat_s: float | None,
    standalone: bool,
    memo: ArrayMemo | None = None,
) -> tuple[int, str]:
    """Run a run this process holds (running under ``pid``): call its job, record how it ended.
    Returns (exit code, outcome: done / failed / cancelled / signal)."""
    run_id = run.id
    log(f"run {run_id} ({run.kind}) started, key {run.key[:12]}, {threads} thread(s)")
    started = time.monotonic()
    reporter = Reporter(store, run_id, pid=pid, checkpoint_every_s=checkpoint_interval())
    signals.reporter = reporter
    lost_since: list[float] = []

    def on_lost() -> None:
        if not lost_since:
            lost_since.append(time.monotonic())
            log(f"run {run_id} is no longer ours (marked interrupted or deleted): stopping")
            if signals.installed:
                os.kill(pid, signal.SIGTERM)
        elif standalone and time.monotonic() - lost_since[0] > LOST_EXIT_AFTER_S:
            log("the job does not stop; exiting")
            os._exit(EXIT_LOST)

    beat = None
    if os.environ.get("DPMIX_WORKER_NO_HEARTBEAT", "") in ("", "0"):
        interval = heartbeat_s if heartbeat_s is not None else float(os.environ.get("DPMIX_HEARTBEAT_S") or 2.0)
        beat = _Heartbeat(reporter, interval, on_lost)
        beat.start()
    try:
        with active_memo(memo):
            outcome, payload = _call(run.kind, run.config, reporter, signals.in_job, signals.received)
        if beat is not None:  # stopped before the outcome is written: no beat can race with it
            beat.stopped.set()
            beat.join(timeout=LOST_EXIT_AFTER_S)
        code = _record(store, run_id, pid, reporter, outcome, payload)
    finally:
        if beat is not None:
            beat.stopped.set()
        signals.reporter = None
    log(f"run {run_id} ended: exit code {code} ({outcome}) after {time.monotonic() - started:.1f} s")
    return code, outcome


@dataclass(frozen=True)
class PoolSettings:
    """How a long-lived worker takes runs from the store (issue #16: a process per worker, not per run).

    ``backend``: the runs it takes (oldest queued first). ``first_run``: a run the launcher claimed
    for this worker (taken with :meth:`ResultStore.adopt`, like a per-run worker). ``max_running``: it claims only while fewer
    runs of that backend run on this host (the count and the claim are one transaction, so any number
    of workers and launchers never exceed it). ``idle_exit_s``: it exits after this long with nothing
    to claim (``poll_s`` between looks). ``max_runs``: it exits after this many runs (None: no
    limit). ``cache_bytes``: the bound of the memo it keeps across runs (0: keep nothing).
    ``launcher_pid``: the process that started it (a ``sweep`` in a terminal, the app's server); once that
    process has exited it claims no new run and exits, so Ctrl-C on a sweep, a closed terminal or a stopped
    server leaves the queued runs queued (the run in hand finishes and is stored). None: it drains the queue.
    """

    backend: str = "local"
    first_run: int | None = None
    max_running: int | None = None
    idle_exit_s: float = 2.0
    poll_s: float = 0.2
    max_runs: int | None = None
    cache_bytes: int = 2 << 30
    launcher_pid: int | None = None

    def __post_init__(self) -> None:
        if not self.backend:
            raise ValueError("a pool worker needs the backend whose runs it takes (e.g. 'local')")
        if self.max_running is not None and self.max_running < 1:
            raise ValueError(f"max_running must be >= 1 (or None). Found {self.max_running}.")
        if not (self.idle_exit_s >= 0 and self.poll_s > 0):
            raise ValueError(f"idle_exit_s must be >= 0 and poll_s > 0. Found {self.idle_exit_s}, {self.poll_s}.")
        if self.max_runs is not None and self.max_runs < 1:
            raise ValueError(f"max_runs must be >= 1 (or None). Found {self.max_runs}.")
        if self.cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0. Found {self.cache_bytes}.")
        if self.launcher_pid is not None and self.launcher_pid < 1:
            raise ValueError(f"launcher_pid must be a process id >= 1 (or None). Found {self.launcher_pid}.")


def launcher_gone(launcher_pid: int | None, parent_at_start: int) -> bool:
    """Whether the process that started this worker has exited: this process was re-parented (its parent is no
    longer the launcher), or, when the launcher was not its parent (started through a wrapper), that pid is gone.
    None: no launcher to follow."""
    if launcher_pid is None:
        return False
    if parent_at_start == launcher_pid:
        return os.getppid() != launcher_pid
    try:
        os.kill(launcher_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _run_log(store: ResultStore, run_id: int, pid: int) -> Path:
    """The run's own log file (what pages and the launcher's dead-worker message show)."""
    path = store.log_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} run {run_id}: pool worker {pid} on {HOST} ===\n".encode())
    store.set_worker(run_id, pid, log_path=path)
    return path


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Point this process's stdout and stderr (file descriptors 1 and 2, so C libraries too) at
    ``path`` for the block, then back to where they were (the pool worker's own log)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def serve(store: ResultStore, settings: PoolSettings | None = None, *, heartbeat_s: float | None = None) -> int:
    """A long-lived worker: claim the next queued run, run it, repeat; exit when idle (issue #16).

    The process pays interpreter start, imports and its data once; the memo (``settings.cache_bytes``,
    :mod:`dpmix_core.resources.memo`) keeps derived arrays (ScatterNet features) across runs. Each run
    is claimed under this process's pid with the same rules as a per-run worker (heartbeat thread,
    reporter, conditional writes), so the store's state diagram is unchanged: a crash or a kill -9
    leaves only the run in hand ``running``, which the launcher marks failed/interrupted (dead pid)
    or :meth:`ResultStore.mark_stale` marks interrupted; the queued runs stay queued for the next worker.
    A run ended by a signal (SIGTERM after a cancel's grace period, or the worker's own stop when its
    row was taken away) or whose row was taken away ends the worker too, with that run's exit code (a
    launcher may be about to signal the process that held a stale row); otherwise it exits 0.
    """
    settings = settings or PoolSettings()
    pid = os.getpid()
    parent_at_start = os.getppid()
    threads = _apply_thread_env()
    memo = ArrayMemo(MemoLimits(max_bytes=settings.cache_bytes))
    signals = _Signals()
    done = 0
    first = settings.first_run
    idle_since = time.monotonic()
    log(f"pool worker for {settings.backend!r} runs of {store.path}: up to {settings.max_running} at once on {HOST}")
    try:
        while not signals.received and (settings.max_runs is None or done < settings.max_runs):
            signals.install()
            if first is not None:
                run, first = store.adopt(first, pid=pid, host=HOST), None
                if run is None:
                    log(f"run {settings.first_run} is not runnable by this worker; taking queued runs")
                    continue
            elif launcher_gone(settings.launcher_pid, parent_at_start):
                log(f"launcher {settings.launcher_pid} has exited: taking no new run (the queued ones stay queued)")
                break
            else:
                run = store.claim(backend=settings.backend, host=HOST, pid=pid, max_running=settings.max_running)
            if run is None:
                if time.monotonic() - idle_since >= settings.idle_exit_s:
                    break
                time.sleep(settings.poll_s)
                continue
            with _output_to(_run_log(store, run.id, pid)):
                code, outcome = _execute(
                    store, run, pid, signals, threads=threads, heartbeat_s=heartbeat_s, standalone=True, memo=memo
                )
            done += 1
            idle_since = time.monotonic()
            if outcome == "signal" or code == EXIT_LOST:  # stopped, or its row was taken away: stop here
                log(f"stopping after run {run.id} ({'ended by a signal' if outcome == 'signal' else 'lost'})")
                return code
    finally:
        signals.restore()
    log(f"pool worker exits after {done} run(s); memo {memo.hits} hit(s), {memo.misses} miss(es)")
    return EXIT_DONE


def _call(kind: str, config: dict, reporter: Reporter, in_job: threading.Event, received: list[int]) -> tuple[str, Any]:
    if received:
        return "signal", received[0]
    try:
        in_job.set()
        try:
            fn = resolve_callable(kind)
            _set_torch_threads()
            result = fn(dict(config), reporter)
        finally:
            in_job.clear()
        return "done", result
    except WorkerTerminated as exc:
        return "signal", exc.signum
    except BaseException as exc:  # noqa: BLE001 - the worker must record every way a job can end
        if received:
            return "signal", received[0]
        if is_cancellation(exc):
            return "cancelled", str(exc)
        return "failed", format_error(exc)


def _record(store: ResultStore, run_id: int, pid: int, reporter: Reporter, outcome: str, payload: Any) -> int:
    try:
        reporter.flush()
        if reporter.stop_reason == "lost":
            return EXIT_LOST
        if outcome == "done":
            try:
                ok = store.finish(run_id, payload, pid=pid)
            except (TypeError, ValueError) as exc:
                ok = store.fail(run_id, f"TypeError: the job's result is not JSON-serialisable: {exc}", pid=pid)
                return EXIT_FAILED if ok else EXIT_LOST
            return EXIT_DONE if ok else EXIT_LOST
        if outcome == "cancelled":
            reason = "cancelled" + (f" ({payload})" if payload else "")
            return EXIT_CANCELLED if store.mark_cancelled(run_id, reason, pid=pid) else EXIT_LOST
        if outcome == "signal":
            name = signal.Signals(payload).name
            if reporter.stop_reason == "cancel" or store.cancel_requested(run_id):
                ok = store.mark_cancelled(run_id, f"cancelled (worker stopped by {name})", pid=pid)
                return EXIT_CANCELLED if ok else EXIT_LOST
            ok = store.fail(run_id, f"worker terminated by {name}", pid=pid)
            return EXIT_FAILED if ok else EXIT_LOST
        ok = store.fail(run_id, payload, pid=pid)
        if ok:
            log(payload.splitlines()[0])
        return EXIT_FAILED if ok else EXIT_LOST
    except sqlite3.Error as exc:  # the store is unwritable: the heartbeat stops, the run goes stale
        log(f"could not record the outcome ({outcome}) of run {run_id}: {exc}")
        return EXIT_FAILED
