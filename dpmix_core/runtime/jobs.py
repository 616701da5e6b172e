"""Background jobs: run them in worker OS processes and supervise them through the store.

A job is ``(kind, config, key)``: ``kind`` is a callable path ``"package.module:function"`` called as
``fn(config, reporter) -> dict`` in a worker process started in a new session, so it outlives the
app's reruns, closed tabs and even a server restart: by default a long-lived pool worker
(``python -m dpmix_core.cli.worker --pool --store PATH``) that takes queued runs one after another and
pays process start, imports and data loading once, not per run (issue #16); or one process per run
(``python -m dpmix_core.cli.worker RUN_ID --store PATH``: :func:`launch`, ``pool=False``).
The SQLite store is the only channel between the launcher and its workers:

* the launcher (``LocalProcessBackend.pump``) starts workers up to ``max_parallel`` (pool workers
  claim their runs themselves; per-run workers get the run the launcher claimed), marks runs with a
  stale heartbeat ``interrupted``, notices dead worker processes (only the run a dead worker held is
  affected) and stops cancelled workers that ignore their cancel flag after a grace period;
* a worker writes only its own row (progress, heartbeat, result or error).

``pump()`` is idempotent and needs no threads: call it from every Streamlit rerun (or a fragment
that reruns every few seconds) and from the CLI loop. Nothing here imports Streamlit.

Backends: :class:`Backend` is the small interface a later Ray backend implements too (submit, pump,
cancel, describe). :class:`JobManager` is the facade that pages and the CLI use.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import dpmix_core
from dpmix_core.runtime.store import DEFAULT_STORE_IN_HOME, HOST, ResultStore, Run, SubmitOutcome
from dpmix_core.training.cancel import Cancelled

__all__ = [
    "DEFAULT_CANCEL_GRACE_S",
    "DEFAULT_STALE_S",
    "Backend",
    "Cancelled",
    "InlineReporter",
    "JobError",
    "JobManager",
    "LocalProcessBackend",
    "PumpReport",
    "cap_torch_threads",
    "default_max_parallel",
    "is_alive",
    "is_cancellation",
    "launch",
    "pool_command",
    "pool_log_path",
    "worker_command",
]

DEFAULT_STALE_S = 30.0  # workers beat every ~2 s; 30 s without one means the worker is gone
DEFAULT_CANCEL_GRACE_S = 10.0  # after a cancel request: SIGTERM at 1x grace, SIGKILL at 2x grace
_NEW_PROCESS_GRACE_S = 10.0  # a pid whose /proc cmdline is not (yet) the worker's is trusted this long
_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)


class JobError(RuntimeError):
    """A run cannot be launched (not queued, worker could not start...)."""


def is_cancellation(exc: BaseException) -> bool:
    return any(cls.__name__ == "Cancelled" for cls in type(exc).__mro__)


def default_max_parallel() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's cpuset) where the OS
    reports one, else ``os.cpu_count()``; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return max(1, os.cpu_count() or 1)


class InlineReporter:
    """A reporter for running a job function in-process (tests, notebooks): records progress, and
    ``should_stop()`` returns True once :meth:`cancel` was called."""

    def __init__(self) -> None:
        self.history: list[dict] = []
        self.progress_fields: dict = {}
        self._stop = threading.Event()

    def progress(self, **fields: Any) -> None:
        self.history.append(dict(fields))
        self.progress_fields.update(fields)

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def check(self) -> None:
        if self.should_stop():
            raise Cancelled("cancelled")

    def heartbeat(self) -> None:
        pass

    def cancel(self) -> None:
        self._stop.set()


# -- processes ---------------------------------------------------------------------------------------
_CHILDREN: dict[int, subprocess.Popen] = {}  # workers this process started, so they can be reaped
_CHILDREN_LOCK = threading.Lock()


def _child(pid: int) -> subprocess.Popen | None:
    with _CHILDREN_LOCK:
        return _CHILDREN.get(pid)


def child_returncode(pid: int) -> int | None:
    """Exit status of a worker this process launched (negative: killed by that signal), else None."""
    proc = _child(pid)
    return None if proc is None else proc.poll()


def is_alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists and is not a zombie (no psutil; POSIX ``kill(pid, 0)``)."""
    if not pid or pid <= 0:
        return False
    proc = _child(pid)
    if proc is not None:  # our own child: poll() also reaps it, so it never lingers as a zombie
        return proc.poll() is None
    if os.name == "nt":  # pragma: no cover - os.kill(pid, 0) would terminate the process on Windows
        return _windows_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # an exited child we did not register: reap it
            return False
    except ChildProcessError:
        pass
    except OSError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _windows_alive(pid: int) -> bool:  # pragma: no cover
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]  # Windows only
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    code = ctypes.c_ulong()
    kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
    kernel32.CloseHandle(handle)
    return code.value == 259  # STILL_ACTIVE


