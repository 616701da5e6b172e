"""Sweeps: a list of runs (a grid over sigma, l, T or target epsilon, times repeats) executed by a
backend, every run a row of the results store.

Resumable by construction: runs are identified by key, done runs are reused and never recomputed,
runs still queued or running (e.g. left behind by an interrupted CLI, or launched from the app) are
adopted and waited for, and interrupted runs are re-queued. Failed and cancelled runs are re-run only
when asked (``retry``; CLI ``--retry-failed``).

``run_sweep`` blocks (the CLI); the app calls :func:`submit_sweep` and then pumps its
:class:`~dpmix_core.runtime.jobs.JobManager` on each rerun.

What a spec file means is not decided here: the caller passes ``expand`` (the product uses
``dpmix_core.experiments`` sweeps; see ``dpmix_core.experiments.trade_offs.expand_cli_spec``), so this module
only runs ``(kind, config, key)`` triples.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from dpmix_core.resources.limits import format_duration
from dpmix_core.runtime.jobs import Backend, LocalProcessBackend
from dpmix_core.runtime.store import ResultStore, Run, SubmitOutcome, Sweep

__all__ = [
    "DEFAULT_RETRY",
    "RunSpec",
    "SweepSummary",
    "collapsed_runs",
    "export_csv",
    "keep_widest_repeats",
    "run_sweep",
    "running_detail",
    "waiting_detail",
    "submit_sweep",
]

RunSpec = tuple[str, Mapping[str, Any], "str | None"]  # (kind, config, key or None for the default key)
ProgressFn = Callable[[int, int, int, int, str], None]  # (done, total, running, failed, running_detail)
RUNNING_SHOWN = 4  # epochs of at most this many running runs in a progress line
DEFAULT_RETRY = ("interrupted",)  # re-run on resume; add "failed", "cancelled" to retry those too


@dataclass
class SweepSummary:
    sweep_id: int
    name: str
    total: int
    counts: dict[str, int]
    new: int  # runs never seen before
    reused: int  # runs already in the store (done ones are not recomputed)
    requeued: int  # failed/cancelled/interrupted runs queued again
    elapsed_s: float
    interrupted: bool = False  # KeyboardInterrupt: queued runs stay queued, a re-run resumes
    timed_out: bool = False
    collapsed: int = 0  # done runs whose model never learned (result["collapsed"]): finished, but no result

    @property
    def done(self) -> int:
        return self.counts.get("done", 0)

    @property
    def failed(self) -> int:
        """Runs that ended without a result: failed + cancelled + interrupted."""
        return sum(self.counts.get(s, 0) for s in ("failed", "cancelled", "interrupted"))

    @property
    def pending(self) -> int:
        return self.counts.get("queued", 0) + self.counts.get("running", 0)

    @property
    def ok(self) -> bool:
        return self.done == self.total

    def to_dict(self) -> dict:
        return {**asdict(self), "done": self.done, "failed": self.failed, "pending": self.pending, "ok": self.ok}

    def collapse_warning(self) -> str | None:
        """One line when done runs collapsed (finished, yet no result), as ``train`` warns; else None."""
        if not self.collapsed:
            return None
        return (
            f"WARNING: {self.collapsed} of {self.done} done run(s) collapsed: the model never learned (constant "
            "predictor or chance accuracy), so they are no result; the sweep report names each and its likely cause."
        )

    def line(self) -> str:
        c = self.counts
        text = (
            f"sweep {self.name!r} (id {self.sweep_id}): {self.done}/{self.total} done, {c.get('failed', 0)} failed,"
            f" {c.get('cancelled', 0)} cancelled, {c.get('interrupted', 0)} interrupted, {self.pending} pending;"
            f" {self.reused} reused, {self.new} new, {self.requeued} re-queued; {self.elapsed_s:.1f} s"
        )
        if self.interrupted:
            text += (
                " - interrupted: the runs in hand finish in the background, no new run starts;"
                " run the same command again to resume"
            )
        return text


def submit_sweep(
    store: ResultStore,
    sweep_name: str,
    runs: Iterable[RunSpec],
    *,
    backend: Backend | None = None,
    spec: Mapping[str, Any] | None = None,
    retry: bool | Iterable[str] = DEFAULT_RETRY,
) -> tuple[Sweep, list[tuple[Run, SubmitOutcome]]]:
    """Register (or resume) the sweep and queue its runs without waiting (what the app calls).

    The backend is pumped once before queuing, so a run left ``running`` by a killed worker is
    detected (dead pid or stale heartbeat), marked interrupted and re-queued by this very call:
    one re-run completes an interrupted sweep."""
    backend = backend or LocalProcessBackend(store)
    backend.pump()  # first: runs whose worker died (or went stale) become interrupted, so they are re-queued now
    earlier = store.get_sweep(sweep_name)
    spec = keep_widest_repeats(spec, None if earlier is None else earlier.spec)
    sweep = store.create_sweep(sweep_name, spec, backend=backend.name, location=backend.location)
    submitted = backend.submit_many(list(runs), sweep=sweep.id, requeue=retry)
    return sweep, submitted


def keep_widest_repeats(spec: Mapping[str, Any] | None, stored: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The spec to store for a re-run: the same spec run again with fewer ``repeats`` than the stored one (a piece
    of it, e.g. ``--repeats 1`` after ``--repeats 10``) keeps the stored count, so the seeds that ran stay in the
    sweep's views; any other change to the spec replaces it."""
    if not spec or not stored:
        return spec
    same = {k: v for k, v in spec.items() if k != "repeats"} == {k: v for k, v in stored.items() if k != "repeats"}
    if same and int(stored.get("repeats", 1)) > int(spec.get("repeats", 1)):
        return {**spec, "repeats": stored["repeats"]}
    return spec


