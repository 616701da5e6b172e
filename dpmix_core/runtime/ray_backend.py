"""Ray backend: run a sweep's runs as Ray tasks, on this machine or on a cluster.

``python -m dpmix_core sweep SPEC --backend ray [--address auto|ray://head:10001|http://head:8265]``.

The driver (the process that calls :meth:`RayBackend.pump`: the CLI's sweep loop) is the single
writer of the results store. Ray workers never open the store, so the store can stay a local
SQLite file next to the driver:

* ``pump()`` claims queued runs of backend ``"ray"`` (up to ``max_parallel``, default: the
  cluster's CPUs) and submits one ``ray.remote`` task per run with the run's resources
  (``config["resources"] = {"cpu": 1, "gpu": 0.25, "memory": bytes}``; default 1 CPU, no GPU);
* the task imports the job (``kind = "package.module:function"``), calls ``fn(config, reporter)``
  with an in-memory reporter and returns ``{"status", "result" | "error", "progress", "node"}``;
* ``pump()`` collects finished tasks with ``ray.wait(timeout=0)`` and writes the result, error or
  cancellation into the store; it refreshes the heartbeat of every run still in flight, so a driver
  that dies leaves runs that go stale and become ``interrupted`` (a re-run of the sweep re-queues them;
  done runs are reused, exactly as with the local backend);
* ``cancel()`` marks the run (queued: cancelled at once) and ``pump()`` calls ``ray.cancel`` on its task
  (``force=True`` after ``cancel_grace_s``).

Live progress: the in-task reporter only records; its last fields are written with the result
(the driver's heartbeat keeps the row alive meanwhile). ``reporter.should_stop()`` is always False
in a task: cancellation goes through ``ray.cancel`` (a KeyboardInterrupt inside the task). The
in-task reporter names no checkpoint file (a cluster node may not see the driver's disk), so a Ray
run that is interrupted trains from epoch 0 when it is queued again; the local backend's runs resume.

Ray is optional (``pip install -r requirements-ray.txt``); this module imports it only when a
backend is built; :func:`dpmix_core.runtime.backends.make_backend` builds it by name.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dpmix_core
from dpmix_core.runtime.jobs import (
    DEFAULT_CANCEL_GRACE_S,
    DEFAULT_STALE_S,
    PumpReport,
    is_alive,
)
from dpmix_core.runtime.store import HOST, ResultStore, Run, SubmitOutcome

__all__ = ["RAY_MISSING", "RayBackend", "import_ray", "run_resources"]

RAY_MISSING = (
    "the Ray backend needs Ray, which is not installed: pip install -r requirements-ray.txt "
    "(or pip install 'ray[default]'), or use --backend local"
)
PACKAGE_ROOT = str(Path(dpmix_core.__file__).resolve().parent.parent)


def import_ray():
    """``import ray`` with a clear ImportError when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(RAY_MISSING) from exc
    return ray


def run_resources(config: Mapping[str, Any]) -> dict[str, float]:
    """Ray task options from ``config["resources"]``: ``{"cpu": 1, "gpu": 0.25, "memory": bytes}``."""
    spec = config.get("resources") or {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"resources must be a mapping like {{'cpu': 1, 'gpu': 0.25}}. Found {spec!r}.")
    unknown = set(spec) - {"cpu", "gpu", "memory"}
    if unknown:
        raise ValueError(f"unknown resources {sorted(unknown)}; use cpu, gpu, memory")
    out = {"num_cpus": float(spec.get("cpu", 1)), "num_gpus": float(spec.get("gpu", 0))}
    if spec.get("memory"):
        out["memory"] = float(spec["memory"])
    if out["num_cpus"] < 0 or out["num_gpus"] < 0:
        raise ValueError(f"resources must be non-negative. Found {dict(spec)}.")
    return out


def _task(kind: str, config: dict, extra_path: Sequence[str]) -> dict:
    """Body of the Ray task: run the job in-process with an in-memory reporter; never raises."""
    for p in reversed(list(extra_path)):
        if p not in sys.path:
            sys.path.insert(0, p)
    from dpmix_core.runtime.jobs import InlineReporter, is_cancellation
    from dpmix_core.runtime.worker import format_error, resolve_callable

    reporter = InlineReporter()
    node = socket.gethostname()
    t0 = time.time()
    try:
        fn = resolve_callable(kind)
        result = fn(dict(config), reporter)
        status, payload = "done", result
    except KeyboardInterrupt:  # ray.cancel(force=False)
        status, payload = "cancelled", "cancelled (ray.cancel)"
    except BaseException as exc:  # noqa: BLE001 - every way a job ends is recorded
        if is_cancellation(exc):
            status, payload = "cancelled", f"cancelled ({exc})"
        else:
            status, payload = "failed", format_error(exc)
    return {
        "status": status,
        "payload": payload,
        "progress": dict(reporter.progress_fields),
        "node": node,
        "pid": os.getpid(),
        "seconds": time.time() - t0,
    }


