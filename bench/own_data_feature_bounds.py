"""A release of one's own table with columns in different units: one pair of public bounds vs bounds per column.

    .venv/bin/python bench/own_data_feature_bounds.py                 # 3 seeds, eps 1 and 4 (about 2.5 min, 2 cores)
    .venv/bin/python bench/own_data_feature_bounds.py --eps 1 2 4 8   # 4.6 min

The table: 20,000 records of 3 classes and 8 features drawn from Gaussian clusters (6 informative directions,
``_table``), each column then put in its own units (an age-like column of scale 10 around 50, an income-like one of
scale 20,000 around 60,000, a ratio of scale 0.1 around 1, ...). The public bounds of a column are its documented
range, centre ± 6 scales (known without the records: the generator's, as a codebook's would be); the one pair is
the smallest that holds every column, (-60000, 180000). Each run is ``train --data-file`` as the CLI makes it (20 %
held out, the own-data linear protocol: Adam 1e-2, batch 32, 50 epochs, the released inputs standardised), on a
release calibrated to the target ε by its tightest rigorous accountant, once with the pair (``--feature-range``), once
with the pair narrowed by private ranges at 10 % of ε (``--private-ranges``; the target covers both) and once with
the bounds per column (``--feature-bounds``); DP-SGD (its private feature ranges inside the bounds) and
the non-private model are the references. Prints a markdown table of mean ± sd test accuracy and the seconds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from own_data import mean_test_accuracy, own_run, seeds_and_eps  # noqa: E402  (bench/ is on sys.path when a script runs)

from dpmix_core.experiments.config import RunConfig  # noqa: E402
from dpmix_core.experiments.run_data import open_data_file  # noqa: E402

SCALES = np.array([10, 20_000, 1, 300, 5, 1_000, 0.1, 50.0])
CENTRES = np.array([50, 60_000, 0, 1_000, 20, 3_000, 1, 200.0])
COLUMN_BOUNDS = tuple((float(c - 6 * s), float(c + 6 * s)) for c, s in zip(CENTRES, SCALES, strict=True))
ONE_PAIR = (min(lo for lo, _ in COLUMN_BOUNDS), max(hi for _, hi in COLUMN_BOUNDS))
RANGE_SHARE = 0.1  # --private-ranges alone: the ranges' epsilon is this share of the target (synthesis.private_ranges)
RELEASES = {  # mechanism: (l, T), a release of about the training records' size
    "dpmix": (16, 16_000),
    "poisson": (16, 16_000),
}


def _table(n: int = 20_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """3 Gaussian clusters in 6 informative directions (+2 noise columns), in standard units."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centres = rng.normal(0, 1.5, size=(3, 6))
    x = np.hstack([centres[y] + rng.normal(size=(n, 6)), rng.normal(size=(n, 2))])
    return x, y


def write_table(folder: Path) -> Path:
    x, y = _table()
    raw = x * SCALES + CENTRES
    header = ",".join(f"c{i}" for i in range(raw.shape[1])) + ",label"
    rows = [",".join(f"{v:.6g}" for v in row) + f",{c}" for row, c in zip(raw, y, strict=True)]
    path = folder / "mixed_units.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _config(
    path: Path, method: str, mechanism: str | None, bounds, eps: float, seed: int, share: float | None = None
) -> RunConfig:
    own = open_data_file(path, label_column="label")
    return own_run(own, method, mechanism, bounds, eps, seed, RELEASES, range_share=share)


def accuracy(
    path: Path, method: str, mechanism: str | None, bounds, eps: float, seeds: int, share: float | None = None
) -> tuple[float, float]:
    return mean_test_accuracy(_config(path, method, mechanism, bounds, eps, seed, share) for seed in range(seeds))


def main() -> None:
    args = seeds_and_eps(__doc__.split("\n")[0], (1.0, 4.0))
    with tempfile.TemporaryDirectory() as folder:
        path = write_table(Path(folder))
        start = time.perf_counter()
        best, _ = accuracy(path, "non-private", None, COLUMN_BOUNDS, 1.0, 1)
        print(f"non-private (bounds per column): {best:.1f} %; one pair {ONE_PAIR}\n")
        print(
            f"| method | ε | one pair | one pair, private ranges ({RANGE_SHARE:.0%} of ε) | bounds per column | seconds a run |"
        )
        print("|---|---|---|---|---|---|")
        for method, mechanism in (("mixing", "dpmix"), ("mixing", "poisson"), ("dp-sgd", None)):
            for eps in args.eps:
                cells, seconds = [], []
                ways = [(ONE_PAIR, None), (ONE_PAIR, RANGE_SHARE), (COLUMN_BOUNDS, None)]
                for bounds, share in ways:
                    if share is not None and method != "mixing":  # DP-SGD narrows its ranges in every run
                        cells.append("(as one pair)")
                        continue
                    t0 = time.perf_counter()
                    mean, sd = accuracy(path, method, mechanism, bounds, eps, args.seeds, share)
                    seconds.append((time.perf_counter() - t0) / args.seeds)
                    cells.append(f"{mean:.1f} ± {sd:.1f} %")
                name = mechanism or method
                row = " | ".join(cells)
                print(f"| {name} | {eps:g} | {row} | {statistics.median(seconds):.1f} |", flush=True)
        print(f"\n{args.seeds} seeds; {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
