"""corrected-lsq cost: the Gram, the eigendecomposition and the whole fit, per feature dimension (CPU).

    .venv/bin/python bench/bench_corrected_lsq.py                 # d = 784 (pixels) and 3969 (ScatterNet), n = 27000
    .venv/bin/python bench/bench_corrected_lsq.py --dims 784 --rows 54000 --repeats 5

Synthetic float32 rows stand in for a release (the cost depends on n and d only). Prints the median of
``--repeats`` timings of each step, and the rates the cost model uses
(``GRAM_OPS_PER_S``: n d^2 / Gram seconds, ``EIGH_OPS_PER_S``: d^3 / eigendecomposition seconds, in
``dpmix_core/experiments/presets.py``). ``--json FILE`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from timing import median_seconds  # noqa: E402

from dpmix_core.training.corrected_lsq import DEFAULT_FLOORS, corrected_least_squares, gram_statistics  # noqa: E402


def bench(d: int, n: int, repeats: int, k: int = 10) -> dict:
    rng = np.random.default_rng(0)
    x = rng.normal(scale=0.03, size=(n, d)).astype(np.float32)
    y = rng.normal(scale=0.1, size=(n, k)).astype(np.float32)
    n_val = n // 9
    x_val, y_val = x[:n_val], y[:n_val]
    gram_s = median_seconds(lambda: gram_statistics(x, y), repeats)
    gram = gram_statistics(x, y)[2]
    eigh_s = median_seconds(lambda: np.linalg.eigh(gram), repeats)
    fit_s = median_seconds(lambda: corrected_least_squares(x, y, sigma_x=0.03, x_val=x_val, y_val=y_val), repeats)
    return {
        "d": d,
        "n": n,
        "gram_s": gram_s,
        "eigh_s": eigh_s,
        "fit_s": fit_s,
        "gram_ops_per_s": n * d**2 / gram_s,
        "eigh_ops_per_s": d**3 / eigh_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[784, 3969])
    ap.add_argument("--rows", type=int, default=27000, help="fitted rows n (default: 90 % of T = 30000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    rows = [bench(d, args.rows, args.repeats) for d in args.dims]
    print(
        f"| d | n | Gram (s) | eigh (s) | whole fit, {len(DEFAULT_FLOORS)} floors (s) | n d² / Gram s | d³ / eigh s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['d']} | {r['n']} | {r['gram_s']:.2f} | {r['eigh_s']:.2f} | {r['fit_s']:.2f} | "
            f"{r['gram_ops_per_s']:.2e} | {r['eigh_ops_per_s']:.2e} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
