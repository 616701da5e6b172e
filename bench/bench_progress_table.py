"""The progress table of Train & trade-offs, refreshed every 2 s while a sweep trains: what one refresh costs on
a large sweep, before and after the page kept the cells that change only when a run finishes (CPU).

Builds DPFMix Table 1's best-m sweep (`dpfmix-table1-m`) with ``--seeds`` finished seeds a point, each result
shaped like the runner's (a 200-epoch history, a privacy card; made-up numbers), and times three calls:
``run_table`` alone (what every refresh did before: every result parsed, every config validated),
``settled_cells`` (what the page now reads once each time a run finishes) and ``run_table`` given those cells
(what every other refresh does now).

    .venv/bin/python bench/bench_progress_table.py [--seeds 3 17] [--repeats 7]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_tradeoffs_page import finished_sweep  # noqa: E402
from timing import median_seconds  # noqa: E402

from dpmix_core.experiments.presets import get_preset  # noqa: E402
from dpmix_core.experiments.trade_offs import narrow_spec, run_table, settled_cells  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 17], help="finished seeds a point, one store each")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print("| runs | refresh before (ms) | cells, once a run finishes (ms) | refresh now (ms) | results_version (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for seeds in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            store = ResultStore(Path(folder) / "results.sqlite")
            spec = narrow_spec(get_preset("dpfmix-table1-m"), repeats=seeds)
            ids = [run.id for run in store.list_runs(sweep=finished_sweep(store, spec, random.Random(0)))]
            cells = settled_cells(store, ids, axis=spec.axis)
            times = [
                median_seconds(fn, args.repeats)
                for fn in (
                    lambda: run_table(store, ids, axis=spec.axis),
                    lambda: settled_cells(store, ids, axis=spec.axis),
                    lambda: run_table(store, ids, axis=spec.axis, settled=cells),
                    store.results_version,
                )
            ]
        print(
            f"| {len(ids)} | " + " | ".join(f"{1000 * t:.0f}" if t > 0.01 else f"{1000 * t:.1f}" for t in times) + " |"
        )


if __name__ == "__main__":
    main()
