"""``python -m dpmix_core sweep``: run a sweep spec to completion with a progress bar (resumable)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shlex
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from dpmix_core.cli.argtypes import positive_float, positive_int
from dpmix_core.experiments.spec import spec_file_text, sweep_file_stem
from dpmix_core.experiments.sweeps import DEFAULT_RETRY, RunSpec, export_csv, run_sweep
from dpmix_core.resources.files import check_new_file, check_unused_file, write_files_atomically
from dpmix_core.resources.limits import check_sweep_cost, limits_from_env
from dpmix_core.runtime.store import ResultStore, default_store_path, store_problem

__all__ = ["TextProgress", "add_sweep_arguments", "cli_sweep"]


class TextProgress:
    """A one-line progress bar on stderr: ``[#####.....] 12/40  done 11  running 2  failed 1``, then where
    the running runs stand (``· epoch 16/200, 17/200; the running ones done in ≈ 78 min``).

    On a terminal the line is redrawn in place at every change. Into a file or pipe (a log) a line is
    written when a run starts or ends, and for the running runs' epochs at most every ``log_every_s``.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        width: int = 28,
        *,
        log_every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_every_s = log_every_s
        self.clock = clock
        self._last: tuple | None = None
        self._last_line_at = -math.inf
        self._open = False

    def __call__(self, done: int, total: int, running: int, failed: int, detail: str = "") -> None:
        counts = (done, total, running, failed)
        if (counts, detail) == self._last:
            return
        now = self.clock()
        if (
            not self.tty
            and self._last is not None
            and counts == self._last[0]
            and now - self._last_line_at < self.log_every_s
        ):
            return  # a log gets epochs at most every log_every_s; a run starting or ending at once
        self._last, self._last_line_at = (counts, detail), now
        finished = done + failed
        filled = int(self.width * finished / total) if total else self.width
        line = (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {finished}/{total}"
            f"  done {done}  running {running}  failed or cancelled {failed}" + (f"  · {detail}" if detail else "")
        )
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")  # clear what a longer line left on the right
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
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where runs execute (ray: pip install -r requirements-ray.txt)",
    )
    parser.add_argument(
        "--address", help="Ray cluster: auto, ray://head:10001 or http://head:8265 (with --backend ray)"
    )
    parser.add_argument("--max-parallel", type=positive_int, help="runs at once (default: spec, else cores)")
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="torch/BLAS threads per run (local backend; default: cores // runs at once). "
        "Use 1 when other work already holds cores: more threads than cores slow every run",
    )
    parser.add_argument("--retry-failed", action="store_true", help="re-run failed and cancelled runs too")
    parser.add_argument("--name", help="sweep name (default: the spec's name, else the file's stem)")
    parser.add_argument("--poll", type=positive_float, default=0.5, help="seconds between status checks")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument(
        "--save-spec",
        metavar="FILE.json",
        help="write the spec (a preset's, with --dataset or --data-file applied) to FILE.json, named after the file, "
        "to edit into your own sweep, and run nothing (every field is there, defaults included)",
    )


def check_local_precision(runs: list[RunSpec]) -> None:
    """bf16 runs on this machine's device: refused before anything is queued when it has no native bfloat16."""
    devices = {str(config.get("device", "auto")) for _, config, _ in runs if config.get("precision") == "bf16"}
    if devices:
        from dpmix_core.mechanisms import resolve_device
        from dpmix_core.training.precision import check_precision

        for device in sorted(devices):
            check_precision("bf16", resolve_device(device))


