"""Sweeps: a list of runs (a grid over sigma, l, T or target epsilon, times repeats) executed by a
backend, every run a row of the results store.

Resumable by construction: runs are identified by key, done runs are reused and never recomputed,
runs still queued or running (e.g. left behind by an interrupted CLI, or launched from the app) are
adopted and waited for, and interrupted runs are re-queued. Failed and cancelled runs are re-run only
when asked (``retry``; CLI ``--retry-failed``).

``run_sweep`` blocks (the CLI); the app calls :func:`submit_sweep` and then pumps its
:class:`~dpmix_core.jobs.JobManager` on each rerun.

What a spec file means is not decided here: the caller passes ``expand`` (the product uses
``dpmix_core.experiments`` sweeps; see ``dpmix_core.trade_offs.expand_cli_spec``), so this module
only runs ``(kind, config, key)`` triples.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

from dpmix_core.argtypes import positive_float, positive_int
from dpmix_core.jobs import Backend, LocalProcessBackend
from dpmix_core.files import check_new_file
from dpmix_core.limits import check_sweep_cost, limits_from_env
from dpmix_core.store import ResultStore, Run, SubmitOutcome, Sweep, default_store_path, store_problem

__all__ = [
    "DEFAULT_RETRY",
    "RunSpec",
    "SweepSummary",
    "TextProgress",
    "add_sweep_arguments",
    "cli_sweep",
    "export_csv",
    "run_sweep",
    "submit_sweep",
]

RunSpec = tuple[str, Mapping[str, Any], "str | None"]  # (kind, config, key or None for the default key)
ProgressFn = Callable[[int, int, int, int], None]  # (done, total, running, failed)
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

    def line(self) -> str:
        c = self.counts
        text = (f"sweep {self.name!r} (id {self.sweep_id}): {self.done}/{self.total} done, {c.get('failed', 0)} failed,"
                f" {c.get('cancelled', 0)} cancelled, {c.get('interrupted', 0)} interrupted, {self.pending} pending;"
                f" {self.reused} reused, {self.new} new, {self.requeued} re-queued; {self.elapsed_s:.1f} s")
        if self.interrupted:
            text += " - interrupted: run the same command again to resume"
        return text


def submit_sweep(store: ResultStore, sweep_name: str, runs: Iterable[RunSpec], *, backend: Backend | None = None,
                 spec: Mapping[str, Any] | None = None,
                 retry: bool | Iterable[str] = DEFAULT_RETRY) -> tuple[Sweep, list[tuple[Run, SubmitOutcome]]]:
    """Register (or resume) the sweep and queue its runs without waiting (what the app calls).

    The backend is pumped once before queuing, so a run left ``running`` by a killed worker is
    detected (dead pid or stale heartbeat), marked interrupted and re-queued by this very call:
    one re-run completes an interrupted sweep."""
    backend = backend or LocalProcessBackend(store)
    backend.pump()  # first: runs whose worker died (or went stale) become interrupted, so they are re-queued now
    sweep = store.create_sweep(sweep_name, spec, backend=backend.name, location=backend.location)
    submitted = backend.submit_many(list(runs), sweep=sweep.id, requeue=retry)
    return sweep, submitted


def run_sweep(store: ResultStore, sweep_name: str, runs: Sequence[RunSpec], *, backend: Backend | None = None,
              progress: ProgressFn | None = None, poll_s: float = 0.5, spec: Mapping[str, Any] | None = None,
              retry: bool | Iterable[str] = DEFAULT_RETRY, timeout_s: float | None = None) -> SweepSummary:
    """Submit the runs as sweep ``sweep_name`` and pump the backend until none is queued or running.

    ``runs``: ``(kind, config, key)`` tuples (key None: the default key). Done runs are reused; a
    re-run of the same sweep resumes it. ``progress(done, total, running, failed)`` is called after
    every pump (``failed`` counts failed + cancelled + interrupted). Ctrl-C (KeyboardInterrupt)
    returns at once with ``interrupted=True``: queued runs stay queued, running workers finish in the
    background and store their results; a re-run picks everything up.
    """
    t0 = time.monotonic()
    backend = backend or LocalProcessBackend(store)
    sweep, submitted = submit_sweep(store, sweep_name, runs, backend=backend, spec=spec, retry=retry)
    total = len({run.id for run, _ in submitted})
    outcomes = [outcome for _, outcome in submitted]
    interrupted = timed_out = False
    try:
        while True:
            backend.pump()
            counts = store.counts(sweep=sweep.id)
            failed = counts["failed"] + counts["cancelled"] + counts["interrupted"]
            if progress is not None:
                progress(counts["done"], total, counts["running"], failed)
            if counts["queued"] + counts["running"] == 0:
                break
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                timed_out = True
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        interrupted = True
    return SweepSummary(
        sweep_id=sweep.id, name=sweep.name, total=total, counts=store.counts(sweep=sweep.id),
        new=outcomes.count("new"), reused=outcomes.count("existing"), requeued=outcomes.count("requeued"),
        elapsed_s=time.monotonic() - t0, interrupted=interrupted, timed_out=timed_out,
    )


def export_csv(store: ResultStore, sweep: int | str | Sweep, path: str | os.PathLike | TextIO, *,
               status: str | Iterable[str] | None = "done") -> int:
    """One CSV row per run of the sweep (done runs by default; ``status=None``: all), columns
    ``run_id, key, kind, status, seconds, config.*, result.*, error``. Returns the row count."""
    return store.export_csv(path, sweep=sweep, status=status)


# -- command line ------------------------------------------------------------------------------------
class TextProgress:
    """A one-line progress bar on stderr: ``[#####.....] 12/40  done 11  running 2  failed 1``."""

    def __init__(self, stream: TextIO | None = None, width: int = 28):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last: tuple | None = None
        self._open = False

    def __call__(self, done: int, total: int, running: int, failed: int) -> None:
        state = (done, total, running, failed)
        if state == self._last:
            return
        self._last = state
        finished = done + failed
        filled = int(self.width * finished / total) if total else self.width
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {finished}/{total}"
                f"  done {done}  running {running}  failed {failed}")
        if self.tty:
            self.stream.write("\r" + line)
            self._open = True
            if finished >= total:
                self.close()
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``sweep`` subcommand's options (then ``parser.set_defaults(func=cli_sweep)``)."""
    parser.add_argument("spec", help="sweep spec file (.toml or .json), or preset:NAME")
    parser.add_argument("--store", help="results store (default: $DPMIX_STORE or ~/.cache/dpmix/results.sqlite)")
    parser.add_argument("--export", metavar="CSV", help="write the sweep's done runs to this CSV at the end")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="where runs execute (ray: pip install -r requirements-ray.txt)")
    parser.add_argument("--address", help="Ray cluster: auto, ray://head:10001 or http://head:8265 (with --backend ray)")
    parser.add_argument("--max-parallel", type=positive_int, help="runs at once (default: spec, else cores)")
    parser.add_argument("--retry-failed", action="store_true", help="re-run failed and cancelled runs too")
    parser.add_argument("--name", help="sweep name (default: the spec's name, else the file's stem)")
    parser.add_argument("--poll", type=positive_float, default=0.5, help="seconds between status checks")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def cli_sweep(args: argparse.Namespace, *,
              expand: Callable[[str], tuple[str, list[RunSpec], Mapping[str, Any]]]) -> int:
    """``python -m dpmix_core sweep SPEC ...``: 0 all done, 1 some run failed/cancelled/interrupted,
    130 interrupted by Ctrl-C (resume by running it again). Spec errors raise ValueError.

    ``expand(args.spec) -> (name, [(kind, config, key)], spec as JSON-ready dict)``.
    """
    if getattr(args, "export", None):
        check_new_file(args.export, what="--export")  # before any work: a bad path costs nothing
    backend_name = getattr(args, "backend", "local")
    if backend_name == "local" and getattr(args, "address", None):
        raise ValueError("--address needs --backend ray")
    if backend_name == "ray" and importlib.util.find_spec("ray") is None:
        from dpmix_core.ray_backend import RAY_MISSING

        raise ValueError(RAY_MISSING)
    spec_name, runs, spec = expand(args.spec)
    name = getattr(args, "name", None) or spec_name
    if not runs:
        raise ValueError(f"spec {args.spec!r} expands to no runs")
    check_sweep_cost(len(runs), limits_from_env())
    max_parallel = getattr(args, "max_parallel", None)
    try:
        store = ResultStore(getattr(args, "store", None))
    except (sqlite3.Error, OSError) as exc:
        raise (store_problem(default_store_path() if getattr(args, "store", None) is None
                             else Path(args.store), exc) or exc) from None
    from dpmix_core.ray_backend import make_backend

    try:
        backend = make_backend(getattr(args, "backend", "local"), store, max_parallel=max_parallel,
                               address=getattr(args, "address", None))
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    retry = ("interrupted", "failed", "cancelled") if getattr(args, "retry_failed", False) else DEFAULT_RETRY
    print(f"sweep {name!r}: {len(runs)} runs; {backend.describe()}", file=sys.stderr)
    bar = TextProgress()
    try:
        summary = run_sweep(store, name, runs, backend=backend, progress=bar, poll_s=getattr(args, "poll", 0.5),
                            spec=spec, retry=retry)
    finally:
        bar.close()
    exported = None
    if getattr(args, "export", None):
        exported = export_csv(store, summary.sweep_id, args.export)
    if getattr(args, "json", False):
        print(json.dumps({**summary.to_dict(), "store": str(store.path), "export": args.export,
                          "exported_rows": exported}))
    else:
        print(summary.line())
        if exported is not None:
            print(f"wrote {exported} row(s) to {args.export}")
        for run in store.list_runs(sweep=summary.sweep_id, status=("failed", "cancelled", "interrupted"), limit=20):
            print(f"  run {run.id} {run.status}: {run.error_summary}", file=sys.stderr)
    if summary.interrupted:
        return 130
    return 0 if summary.ok else 1
