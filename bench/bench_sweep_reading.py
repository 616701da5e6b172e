"""What Train & trade-offs pays to read a large sweep (CPU): each 2 s refresh of its progress table while runs
train, and each new reading of its results (the page's first render, a run that finished).

Builds DPFMix Table 1's best-m sweep (`dpfmix-table1-m`) with ``--seeds`` finished seeds a point, each result
shaped like the runner's (a 200-epoch history, a privacy card; made-up numbers), and times:

* ``run_table`` alone: what every refresh did before the fifty-sixth session (every result parsed, every config
  validated);
* ``settled_cells``: what the page now reads once each time a run finishes;
* ``run_table`` given those cells: what every other refresh does now;
* ``read_stored_sweep`` and ``view_sweep`` on that read: a new reading of the results panel.

    .venv/bin/python bench/bench_sweep_reading.py [--seeds 3 17] [--repeats 7]
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
from dpmix_core.experiments.sweep_view import view_sweep  # noqa: E402
from dpmix_core.experiments.trade_offs import narrow_spec, read_stored_sweep, run_table, settled_cells  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402

COLUMNS = (
    "refresh, no cells kept",
    "settled cells",
    "refresh with them",
    "results_version",
    "read_stored_sweep",
    "view_sweep",
)


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f}" if seconds >= 0.01 else f"{1000 * seconds:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 17], help="finished seeds a point, one store each")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print("| runs | " + " | ".join(f"{c} (ms)" for c in COLUMNS) + " |")
    print("|---:|" + "---:|" * len(COLUMNS))
    for seeds in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            store = ResultStore(Path(folder) / "results.sqlite")
            spec = narrow_spec(get_preset("dpfmix-table1-m"), repeats=seeds)
            sweep = finished_sweep(store, spec, random.Random(0))
            ids = [run.id for run in store.list_runs(sweep=sweep)]
            cells = settled_cells(store, ids, axis=spec.axis)
            stored = read_stored_sweep(store, sweep)
            times = [
                median_seconds(fn, args.repeats)
                for fn in (
                    lambda: run_table(store, ids, axis=spec.axis),
                    lambda: settled_cells(store, ids, axis=spec.axis),
                    lambda: run_table(store, ids, axis=spec.axis, settled=cells),
                    store.results_version,
                    lambda: read_stored_sweep(store, sweep),
                    lambda: view_sweep(store, stored),
                )
            ]
        print(f"| {len(ids)} | " + " | ".join(_ms(t) for t in times) + " |")


if __name__ == "__main__":
    main()
