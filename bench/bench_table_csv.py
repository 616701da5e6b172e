"""A release of a table as a CSV in its own columns and units vs in the release's [0,1] space (CPU).

    .venv/bin/python bench/bench_table_csv.py                              # T = 100,000 points of 20 columns
    .venv/bin/python bench/bench_table_csv.py --points 20000 --dim 8 --repeats 7

A table of ``--points`` records of ``--dim`` columns in other units (column j spans (-10^j, 10^j) scaled) and 3 named
classes is released by DPMix (ℓ = 16, T = --points, σ = 0.5) with public bounds per column. Prints the median of
``--repeats`` timings of writing each CSV (:func:`~dpmix_core.synthesis.export.table_csv_bytes` against
:func:`~dpmix_core.synthesis.export.csv_bytes`) and of reading each back with
:func:`~dpmix_core.experiments.release_files.read_release` (the table's header checked against its card, mapped back to
[0,1]), plus both files' sizes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from timing import median_seconds  # noqa: E402

from dpmix_core.data.base import Dataset  # noqa: E402
from dpmix_core.experiments.release_files import read_release  # noqa: E402
from dpmix_core.synthesis.export import csv_bytes, table_csv_bytes, write_release  # noqa: E402
from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize  # noqa: E402


def bench(points: int, dim: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    scales = 10.0 ** (np.arange(dim) % 6)
    x = (rng.uniform(-1, 1, size=(points, dim)) * scales).astype(np.float32)
    y = rng.integers(0, 3, size=points)
    names = tuple(f"col{j}" for j in range(dim))
    ds = Dataset("bench", x, y, None, None, 3, "bench table", ("low", "mid", "high"), names, "level")
    bounds = tuple((float(-s), float(s)) for s in scales)
    config = SynthesisConfig("dpmix", l=16, T=points, sigma_x=0.5, sigma_y=0.5, feature_range=bounds)
    synthesis = synthesize(config, ds)
    out = {"write table (s)": median_seconds(lambda: table_csv_bytes(synthesis), repeats)}
    out["write release space (s)"] = median_seconds(lambda: csv_bytes(synthesis), repeats)
    with tempfile.TemporaryDirectory() as folder:
        table, _ = write_release(synthesis, Path(folder) / "table.csv", csv_units="data")
        plain, _ = write_release(synthesis, Path(folder) / "plain.csv")
        out["read table (s)"] = median_seconds(lambda: read_release(table), repeats)
        out["read release space (s)"] = median_seconds(lambda: read_release(plain), repeats)
        out["table MB"] = table.stat().st_size / 1e6
        out["release space MB"] = plain.stat().st_size / 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    result = bench(args.points, args.dim, args.repeats)
    print(f"T = {args.points:,} points, {args.dim} columns, 3 classes; median of {args.repeats}")
    for name, value in result.items():
        print(f"  {name:26s} {value:8.3f}")


if __name__ == "__main__":
    main()
