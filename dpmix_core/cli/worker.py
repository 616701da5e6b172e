"""``python -m dpmix_core.cli.worker RUN_ID [--store PATH]`` runs one run; ``... --pool`` is a long-lived
worker that takes queued runs until the queue stays empty (see runtime.worker)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from dpmix_core.runtime.store import ResultStore, StoreError, default_store_path
from dpmix_core.runtime.worker import EXIT_NOT_FOUND, EXIT_USAGE, PoolSettings, log, run_worker, serve

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dpmix_core.cli.worker",
        description="Run one queued run of a DPMix results store, or (--pool) queued runs one after another.",
        epilog="exit codes: 0 done, 1 failed, 2 usage, 3 no such run/store, 4 not runnable, 5 cancelled, 6 lost",
    )
    parser.add_argument("run_id", type=int, nargs="?", help="the run's id in the store (not with --pool)")
    parser.add_argument("--store", help="store path (default: $DPMIX_STORE or ~/.cache/dpmix/results.sqlite)")
    parser.add_argument("--pool", action="store_true", help="take queued runs until idle (a long-lived worker)")
    parser.add_argument("--backend", default="local", help="--pool: take runs of this backend (default local)")
    parser.add_argument("--max-running", type=int, help="--pool: claim only while fewer runs run on this host")
    parser.add_argument("--idle-exit", type=float, default=2.0, help="--pool: exit after this many idle seconds")
    parser.add_argument("--max-runs", type=int, help="--pool: exit after this many runs")
    parser.add_argument("--first-run", type=int, help="--pool: a run claimed for this worker, run first")
    parser.add_argument("--cache-mb", type=float, default=2048, help="--pool: memo kept across runs, in MiB")
    parser.add_argument(
        "--launcher-pid", type=int, help="--pool: take no new run once this process (the launcher) has exited"
    )
    args = parser.parse_args(argv)  # exits with code 2 on a usage error
    if args.pool == (args.run_id is not None):
        parser.print_usage(sys.stderr)
        log("give either a RUN_ID or --pool")
        return EXIT_USAGE
    path = Path(args.store).expanduser() if args.store else default_store_path()
    if not path.is_file():
        log(f"no store at {path}")
        return EXIT_NOT_FOUND
    try:
        store = ResultStore(path)
    except (sqlite3.Error, StoreError) as exc:
        log(f"cannot open the store {path}: {exc}")
        return EXIT_NOT_FOUND
    if args.run_id is not None:
        return run_worker(store, args.run_id, standalone=True)
    try:
        settings = PoolSettings(
            backend=args.backend,
            first_run=args.first_run,
            max_running=args.max_running,
            idle_exit_s=args.idle_exit,
            max_runs=args.max_runs,
            cache_bytes=int(args.cache_mb * 2**20),
            launcher_pid=args.launcher_pid,
        )
    except ValueError as exc:
        log(str(exc))
        return EXIT_USAGE
    return serve(store, settings)


if __name__ == "__main__":
    sys.exit(main())
