"""Best release for a budget on one's own table: what each selection chooses, against every candidate's accuracy.

    .venv/bin/python bench/best_release_own_data.py                   # 3 seeds, eps 1 and 4 (about 4 min, 2 cores)
    .venv/bin/python bench/best_release_own_data.py --eps 1 2 4 8 --seeds 5

The table is ``bench/own_data_categories.py``'s (20,000 records: age, income, region and blood group as one-hot
features over their public categories, 3 classes; public bounds age (0, 120), income (0, 200000)); 20 % of it is
held out. ``best-release --data-file`` searches its default grid (m = 16, 64; T = n, 4n; lambda = 0.5, 1) with the
corrected least squares, the target covering the whole search. For each selection (pooled and own: on released
points; private: the exponential mechanism on the even held-out rows, 10 % of the target) it prints the accuracy
of the chosen release on the *odd* held-out rows, beside the best and the median of every candidate of that
search on the same rows (the oracle: measured here, never by the product), and the search's wall time.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from own_data import seeds_and_eps  # noqa: E402  (bench/ is on sys.path when a script runs)
from own_data_categories import CATEGORIES, table_bounds, write_tables  # noqa: E402

from dpmix_core.experiments.best_release import (  # noqa: E402
    BestReleaseSearch,
    odd_row_accuracy,
    own_data_space,
    run_search,
    run_with_held_out,
)
from dpmix_core.experiments.run_data import open_data_file  # noqa: E402

SELECTIONS = ("pooled", "own", "private")


def _search(path: Path, eps: float, seed: int, selection: str) -> BestReleaseSearch:
    own = open_data_file(path, label_column="label", categories=CATEGORIES)
    bounds = table_bounds(own.dataset.feature_names, CATEGORIES)
    options = {k: v for k, v in own.options.items() if k != "dataset"}
    return BestReleaseSearch(
        target_epsilon=eps,
        dataset=own.options["dataset"],
        space=own_data_space(own.dataset.n_train),
        seed=seed,
        selection=selection,
        feature_range=bounds,
        **options,
    )


def one(path: Path, eps: float, seed: int, selection: str) -> tuple[float, list[float], float]:
    """(the chosen release's odd-row accuracy, every candidate's, seconds)."""
    every: dict[tuple, float] = {}  # (m, T, lambda, epochs) -> odd-row accuracy of that run

    def run(config):
        result = run_with_held_out(config)
        syn = config.synthesis
        every[(syn.l, syn.T, syn.sigma_ratio, config.epochs)] = odd_row_accuracy(result["test_correct"])
        return result

    t0 = time.perf_counter()
    best = run_search(_search(path, eps, seed, selection), run=run)
    seconds = time.perf_counter() - t0
    c = best.chosen
    chosen = every[(c.candidate.m, c.candidate.T, c.candidate.sigma_ratio, c.epochs)]  # pooled / own: all rows
    return chosen, list(every.values()), seconds


def main() -> None:
    args = seeds_and_eps(__doc__.split("\n")[0], (1.0, 4.0))
    with tempfile.TemporaryDirectory() as folder:
        path = write_tables(Path(folder))[0]
        print("| ε | selection | chosen, odd rows (%) | best candidate (%) | median candidate (%) | search (s) |")
        print("|---|---|---|---|---|---|")
        for eps in args.eps:
            for selection in SELECTIONS:
                chosen, best, median, secs = [], [], [], []
                for seed in range(args.seeds):
                    c, every, s = one(path, eps, seed, selection)
                    chosen.append(100 * c)
                    best.append(100 * max(every))
                    median.append(100 * statistics.median(every))
                    secs.append(s)
                print(
                    f"| {eps:g} | {selection} | {np.mean(chosen):.1f} ± {np.std(chosen):.1f} | {np.mean(best):.1f} | "
                    f"{np.mean(median):.1f} | {statistics.median(secs):.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