@dataclass
class _InFlight:
    run_id: int
    ref: Any
    submitted: float
    cancel_sent: float | None = None
    forced: bool = False


class RayBackend:
    """Runs as Ray tasks; this process (the driver) is the only writer of the store.

    ``address``: None (start a local Ray, or use the one already initialised), ``"auto"`` (the
    cluster this machine belongs to), ``"ray://head:10001"`` (Ray Client) or ``"http://head:8265"``
    (the dashboard address: Ray Job submission; for a sweep, submit the CLI itself as a Ray job,
    see docs/SCALING.md -- ``ray.init`` is then called with ``"auto"`` on the head).
    ``num_cpus`` / ``num_gpus``: only when this backend starts a local Ray. ``runtime_env``: passed
    to ``ray.init`` (default for a local Ray: ``PYTHONPATH`` with this package and ``extra_pythonpath``;
    for a remote cluster give e.g. ``{"py_modules": [dpmix_core]}`` or ``{"working_dir": "."}``).
    """

    name = "ray"

    def __init__(
        self,
        store: ResultStore,
        max_parallel: int | None = None,
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        runtime_env: Mapping | None = None,
        extra_pythonpath: Sequence[str | os.PathLike] = (),
        stale_after_s: float = DEFAULT_STALE_S,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
        init: bool = True,
        **_ignored: Any,
    ):
        self.ray = import_ray()
        self.store = store
        self.address = address
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.extra_pythonpath = [os.path.abspath(os.fspath(p)) for p in extra_pythonpath] + [PACKAGE_ROOT]
        self.runtime_env = dict(runtime_env) if runtime_env is not None else None
        self.stale_after_s = float(stale_after_s)
        self.cancel_grace_s = float(cancel_grace_s)
        self._max_parallel = None if max_parallel is None else max(1, int(max_parallel))
        self.pid = os.getpid()
        self.host = HOST
        self._inflight: dict[int, _InFlight] = {}
        self._remote: Any = None
        if init:
            self._ensure_ray()

    # -- where ----------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        if self.address in (None, "", "local"):
            return f"ray (local on {self.host})"
        return f"ray {self.address} (driver {self.host})"

    @property
    def max_parallel(self) -> int:
        if self._max_parallel is None:
            cpus = 1.0
            if self.ray.is_initialized():
                cpus = float(self.ray.cluster_resources().get("CPU", 1.0))
            self._max_parallel = max(1, int(cpus))
        return self._max_parallel

    def describe(self) -> str:
        text = f"Ray tasks on {self.location}"
        if self.ray.is_initialized():
            res = self.ray.cluster_resources()
            text += (
                f": {len([n for n in self.ray.nodes() if n.get('Alive')])} node(s), {res.get('CPU', 0):g} CPU,"
                f" {res.get('GPU', 0):g} GPU"
            )
        return text + f"; up to {self.max_parallel} run(s) at once; driver writes the store {self.store.path}"

    def _ensure_ray(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            address = None if self.address in (None, "", "local") else self.address
            if address and address.startswith(("http://", "https://")):
                address = "auto"  # the dashboard URL names a cluster we run inside of (Ray Job)
            if address:
                kwargs["address"] = address
            else:
                if self.num_cpus is not None:
                    kwargs["num_cpus"] = int(self.num_cpus)
                if self.num_gpus is not None:
                    kwargs["num_gpus"] = int(self.num_gpus)
                kwargs["include_dashboard"] = False
            env = self.runtime_env
            if env is None and not address:
                paths = self.extra_pythonpath + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
                env = {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}
            if env:
                kwargs["runtime_env"] = env
            ray.init(**kwargs)
        if self._remote is None:
            self._remote = ray.remote(max_retries=0)(_task)

    # -- submitting -----------------------------------------------------------------------------
    def submit(
        self,
        kind: str,
        config: Mapping[str, Any],
        key: str | None = None,
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> Run:
        run_resources(config)  # reject a bad resources spec before it is queued
        return self.store.submit(kind, config, key, sweep=sweep, backend=self.name, requeue=requeue)

    def submit_many(
        self,
        runs: Iterable[tuple[str, Mapping[str, Any], str | None]],
        *,
        sweep: Any = None,
        requeue: bool | Iterable[str] = False,
    ) -> list[tuple[Run, SubmitOutcome]]:
        runs = list(runs)
        for _, config, _ in runs:
            run_resources(config)
        return self.store.submit_many(runs, sweep=sweep, backend=self.name, requeue=requeue)

    def cancel(self, run_id: int) -> Run | None:
        """Queued: cancelled now. Running: flagged; the next ``pump()`` calls ``ray.cancel`` on its task."""
        run = self.store.request_cancel(run_id)
        if run is not None and run.status == "running" and run_id in self._inflight:
            self._send_cancel(self._inflight[run_id], force=False)
        return run

    # -- the driver loop --------------------------------------------------------------------------
    def pump(self) -> PumpReport:
        self._ensure_ray()
        ray = self.ray
        report = PumpReport(counts={}, max_parallel=self.max_parallel)
        # 1. Collect finished tasks.
        if self._inflight:
            refs = [f.ref for f in self._inflight.values()]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            by_ref = {f.ref: f for f in self._inflight.values()}
            for ref in ready:
                flight = by_ref[ref]
                self._record(flight)
                self._inflight.pop(flight.run_id, None)
        # 2. Runs still in flight: heartbeat; cancel requests -> ray.cancel (force after the grace period).
        now = time.time()
        for flight in list(self._inflight.values()):
            state = self.store.heartbeat(flight.run_id, pid=self.pid)
            if state == "lost":  # marked interrupted / deleted by someone else: stop the task
                self._send_cancel(flight, force=True)
                self._inflight.pop(flight.run_id, None)
            elif state == "cancel":
                run = self.store.get(flight.run_id)
                asked = (run.cancel_requested if run is not None else None) or now
                if flight.cancel_sent is None:
                    self._send_cancel(flight, force=False)
                    report.signalled.append(flight.run_id)
                elif not flight.forced and now - asked >= self.cancel_grace_s:
                    self._send_cancel(flight, force=True)
                    report.signalled.append(flight.run_id)
        # 3. Ray runs claimed by a driver that is gone (this host) or silent too long -> interrupted.
        report.stale = self.store.mark_stale(self.stale_after_s, backend=self.name)
        for run in self.store.list_runs(status="running", backend=self.name):
            if run.id in self._inflight:
                continue
            if run.host == self.host and run.pid is not None and run.pid != self.pid and not is_alive(run.pid):
                if self.store.mark_interrupted(run.id, f"the Ray driver (pid {run.pid}) is gone"):
                    report.dead.append(run.id)
        # 4. Claim queued runs and submit them as tasks.
        while len(self._inflight) < self.max_parallel:
            run = self.store.claim(backend=self.name, host=self.host, pid=self.pid)
            if run is None:
                break
            try:
                options = run_resources(run.config)
                ref = self._remote.options(**options).remote(run.kind, dict(run.config), self.extra_pythonpath)
            except Exception as exc:  # noqa: BLE001 - bad resources, Ray refused the task...
                self.store.fail(run.id, f"could not submit the Ray task: {type(exc).__name__}: {exc}", pid=self.pid)
                continue
            self._inflight[run.id] = _InFlight(run.id, ref, time.time())
            self.store.update_progress(run.id, {"ray": {"submitted": True, "resources": options}}, pid=self.pid)
            report.started.append(run.id)
        report.counts = self.store.counts()
        return report

    def _send_cancel(self, flight: _InFlight, *, force: bool) -> None:
        try:
            self.ray.cancel(flight.ref, force=force)
        except Exception:  # noqa: BLE001 - already finished, or force unsupported for this task
            pass
        flight.cancel_sent = flight.cancel_sent or time.time()
        flight.forced = flight.forced or force

    def _record(self, flight: _InFlight) -> None:
        ray, run_id = self.ray, flight.run_id
        try:
            out = ray.get(flight.ref, timeout=0)
        except Exception as exc:  # noqa: BLE001 - task cancelled, worker crashed, node lost
            name = type(exc).__name__
            if "Cancel" in name or flight.cancel_sent is not None or self.store.cancel_requested(run_id):
                self.store.mark_cancelled(run_id, "cancelled (ray.cancel)", pid=self.pid)
            else:
                self.store.fail(
                    run_id, f"{name}: Ray task failed: {' '.join(str(exc).split())[:500]}\n\n{exc}", pid=self.pid
                )
            return
        progress = {
            **out.get("progress", {}),
            "ray": {
                "node": out.get("node"),
                "pid": out.get("pid"),
                "seconds": round(float(out.get("seconds", 0.0)), 3),
            },
        }
        try:
            self.store.update_progress(run_id, progress, pid=self.pid)
        except (TypeError, ValueError):
            pass
        status, payload = out["status"], out["payload"]
        if status == "done":
            try:
                self.store.finish(run_id, payload, pid=self.pid)
            except (TypeError, ValueError) as exc:
                self.store.fail(run_id, f"TypeError: the job's result is not JSON-serialisable: {exc}", pid=self.pid)
        elif status == "cancelled":
            self.store.mark_cancelled(run_id, payload, pid=self.pid)
        else:
            self.store.fail(run_id, payload, pid=self.pid)

    def shutdown(self) -> None:
        """Cancel the tasks in flight (their runs become interrupted) and leave Ray initialised."""
        for flight in list(self._inflight.values()):
            self._send_cancel(flight, force=True)
            self.store.mark_interrupted(flight.run_id, "the Ray driver stopped before the run ended", pid=self.pid)
        self._inflight.clear()
