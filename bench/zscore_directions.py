"""Where does one global z-score point a record, against a per-pixel one? DP-CDA's release, before the noise.

    .venv/bin/python bench/zscore_directions.py --data-dir .devdata --datasets mnist fashion-mnist

DP-CDA (Algorithm 1, steps 1-6) z-scores every record, then clips it to ||x|| <= c, then mixes and adds noise of
a fixed size. The clip keeps only a record's direction, so what a z-score changes is where that direction points.
For each dataset's training records this prints:

* the norm of the mean image after the dataset's documented global z-score (one public mean and std, what the
  product's covered release uses), against the median norm of a record: the share of every clipped record that
  all records share;
* the cosine between each record z-scored globally and the same record z-scored per pixel with the private
  training set's mean and std (the paper's own release; not covered): how far apart the two releases' records are;
* the cosine between the record z-scored per pixel with the training set's statistics and with the test split's
  (the data a public source of the same distribution would give): how close per-pixel constants that do not come
  from the private records get.

Median and least cosine over all training records. Prints a markdown table. REPRODUCTION.md §3b used it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dpmix_core.data import load_dataset, public_zscore_constants  # noqa: E402
from dpmix_core.mechanisms.mixing import column_mean, column_std  # noqa: E402

CHUNK = 10_000


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row divided by its norm (a zero row stays zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def _per_pixel(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel mean and std of the rows of x as the mechanism computes them; a constant pixel keeps std 1."""
    mean = column_mean(x)
    std = column_std(x, mean)
    return mean, np.where(std == 0, 1.0, std)


def directions_of(train: np.ndarray, test: np.ndarray, constants: tuple[float, float]) -> dict[str, float]:
    """The table row for training rows ``train``, test rows ``test`` (n, d) and the global (mean, std)."""
    g_mean, g_std = constants
    private_mean, private_std = _per_pixel(train)
    test_mean, test_std = _per_pixel(test)
    global_vs_pixel, private_vs_test, norms = [], [], []
    for start in range(0, len(train), CHUNK):
        rows = train[start : start + CHUNK]
        z_global = (rows - g_mean) / g_std
        z_private = (rows - private_mean) / private_std
        z_test = (rows - test_mean) / test_std
        norms.append(np.linalg.norm(z_global, axis=1))
        global_vs_pixel.append((_unit_rows(z_global) * _unit_rows(z_private)).sum(axis=1))
        private_vs_test.append((_unit_rows(z_private) * _unit_rows(z_test)).sum(axis=1))
    gp, pt = np.concatenate(global_vs_pixel), np.concatenate(private_vs_test)
    return {
        "mean image norm (global z)": float(np.linalg.norm((private_mean - g_mean) / g_std)),
        "median record norm (global z)": float(np.median(np.concatenate(norms))),
        "cos(global, per-pixel private) median": float(np.median(gp)),
        "cos(global, per-pixel private) least": float(gp.min()),
        "cos(per-pixel private, per-pixel test) median": float(np.median(pt)),
        "cos(per-pixel private, per-pixel test) least": float(pt.min()),
    }


def directions(name: str, data_dir: str | None) -> dict[str, float]:
    """The table row for a built-in dataset, z-scored globally with its documented public constants."""
    data = load_dataset(name, data_dir=data_dir, download=False)
    constants = public_zscore_constants(name)
    if constants is None or data.x_test is None:
        raise SystemExit(f"{name}: needs documented public z-score constants and a test split.")
    flat = [x.reshape(len(x), -1).astype(np.float64) for x in (data.x_train, data.x_test)]
    return directions_of(flat[0], flat[1], constants)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder with the datasets (no download is tried)")
    parser.add_argument("--datasets", nargs="+", default=["mnist", "fashion-mnist"])
    args = parser.parse_args(argv)
    rows = {name: directions(name, args.data_dir) for name in args.datasets}
    columns = list(next(iter(rows.values())))
    print("| dataset | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.5g}" for c in columns) + " |")


if __name__ == "__main__":
    main()