def _cmdline(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None


def _worker_store(pid: int, args: list[str]) -> Path | None:
    """The results store a worker process serves, as :func:`~dpmix_core.runtime.store.default_store_path` finds it
    in that process: its ``--store``, else its ``$DPMIX_STORE``, else the default under its ``$HOME`` (``~`` is
    its home, a relative path is relative to its working folder); None when /proc does not say."""
    value = None
    for i, arg in enumerate(args):
        if arg == "--store" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--store="):
            value = arg.split("=", 1)[1]
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        environ = dict(os.fsdecode(e).split("=", 1) for e in raw if b"=" in e)
        value = value or environ.get("DPMIX_STORE") or None
        home = environ.get("HOME")
        if value is None:
            return Path(home) / DEFAULT_STORE_IN_HOME if home else None
        if value == "~" or value.startswith("~/"):
            if not home:
                return None
            value = home + value[1:]
        path = Path(value)
        return path if path.is_absolute() else Path(os.readlink(f"/proc/{pid}/cwd")) / path
    except OSError:
        return None


def _same_store(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _is_worker_of(pid: int, run_id: int, store_path: str | os.PathLike) -> bool | None:
    """True/False when /proc tells whether ``pid`` is the worker of ``run_id`` of the store at ``store_path``;
    None when it cannot. Run ids are per store (every store has a run 1), so a worker of another store --
    a copy of this one, or a second store on this machine -- is not ours, whatever its run id."""
    if _child(pid) is not None:
        return True
    args = _cmdline(pid)
    if not args:
        return None
    is_worker = any("dpmix_core" in a and ("cli.worker" in a or a.endswith("worker.py")) for a in args)
    if not (is_worker and ("--pool" in args or str(run_id) in args)):  # a pool worker runs whichever run it claimed
        return False
    theirs = _worker_store(pid, args)
    return None if theirs is None else _same_store(theirs, Path(store_path))


def _run_process_alive(run: Run, store_path: str | os.PathLike) -> bool:
    """Liveness of a running run's worker on this host (guards against reused pids and other stores' workers)."""
    if not is_alive(run.pid):
        return False
    mine = _is_worker_of(run.pid, run.id, store_path)  # type: ignore[arg-type]
    if mine is False and (run.started or 0) < time.time() - _NEW_PROCESS_GRACE_S:
        return False  # the pid now belongs to someone else (reboot, pid reuse, another store's worker)
    return True


def _signal_worker(run: Run, sig: int, store_path: str | os.PathLike) -> bool:
    """Send ``sig`` to the worker's process group (its own session), never to a stranger: not to a reused pid,
    and not to a worker of another store whose run has the same id."""
    pid = run.pid
    if not pid or not is_alive(pid) or _is_worker_of(pid, run.id, store_path) is False:
        return False
    try:
        if hasattr(os, "killpg") and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError, OSError):
        return False


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _log_tail(path: str | None, limit: int = 2000) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode(errors="replace").strip()
    except OSError:
        return ""


def worker_command(run_id: int, store_path: str | os.PathLike, *, python: str | None = None) -> list[str]:
    return [
        python or sys.executable,
        "-m",
        "dpmix_core.cli.worker",
        str(int(run_id)),
        "--store",
        os.path.abspath(os.fspath(store_path)),
    ]


def pool_command(
    store_path: str | os.PathLike,
    *,
    max_running: int,
    idle_exit_s: float,
    cache_mb: float,
    backend: str = "local",
    first_run: int | None = None,
    python: str | None = None,
    launcher_pid: int | None = None,
) -> list[str]:
    """The command line of a long-lived pool worker (``runtime.worker.serve``); ``first_run``: a run
    the launcher claimed for it (it runs that one first); ``launcher_pid``: it takes no new run once that
    process has exited."""
    first = [] if first_run is None else ["--first-run", str(int(first_run))]
    if launcher_pid is not None:
        first += ["--launcher-pid", str(int(launcher_pid))]
    return [
        python or sys.executable,
        "-m",
        "dpmix_core.cli.worker",
        "--pool",
        "--store",
        os.path.abspath(os.fspath(store_path)),
        "--backend",
        backend,
        "--max-running",
        str(int(max_running)),
        "--idle-exit",
        repr(float(idle_exit_s)),
        "--cache-mb",
        repr(float(cache_mb)),
        *first,
    ]


def _is_pool_of(args: list[str], store_arg: str, backend: str) -> bool:
    """Whether a command line (as :func:`pool_command` builds it) is a pool worker of this store and backend."""

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args[:-1] else None

    return "--pool" in args and value("--store") == store_arg and value("--backend") == backend


def worker_env(
    threads: int, *, extra_pythonpath: Iterable[str | os.PathLike] = (), env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The parent's environment plus: torch/BLAS threads, unbuffered output, ``dpmix_core`` importable."""
    out = dict(os.environ)
    out.update(env or {})
    thread_text = str(max(1, int(threads)))
    out["DPMIX_WORKER_THREADS"] = thread_text
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        out[name] = thread_text
    out["PYTHONUNBUFFERED"] = "1"
    package_root = str(Path(dpmix_core.__file__).resolve().parent.parent)
    paths = [os.fspath(p) for p in extra_pythonpath] + [package_root]
    if out.get("PYTHONPATH"):
        paths.append(out["PYTHONPATH"])
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return out


def _popen(command: list[str], log_path: Path, header: str, env: dict[str, str]) -> subprocess.Popen:
    """Start a worker in its own session (it outlives this process), output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {header} on {HOST} ===\n".encode())
        log.flush()
        kwargs: dict[str, Any] = {}
        if os.name == "nt":  # pragma: no cover
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | 0x00000008  # type: ignore[attr-defined]
        else:
            kwargs["start_new_session"] = True
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, close_fds=True, **kwargs
        )
    with _CHILDREN_LOCK:
        _CHILDREN[proc.pid] = proc
    return proc


def _spawn(
    store: ResultStore,
    run_id: int,
    *,
    threads: int,
    env: Mapping[str, str] | None,
    extra_pythonpath: Iterable[str | os.PathLike],
    python: str | None,
) -> int:
    """Start the worker of a run already claimed (running, no pid yet). Returns its pid."""
    log_path = store.log_path(run_id)
    try:
        proc = _popen(
            worker_command(run_id, store.path, python=python),
            log_path,
            f"run {run_id}: starting worker",
            worker_env(threads, extra_pythonpath=extra_pythonpath, env=env),
        )
    except OSError as exc:
        store.fail(run_id, f"could not start the worker: {exc}")
        raise JobError(f"could not start the worker of run {run_id}: {exc}") from exc
    store.set_worker(run_id, proc.pid, log_path=log_path)
    return proc.pid


def pool_log_path(store: ResultStore) -> Path:
    """Where pool workers write what happens between runs (each run's output goes to its own log)."""
    return store.log_dir / "pool-workers.log"


def launch(
    store: ResultStore,
    run_id: int,
    *,
    threads: int | None = None,
    env: Mapping[str, str] | None = None,
    extra_pythonpath: Iterable[str | os.PathLike] = (),
    python: str | None = None,
) -> int:
    """Claim queued run ``run_id`` and start its worker process in a new session. Returns the pid.

    The worker survives this process: stdout/stderr go to ``store.log_path(run_id)``.
    Raises :class:`JobError` if the run is not queued.
    """
    run = store.claim(run_id, backend="local", host=HOST)
    if run is None:
        current = store.get(run_id)
        raise JobError(f"run {run_id} is {'missing' if current is None else current.status}, not queued")
    return _spawn(store, run_id, threads=threads or 1, env=env, extra_pythonpath=extra_pythonpath, python=python)


def cap_torch_threads(n: int | None = None) -> int:
    """Cap torch's intra-op threads in this process (call once from the app, so the Streamlit process
    leaves the cores to the workers). Default ``$DPMIX_APP_THREADS`` or half the cores. Torch is not
    imported just for this: if it is not loaded yet, ``OMP_NUM_THREADS`` is set for when it is."""
    if n is None:
        n = int(os.environ.get("DPMIX_APP_THREADS") or max(1, default_max_parallel() // 2))
    n = max(1, int(n))
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(n)
        except Exception:  # pragma: no cover
            pass
    else:
        os.environ.setdefault("OMP_NUM_THREADS", str(n))
    return n


# -- backends ----------------------------------------------------------------------------------------
@dataclass
class PumpReport:
    """What one ``pump()`` did, and the store's counts afterwards (JSON-ready via :meth:`to_dict`)."""

    counts: dict[str, int]
    started: list[int] = field(default_factory=list)  # runs launched by this pump
    stale: list[int] = field(default_factory=list)  # running -> interrupted (no heartbeat)
    dead: list[int] = field(default_factory=list)  # worker process gone without reporting
    signalled: list[int] = field(default_factory=list)  # cancelled runs whose worker got SIGTERM/SIGKILL
    max_parallel: int = 0

    @property
    def running(self) -> int:
        return self.counts.get("running", 0)

    @property
    def queued(self) -> int:
        return self.counts.get("queued", 0)

    def to_dict(self) -> dict:
        return {**asdict(self), "running": self.running, "queued": self.queued}


@runtime_checkable
class Backend(Protocol):
    """Where runs execute. The launcher/driver side; workers only write their own row.

    ``submit`` queues runs in the store tagged with ``name``; ``pump`` (idempotent, called often)
    advances them: start queued ones, detect dead/stale ones, enforce cancels; ``cancel`` requests a
    stop; ``describe`` and ``location`` say where runs go (stored on the sweep row).
    """

    name: str
    store: ResultStore

    @property
    def location(self) -> str: ...

    def describe(self) -> str: ...

    def submit(
        self,
        kind: str,
        config: Mapping[str, Any],
        key: str | None = None,
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> Run: ...

    def submit_many(
        self,
        runs: Iterable[tuple[str, Mapping[str, Any], str | None]],
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> list[tuple[Run, SubmitOutcome]]: ...

    def pump(self) -> PumpReport: ...

    def cancel(self, run_id: int) -> Run | None: ...


class LocalProcessBackend:
    """Runs on this machine in worker processes: long-lived pool workers (default) or one per run.

    ``pool=True`` (issue #16): ``pump`` starts up to ``max_parallel`` ``python -m dpmix_core.cli.worker
    --pool`` processes, each of which claims queued runs one after another and exits after
    ``idle_exit_s`` without work, keeping imports and a memo of up to ``cache_mb`` MiB across runs. A
    worker claims no new run once this process has exited (its run in hand finishes): the queue belongs to
    a live launcher, so Ctrl-C on ``sweep`` leaves queued runs queued for the next ``pump``.
    ``pool=False``: one ``python -m dpmix_core.cli.worker RUN_ID`` process per run, claimed by ``pump``.

    ``max_parallel`` (default: cores) bounds running runs of this backend on this host across every
    launcher sharing the store (the count and the claim are one transaction, whoever claims). Each
    worker gets ``threads_per_worker`` torch/BLAS threads (default: cores // max_parallel, at least 1).
    """

    name = "local"

    def __init__(
        self,
        store: ResultStore,
        max_parallel: int | None = None,
        *,
        stale_after_s: float = DEFAULT_STALE_S,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
        threads_per_worker: int | None = None,
        env: Mapping[str, str] | None = None,
        extra_pythonpath: Sequence[str | os.PathLike] = (),
        python: str | None = None,
        pool: bool = True,
        idle_exit_s: float = 2.0,
        cache_mb: float = 2048.0,
    ):
        if idle_exit_s < 0 or cache_mb < 0:
            raise ValueError(f"idle_exit_s and cache_mb must be >= 0. Found {idle_exit_s}, {cache_mb}.")
        self.pool = bool(pool)
        self.idle_exit_s = float(idle_exit_s)
        self.cache_mb = float(cache_mb)
        self.store = store
        self.max_parallel = max(1, int(max_parallel or default_max_parallel()))
        self.stale_after_s = float(stale_after_s)
        self.cancel_grace_s = float(cancel_grace_s)
        self.threads_per_worker = max(1, int(threads_per_worker or default_max_parallel() // self.max_parallel))
        self.env = dict(env or {})
        self.extra_pythonpath = list(extra_pythonpath)
        self.python = python
        self.host = HOST

    @property
    def location(self) -> str:
        return self.host

    def describe(self) -> str:
        kind = "pool workers (long-lived, one per slot)" if self.pool else "one process per run"
        return (
            f"local processes on {self.host}: up to {self.max_parallel} at once, "
            f"{self.threads_per_worker} thread(s) each, {kind}; store {self.store.path}"
        )

    def submit(
        self,
        kind: str,
        config: Mapping[str, Any],
        key: str | None = None,
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> Run:
        return self.store.submit(kind, config, key, sweep=sweep, backend=self.name, requeue=requeue)

    def submit_many(
        self,
        runs: Iterable[tuple[str, Mapping[str, Any], str | None]],
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> list[tuple[Run, SubmitOutcome]]:
        return self.store.submit_many(runs, sweep=sweep, backend=self.name, requeue=requeue)

    def cancel(self, run_id: int) -> Run | None:
        """Queued: cancelled now. Running: cancel flag; the worker stops at its next ``should_stop()``;
        a worker still alive ``cancel_grace_s`` later gets SIGTERM, then SIGKILL (from ``pump``)."""
        return self.store.request_cancel(run_id)

    def pump(self, *, start: bool = True) -> PumpReport:
        """Notice stale, dead and over-grace cancelled runs; with ``start``, also start workers for queued runs
        (``start=False``: keep what a watcher shows honest without starting work it did not ask for)."""
        report = PumpReport(counts={}, max_parallel=self.max_parallel)
        now = time.time()
        # 1. Heartbeat gone stale -> interrupted; stop the process if it is somehow still here.
        report.stale = self.store.mark_stale(self.stale_after_s)
        for run in self.store.list_runs(ids=report.stale):
            if run.host == self.host and run.backend == self.name:
                _signal_worker(run, _SIGKILL, self.store.path)
        # 2. Our running runs: dead workers, and cancel requests past their grace period.
        running = [r for r in self.store.list_runs(status="running", backend=self.name) if r.host == self.host]
        for run in running:
            if run.pid is None:
                continue  # being launched right now (the heartbeat covers a launcher that died here)
            if not _run_process_alive(run, self.store.path):
                self._record_dead(run)
                report.dead.append(run.id)
            elif run.cancel_requested is not None:
                waited = now - run.cancel_requested
                if waited >= 2 * self.cancel_grace_s:
                    sig = _SIGKILL
                elif waited >= self.cancel_grace_s:
                    sig = signal.SIGTERM
                else:
                    continue
                current = self.store.get(run.id)  # a pool worker may have ended this run and taken another
                if current is None or current.status != "running" or current.pid != run.pid:
                    continue
                if _signal_worker(run, sig, self.store.path):
                    report.signalled.append(run.id)
        # 3. Start queued runs while fewer than max_parallel run here.
        if not start:
            self._forget_exited_children()
            report.counts = self.store.counts()
            return report
        if self.pool:
            report.started = self._start_pool_workers()
            self._forget_exited_children()
            report.counts = self.store.counts()
            return report
        while True:
            claimed = self.store.claim(backend=self.name, host=self.host, max_running=self.max_parallel)
            if claimed is None:
                break
            run = claimed
            try:
                _spawn(
                    self.store,
                    run.id,
                    threads=self.threads_per_worker,
                    env=self.env,
                    extra_pythonpath=self.extra_pythonpath,
                    python=self.python,
                )
            except JobError:
                continue  # recorded as failed on the run
            report.started.append(run.id)
        self._forget_exited_children()
        report.counts = self.store.counts()
        return report

    def _start_pool_workers(self) -> list[int]:
        """Start pool workers for queued runs that no idle worker of ours will take; returns the runs
        claimed for them (each new worker's first run).

        Free slots are ``max_parallel`` minus the runs running here (whoever started them, so a
        second launcher never doubles the work); workers of ours that hold no run are about to claim
        one, so they are subtracted too. A worker that finds no free slot exits after its idle time.
        """
        queued = self.store.counts(backend=self.name)["queued"]
        if queued == 0:
            return []
        running = [r for r in self.store.list_runs(status="running", backend=self.name) if r.host == self.host]
        busy = {r.pid for r in running}
        store_arg = os.path.abspath(os.fspath(self.store.path))
        with _CHILDREN_LOCK:  # our live pool workers of this store and backend
            ours = [
                pid
                for pid, proc in _CHILDREN.items()
                if proc.poll() is None and _is_pool_of(list(proc.args), store_arg, self.name)  # type: ignore[arg-type]
            ]
        idle = sum(pid not in busy for pid in ours)
        wanted = min(queued, self.max_parallel - len(running)) - idle
        started = []
        for _ in range(max(0, wanted)):
            # the launcher claims the new worker's first run, so a submitted run is running at once (as
            # with per-run workers) and a worker that dies before it starts is noticed like any other
            run = self.store.claim(backend=self.name, host=self.host, max_running=self.max_parallel)
            if run is None:
                break
            command = pool_command(
                self.store.path,
                max_running=self.max_parallel,
                idle_exit_s=self.idle_exit_s,
                cache_mb=self.cache_mb,
                backend=self.name,
                first_run=run.id,
                python=self.python,
                launcher_pid=os.getpid(),  # Ctrl-C on a sweep (or a stopped server) stops the queue, not the run
            )
            env = worker_env(self.threads_per_worker, extra_pythonpath=self.extra_pythonpath, env=self.env)
            try:
                proc = _popen(command, pool_log_path(self.store), f"run {run.id}: starting a pool worker", env)
            except OSError as exc:
                self.store.fail(run.id, f"could not start the worker: {exc}")
                continue
            self.store.set_worker(run.id, proc.pid, log_path=self.store.log_path(run.id))
            started.append(run.id)
        return started

    def _record_dead(self, run: Run) -> None:
        """The worker process is gone and its row still says running: say why, never overwrite."""
        code = child_returncode(run.pid)  # type: ignore[arg-type]
        tail = _log_tail(run.log_path)
        detail = f"\n\nlast lines of {run.log_path}:\n{tail}" if tail else ""
        if run.cancel_requested is not None:
            self.store.mark_cancelled(run.id, "cancelled (worker stopped)", pid=run.pid)
        elif code is not None and code < 0:
            self.store.mark_interrupted(
                run.id, f"worker process {run.pid} was killed by {_signal_name(-code)}{detail}", pid=run.pid
            )
        elif code is not None:
            self.store.fail(
                run.id,
                f"worker process {run.pid} exited with code {code} without reporting a result{detail}",
                pid=run.pid,
            )
        else:  # launched by another process (e.g. before a server restart): cause unknown
            self.store.mark_interrupted(
                run.id, f"worker process {run.pid} is gone without reporting (killed or crashed){detail}", pid=run.pid
            )
        with _CHILDREN_LOCK:
            _CHILDREN.pop(run.pid, None)  # type: ignore[arg-type]

    def _forget_exited_children(self) -> None:
        with _CHILDREN_LOCK:
            exited = [pid for pid, proc in _CHILDREN.items() if proc.poll() is not None]
        if not exited:
            return
        still_running = {r.pid for r in self.store.list_runs(status="running", backend=self.name)}
        with _CHILDREN_LOCK:
            for pid in exited:
                if pid not in still_running:  # keep its exit code until its row is settled
                    _CHILDREN.pop(pid, None)


class JobManager:
    """What pages and the CLI hold: a store plus a backend (default: local processes).

    Every method is safe to call from any thread or process at any time; pages keep only run ids and
    call :meth:`pump` then :meth:`runs` on each rerun.
    """

    def __init__(
        self,
        store: ResultStore | None = None,
        max_parallel: int | None = None,
        *,
        backend: Backend | None = None,
        **local_options: Any,
    ):
        self.store = store if store is not None else ResultStore()
        self.backend: Backend = backend or LocalProcessBackend(self.store, max_parallel, **local_options)

    def submit(
        self,
        kind: str,
        config: Mapping[str, Any],
        key: str | None = None,
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
        start: bool = True,
    ) -> Run:
        """Queue a run (idempotent by key) and, with ``start``, pump at once so it starts now."""
        run = self.backend.submit(kind, config, key, sweep=sweep, requeue=requeue)
        if start and run.status == "queued":
            self.pump()
            run = self.store.get(run.id) or run
        return run

    def pump(self) -> PumpReport:
        return self.backend.pump()

    def cancel(self, run_id: int) -> Run | None:
        return self.backend.cancel(run_id)

    def describe(self) -> str:
        return self.backend.describe()

    def get(self, run_id: int) -> Run | None:
        return self.store.get(run_id)

    def runs(self, ids: Iterable[int]) -> list[Run]:
        """The runs with these ids, in that order (missing ones skipped)."""
        ids = [int(i) for i in ids]
        by_id = {r.id: r for r in self.store.list_runs(ids=ids)}
        return [by_id[i] for i in ids if i in by_id]

    def counts(self) -> dict[str, int]:
        return self.store.counts()
