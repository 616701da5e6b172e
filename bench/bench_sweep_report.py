"""sweep-report: what writing a stored sweep's one-file HTML report costs (CPU).

    .venv/bin/python bench/bench_sweep_report.py --store ~/repro/allm.sqlite --sweep all-methods
    .venv/bin/python bench/bench_sweep_report.py            # a synthetic store: --seeds finished seeds per point

Prints the median of ``--repeats`` timings of :func:`~dpmix_core.views.sweep_report.sweep_report` (read the
store, aggregate, draw the figure, inline plotly.js) and the report's size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_seconds  # noqa: E402

from dpmix_core.experiments.presets import get_preset  # noqa: E402
from dpmix_core.experiments.trade_offs import sweep_jobs  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402
from dpmix_core.views.sweep_report import sweep_report  # noqa: E402


def synthetic_store(folder: Path, repeats: int) -> tuple[ResultStore, str]:
    """thesis-4.2-sigma-quick with ``repeats`` finished seeds a point (made-up accuracies, real configs)."""
    spec = replace(get_preset("thesis-4.2-sigma-quick"), repeats=repeats)
    store = ResultStore(folder / "results.sqlite")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    for i, job in enumerate(sweep_jobs(spec)):
        run = store.submit(*job, sweep=sweep.id)
        store.claim(run.id)
        store.finish(run.id, {"test_accuracy": 0.5 + (i % 40) / 100, "epsilon": {"lee2019": 1.0 + i}, "delta": 1e-5})
    return store, spec.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing results store (default: a synthetic one)")
    parser.add_argument("--sweep", help="its sweep (name or number)")
    parser.add_argument("--seeds", type=int, default=10, help="synthetic store: seeds per point")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.store:
            store, sweep = ResultStore.existing(args.store), args.sweep
            sweep = int(sweep) if sweep.isdigit() else sweep
        else:
            store, sweep = synthetic_store(Path(folder), args.seeds)
        runs = len(store.results(sweep))
        size = len(sweep_report(store, sweep))
        seconds = median_seconds(lambda: sweep_report(store, sweep), args.repeats)
    print(f"sweep-report of {runs} finished runs: median {seconds:.2f} s over {args.repeats}, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
