"""The best-release search on a real dataset, with a diagnostic of the choice (issue #13 §5).

    nice -n 10 .venv/bin/python bench/bench_best_release.py --data-dir ../shared/data --target-epsilon 1 \\
        --m 64,256 --T 10000,30000 --lambda 1,4 --short-epochs 10 --long-epochs 60 --out best.json

Runs exactly what ``python -m dpmix_core best-release`` runs (``run_search``), with one addition for the
report: a wrapper around the training runs also records every run's *test* accuracy in a separate
diagnostic (``--diagnostic FILE``), so that the report can say how well the release's validation accuracy
ranked the candidates. The search itself never sees those numbers (they are not in its result).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpmix_core.cli.best_release import add_best_release_arguments, search_from_args  # noqa: E402
from dpmix_core.experiments.best_release import run_search, run_with_held_out  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_best_release_arguments(p)  # the CLI's own options and defaults: the bench runs the same search
    p.add_argument("--diagnostic", help="every run's val and test accuracy (JSON), for the report only")
    args = p.parse_args()
    if args.out is None:
        p.error("--out is required (the search's result, JSON)")
    search = search_from_args(args)
    logged: list[dict] = []

    def logging_run(config):
        result = run_with_held_out(config)  # what the search runs by default: held-out points and model too
        syn = config.synthesis
        logged.append(
            {
                "m": syn.l,
                "T": syn.T,
                "lambda": syn.sigma_ratio,
                "epochs": config.epochs,
                "val_accuracy": result["val_accuracy"],
                "test_accuracy": result["test_accuracy"],
                "seconds": result["seconds"],
                "timings": result["timings"],
            }
        )
        return result

    t0, c0 = time.perf_counter(), time.process_time()
    best = run_search(search, run=logging_run, progress=lambda line: print(line, flush=True))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    payload = {**best.to_dict(), "wall_seconds": wall, "cpu_seconds": cpu, "load_average": os.getloadavg()}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    if args.diagnostic:
        Path(args.diagnostic).write_text(json.dumps(logged, indent=1) + "\n")
    c = best.chosen
    print(
        f"chosen {c.candidate.describe()} eps={c.certified_epsilon:.4f} pooled={c.pooled_accuracy} "
        f"val={c.val_accuracy:.4f} "
        f"test={best.test_accuracy:.4f} wall={wall:.0f}s cpu={cpu:.0f}s"
    )


if __name__ == "__main__":
    main()
