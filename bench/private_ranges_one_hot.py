"""Private ranges on a table with text columns: every column counted vs the one-hot features left out (exact bounds).

    .venv/bin/python bench/private_ranges_one_hot.py          # 40 draws a cell (about 10 s, 2 cores)

The table: 3 numeric columns (an age 20-80, hours 1-99, an income 10,000-100,000) under one loose public pair
(0, 200000), and 5 text columns of 8 public categories each (40 one-hot features, bounds (0, 1)); 4,000 or 16,000
records. For each ranges epsilon (replace-one, delta 1e-5), the median over 40 draws (seeds) of each numeric column's
private range width over its true span (1 is a perfect fit; the pair is 2,500 to 20,000 times the span): the ranges
as ``synthesis.private_ranges`` found them before 2026-12-02 (the histograms count all 43 columns, so each count's
noise is sqrt(43) times the per-column noise) and now (the 40 one-hot features keep (0, 1) and are not counted: the
noise of 3 columns).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dpmix_core.synthesis.private_ranges import private_ranges  # noqa: E402

DRAWS = 40


def table(n: int, text_columns: int = 5, categories: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    numeric = np.column_stack([rng.uniform(20, 80, n), rng.uniform(1, 99, n), rng.uniform(1e4, 1e5, n)])
    one_hot = [np.eye(categories)[rng.integers(0, categories, n)] for _ in range(text_columns)]
    return np.column_stack([numeric, *one_hot])


def widths(x: np.ndarray, epsilon: float, exact: tuple[int, ...]) -> np.ndarray:
    """Median over DRAWS seeds of each numeric column's range width / true span."""
    bounds = tuple([(0.0, 200_000.0)] * 3 + [(0.0, 1.0)] * (x.shape[1] - 3))
    span = x[:, :3].max(axis=0) - x[:, :3].min(axis=0)
    out = []
    for seed in range(DRAWS):
        r = private_ranges(x, bounds, epsilon=epsilon, delta=1e-5, relation="replace-one", seed=seed, exact=exact)
        out.append((np.array(r.high[:3]) - np.array(r.low[:3])) / span)
    return np.median(np.array(out), axis=0)


def main() -> None:
    print("| records | ranges ε | every column counted (age / hours / income) | one-hot features left out |")
    print("|---|---|---|---|")
    for n in (4000, 16000):
        x = table(n)
        exact = tuple(range(3, x.shape[1]))
        for epsilon in (0.1, 0.3, 1.0):
            cells = [" / ".join(f"{w:.3g}" for w in widths(x, epsilon, e)) for e in ((), exact)]
            print(f"| {n:,} | {epsilon:g} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