def cli_sweep(
    args: argparse.Namespace, *, expand: Callable[[str], tuple[str, list[RunSpec], Mapping[str, Any]]]
) -> int:
    """``python -m dpmix_core sweep SPEC ...``: 0 all done, 1 some run failed/cancelled/interrupted,
    130 interrupted by Ctrl-C (resume by running it again). Spec errors raise ValueError.

    ``expand(args.spec) -> (name, [(kind, config, key)], spec as JSON-ready dict)``.
    """
    if getattr(args, "export", None):
        check_new_file(args.export, what="--export")  # before any work: a bad path costs nothing
    backend_name = getattr(args, "backend", "local")
    if backend_name == "local" and getattr(args, "address", None):
        raise ValueError("--address needs --backend ray")
    threads = getattr(args, "threads", None)
    if backend_name != "local" and threads is not None:
        raise ValueError("--threads needs --backend local (a Ray task's threads follow the cluster's CPUs per task)")
    if backend_name == "ray" and importlib.util.find_spec("ray") is None:
        from dpmix_core.runtime.ray_backend import RAY_MISSING

        raise ValueError(RAY_MISSING)
    save = getattr(args, "save_spec", None)
    if save is not None:
        _check_save_spec(args, Path(save))
    spec_name, runs, spec = expand(args.spec)
    if save is not None:
        return _save_spec(spec, Path(save))
    name = getattr(args, "name", None) or spec_name
    if not runs:
        raise ValueError(f"spec {args.spec!r} expands to no runs")
    check_sweep_cost(len(runs), limits_from_env())
    if backend_name == "local":  # a Ray cluster's workers check their own hardware
        check_local_precision(runs)
    max_parallel = getattr(args, "max_parallel", None)
    try:
        store = ResultStore(getattr(args, "store", None))
    except (sqlite3.Error, OSError) as exc:
        raise (
            store_problem(default_store_path() if getattr(args, "store", None) is None else Path(args.store), exc)
            or exc
        ) from None
    # everything the summary at the end needs, imported now: a sweep runs for hours, and a checkout updated
    # meanwhile must not turn its summary into an ImportError between an old module and a new one
    from dpmix_core.experiments.best_axis import best_axis_notes
    from dpmix_core.experiments.quick_vs_full import quick_vs_full_by_test_inputs
    from dpmix_core.experiments.trade_offs import (
        TEST_INPUTS_TITLES,
        axis_column,
        check_job_datasets,
        read_stored_sweep,
        runs_the_data_can_make,
        sweep_best_axis,
    )
    from dpmix_core.runtime.backends import make_backend

    if backend_name == "local":  # before queueing: a dataset not here fails once, not once per run (a Ray
        check_job_datasets(runs, store)  # cluster's workers read their own data folders)
    runs, left_out = runs_the_data_can_make(runs)  # e.g. l = 512 of one class on the embedded sample
    if not runs:
        raise ValueError(f"the data can make none of the sweep's runs: {left_out[0]}")
    for line in left_out:
        print(f"left out (the data cannot make them; not queued): {line}", file=sys.stderr)
    options = {} if threads is None else {"threads_per_worker": threads}
    try:
        backend = make_backend(
            backend_name, store, max_parallel=max_parallel, address=getattr(args, "address", None), **options
        )
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    retry = ("interrupted", "failed", "cancelled") if getattr(args, "retry_failed", False) else DEFAULT_RETRY
    for note in getattr(args, "notes", ()):  # what the expansion found to say (one's own file), after the checks
        print(f"note: {note}", file=sys.stderr)
    print(f"sweep {name!r}: {len(runs)} runs; {backend.describe()}", file=sys.stderr)
    bar = TextProgress()
    try:
        summary = run_sweep(
            store, name, runs, backend=backend, progress=bar, poll_s=getattr(args, "poll", 0.5), spec=spec, retry=retry
        )
    finally:
        bar.close()
    exported = None
    if getattr(args, "export", None):
        exported = export_csv(store, summary.sweep_id, args.export)
    stored = read_stored_sweep(store, summary.sweep_id)  # its runs, read once for both
    # a quick variant: how far from its full protocol's stored runs, through each test loader its runs were read by
    checks = quick_vs_full_by_test_inputs(store, stored)
    own = next(iter(checks.values()), None)
    picks = sweep_best_axis(store, stored)  # a sweep along l or T: each series' best value, chosen honestly
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    **summary.to_dict(),
                    "store": str(store.path),
                    "export": args.export,
                    "exported_rows": exported,
                    "quick_vs_full": None if own is None else own.to_json(),
                    "quick_vs_full_by_test_inputs": {loader: c.to_json() for loader, c in checks.items()},
                    "best_axis": [p.to_dict() for p in picks],
                }
            )
        )
    else:
        print(summary.line())
        if warning := summary.collapse_warning():
            print(warning)
        for i, (loader, check) in enumerate(checks.items()):  # the sweep's own reading first, unlabelled
            title = TEST_INPUTS_TITLES[loader]
            reading = "" if i == 0 else f", test images {title} (sweep-report --test-inputs {loader})"
            print(f"quick vs full{reading}: {check.sentence()}")
        if picks:
            axis = axis_column(picks[0].axis)
            print(
                f"best {axis} per series (chosen on the even test rows, read on the odd; sweep-report has the table):"
            )
            for line in [p.sentence(axis) for p in picks] + best_axis_notes(picks, axis):
                print(f"  {line}")
        if exported is not None:
            print(f"wrote {exported} row(s) to {args.export}")
        for run in store.list_runs(sweep=summary.sweep_id, status=("failed", "cancelled", "interrupted"), limit=20):
            print(f"  run {run.id} {run.status}: {run.error_summary}", file=sys.stderr)
        if summary.ok:  # what to do with it next: one shareable file
            print(
                f"report: python -m dpmix_core sweep-report {shlex.quote(name)} --store {shlex.quote(str(store.path))} "
                f"--out {shlex.quote(_report_name(name))}"
            )
    if summary.interrupted:
        return 130
    return 0 if summary.ok else 1


def _check_save_spec(args: argparse.Namespace, out: Path) -> None:
    """``--save-spec``: a new ``.json`` path, and none of the options that narrow or run the sweep."""
    if out.suffix.lower() != ".json":
        raise ValueError(f"--save-spec writes JSON: give a FILE.json. Found {out.name!r}.")
    check_unused_file(out, what="--save-spec", holds="your edits")
    narrowing = [f"--{n.replace('_', '-')}" for n in ("values", "series", "seeds", "repeats") if getattr(args, n, None)]
    running = [f"--{n.replace('_', '-')}" for n in ("export", "json", "name") if getattr(args, n, None)]
    if narrowing or running:
        raise ValueError(
            f"--save-spec writes the whole spec and runs nothing; leave out {', '.join(narrowing + running)} "
            "(edit the file instead, then run it with sweep FILE.json)"
        )


def _save_spec(spec: Mapping[str, Any], out: Path) -> int:
    """Write ``spec`` (JSON-ready) to ``out``, named after the file so that its sweep is not the preset's."""
    write_files_atomically({out: spec_file_text(dict(spec), out.stem).encode("utf-8")})
    print(
        f"wrote {out} (sweep {out.stem!r}, from {spec['name']!r}): edit it (the format: dpmix_core/experiments/spec.py), "
        f"then python -m dpmix_core sweep {shlex.quote(str(out))}"
    )
    return 0


def _report_name(sweep: str) -> str:
    """A file name for a sweep's report (:func:`~dpmix_core.experiments.spec.sweep_file_stem` + .html)."""
    return sweep_file_stem(sweep) + ".html"
