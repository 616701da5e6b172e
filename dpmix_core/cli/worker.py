"""``python -m dpmix_core.cli.worker RUN_ID [--store PATH]``: the worker process entry point (see runtime.worker)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from dpmix_core.runtime.store import ResultStore, StoreError, default_store_path
from dpmix_core.runtime.worker import EXIT_NOT_FOUND, log, run_worker

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dpmix_core.cli.worker",
        description="Run one queued run of a DPMix results store.",
        epilog="exit codes: 0 done, 1 failed, 2 usage, 3 no such run/store, 4 not runnable, 5 cancelled, 6 lost",
    )
    parser.add_argument("run_id", type=int, help="the run's id in the store")
    parser.add_argument("--store", help="store path (default: $DPMIX_STORE or ~/.cache/dpmix/results.sqlite)")
    args = parser.parse_args(argv)  # exits with code 2 on a usage error
    path = Path(args.store).expanduser() if args.store else default_store_path()
    if not path.is_file():
        log(f"no store at {path}")
        return EXIT_NOT_FOUND
    try:
        store = ResultStore(path)
    except (sqlite3.Error, StoreError) as exc:
        log(f"cannot open the store {path}: {exc}")
        return EXIT_NOT_FOUND
    return run_worker(store, args.run_id, standalone=True)


if __name__ == "__main__":
    sys.exit(main())