def run_sweep(
    store: ResultStore,
    sweep_name: str,
    runs: Sequence[RunSpec],
    *,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
    poll_s: float = 0.5,
    spec: Mapping[str, Any] | None = None,
    retry: bool | Iterable[str] = DEFAULT_RETRY,
    timeout_s: float | None = None,
) -> SweepSummary:
    """Submit the runs as sweep ``sweep_name`` and pump the backend until none is queued or running.

    ``runs``: ``(kind, config, key)`` tuples (key None: the default key). Done runs are reused; a
    re-run of the same sweep resumes it. ``progress(done, total, running, failed, detail)`` is called after
    every pump (``failed`` counts failed + cancelled + interrupted; ``detail``: :func:`running_detail`). Ctrl-C (KeyboardInterrupt)
    returns at once with ``interrupted=True``: running workers finish their run in the background and store
    its result; queued runs stay queued once this process has exited (as ``sweep`` does: a local pool worker
    takes no new run after its launcher is gone); a re-run picks everything up.
    """
    t0 = time.monotonic()
    backend = backend or LocalProcessBackend(store)
    sweep, submitted = submit_sweep(store, sweep_name, runs, backend=backend, spec=spec, retry=retry)
    run_ids = {run.id for run, _ in submitted}  # this submission: the sweep may also hold runs of an older spec
    total = len(run_ids)
    outcomes = [outcome for _, outcome in submitted]
    interrupted = timed_out = False
    try:
        while True:
            backend.pump()
            counts = store.counts(run_ids=run_ids)
            failed = counts["failed"] + counts["cancelled"] + counts["interrupted"]
            if progress is not None:
                if counts["running"]:
                    detail = running_detail(store, run_ids)
                else:
                    detail = waiting_detail(store, run_ids, backend) if counts["queued"] else ""
                progress(counts["done"], total, counts["running"], failed, detail)
            if counts["queued"] + counts["running"] == 0:
                break
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                timed_out = True
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        interrupted = True
    return SweepSummary(
        sweep_id=sweep.id,
        name=sweep.name,
        total=total,
        counts=store.counts(run_ids=run_ids),
        new=outcomes.count("new"),
        reused=outcomes.count("existing"),
        requeued=outcomes.count("requeued"),
        elapsed_s=time.monotonic() - t0,
        interrupted=interrupted,
        timed_out=timed_out,
        collapsed=collapsed_runs(store, run_ids),
    )


def running_detail(store: ResultStore, run_ids: Iterable[int]) -> str:
    """Where the running runs among ``run_ids`` stand, for a progress line: "epoch 16/200, 17/200; the running
    ones done in ≈ 78 min" ("" when none has reported an epoch or an estimate yet).

    The time is the longest of the runs' own estimates (``progress["eta_seconds"]``, from their epochs so far);
    queued runs are not in it.
    """
    epochs, etas = [], []
    for run in store.list_runs(ids=list(run_ids), status="running"):
        prog = run.progress or {}
        if isinstance(prog.get("epoch"), int) and prog.get("epochs"):
            epochs.append(f"{prog['epoch']}/{prog['epochs']}")
        eta = prog.get("eta_seconds")
        if isinstance(eta, (int, float)) and math.isfinite(eta) and eta >= 0:
            etas.append(float(eta))
    parts = []
    if epochs:
        more = len(epochs) - RUNNING_SHOWN
        parts.append("epoch " + ", ".join(epochs[:RUNNING_SHOWN]) + (f" and {more} more" if more > 0 else ""))
    if etas:
        parts.append(f"the running {'one' if len(etas) == 1 else 'ones'} done in ≈ {format_duration(max(etas))}")
    return "; ".join(parts)


def waiting_detail(store: ResultStore, run_ids: Iterable[int], backend: Backend) -> str:
    """Why queued runs among ``run_ids`` do not start, for a progress line, when other runs of the same backend hold
    its slots ("" otherwise): a backend's ``max_parallel`` bounds its running runs on a host across every launcher
    sharing the store, so a second sweep waits for the first one's runs."""
    mine = set(run_ids)
    host = getattr(backend, "host", None)
    others = [
        run
        for run in store.list_runs(status="running", backend=backend.name)
        if run.id not in mine and (host is None or run.host == host)
    ]
    if not others:
        return ""
    limit = getattr(backend, "max_parallel", None)
    at_once = f" (at most {limit} at once here, counting theirs: --max-parallel)" if limit else ""
    return (
        f"waiting: {len(others)} run(s) of another sweep or launcher are running on this backend{at_once}; "
        "these start as slots free up"
    )


def collapsed_runs(store: ResultStore, run_ids: Iterable[int]) -> int:
    """How many of these runs finished with a model that never learned (``result["collapsed"]``)."""
    return sum(
        1
        for run in store.list_runs(ids=list(run_ids), status="done")
        if isinstance(run.result, dict) and run.result.get("collapsed")
    )


def export_csv(
    store: ResultStore,
    sweep: int | str | Sweep,
    path: str | os.PathLike | TextIO,
    *,
    status: str | Iterable[str] | None = "done",
) -> int:
    """One CSV row per run of the sweep (done runs by default; ``status=None``: all), columns
    ``run_id, key, kind, status, seconds, config.*, result.*, error``. Returns the row count."""
    return store.export_csv(path, sweep=sweep, status=status)
