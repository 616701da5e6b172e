"""A table with text columns: released with their public categories (one-hot) vs without them (dropped, as before).

    .venv/bin/python bench/own_data_categories.py                 # 3 seeds, eps 1 and 4 (about 3 min, 2 cores)
    .venv/bin/python bench/own_data_categories.py --eps 1 2 4 8

The table: 20,000 records with an age (20 to 80), an income (10,000 to 100,000), a region (north, south, east, west)
and a blood group (A, B, AB, O; unrelated to the class); the class (3) is whether the region is north or east plus
whether the age is over 50. Until text columns could be read, the file had to be released without them; with
``--categories`` the region and blood group are one-hot features with bounds (0, 1). Public bounds: age (0, 120),
income (0, 200000). Each run is ``train --data-file`` as the CLI makes it (20 % held out, the own-data linear
protocol), on a release calibrated to the target ε by its tightest rigorous accountant; DP-SGD and the non-private
model are the references. Prints a markdown table of mean ± sd test accuracy, then the cost of reading 100,000
records with the two text columns against the same table written as numbers.
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
from timing import median_seconds  # noqa: E402

from dpmix_core.data import load_user_data, with_category_bounds  # noqa: E402
from dpmix_core.experiments.config import RunConfig  # noqa: E402
from dpmix_core.experiments.run_data import open_data_file  # noqa: E402
from dpmix_core.privacy.checks import FeatureRange  # noqa: E402

REGIONS = ("north", "south", "east", "west")
BLOOD = ("A", "B", "AB", "O")
CATEGORIES = (("region", REGIONS), ("blood", BLOOD))
RELEASES = {"dpmix": (16, 16_000), "poisson": (16, 16_000)}  # mechanism: (l, T), about the training records' size


def _columns(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    region, blood, age = rng.choice(REGIONS, n), rng.choice(BLOOD, n), rng.uniform(20, 80, n)
    label = np.isin(region, ("north", "east")).astype(int) + (age > 50).astype(int)
    return {"age": age, "region": region, "blood": blood, "income": rng.uniform(1e4, 1e5, n), "label": label}


def write_tables(folder: Path, n: int = 20_000) -> tuple[Path, Path, Path]:
    """The table with its text columns, the same without them, and the same with them written as 0/1 columns."""
    c = _columns(n)
    words = [f"{a:.1f},{r},{b},{i:.0f},{k}" for a, r, b, i, k in zip(*c.values(), strict=True)]
    plain = [f"{a:.1f},{i:.0f},{k}" for a, i, k in zip(c["age"], c["income"], c["label"], strict=True)]
    hot = [
        ",".join([f"{c['age'][j]:.1f}", *(str(int(c[col][j] == v)) for col, vs in CATEGORIES for v in vs)])
        + f",{c['income'][j]:.0f},{c['label'][j]}"
        for j in range(n)
    ]
    hot_header = ",".join(["age", *(f"{col}={v}" for col, vs in CATEGORIES for v in vs), "income", "label"])
    paths = (folder / "words.csv", folder / "plain.csv", folder / "numbers.csv")
    paths[0].write_text("\n".join(["age,region,blood,income,label", *words]) + "\n")
    paths[1].write_text("\n".join(["age,income,label", *plain]) + "\n")
    paths[2].write_text("\n".join([hot_header, *hot]) + "\n")
    return paths


def table_bounds(names, categories) -> FeatureRange:
    """The table's public bounds: age (0, 120), income (0, 200000), each one-hot column (0, 1)."""
    bounds = with_category_bounds(
        tuple((0.0, 120.0) if n == "age" else (0.0, 200_000.0) if n == "income" else (0.0, 1.0) for n in names),
        feature_names=names,
        categories=categories,
    )
    assert bounds is not None
    return bounds


def _config(path: Path, categories, method: str, mechanism: str | None, eps: float, seed: int) -> RunConfig:
    own = open_data_file(path, label_column="label", categories=categories)
    bounds = table_bounds(own.dataset.feature_names, categories)
    return own_run(own, method, mechanism, bounds, eps, seed, RELEASES)


def main() -> None:
    args = seeds_and_eps(__doc__.split("\n")[0], (1.0, 4.0))
    with tempfile.TemporaryDirectory() as folder:
        words, plain, numbers = write_tables(Path(folder))
        start = time.perf_counter()
        tables = ((plain, ()), (words, CATEGORIES))
        best = [mean_test_accuracy([_config(p, c, "non-private", None, 1.0, 0)])[0] for p, c in tables]
        print(f"non-private: {best[0]:.1f} % without the text columns, {best[1]:.1f} % with them\n")
        print("| method | ε | without the text columns | with their categories | seconds a run |")
        print("|---|---|---|---|---|")
        for method, mechanism in (("mixing", "dpmix"), ("mixing", "poisson"), ("dp-sgd", None)):
            for eps in args.eps:
                cells, seconds = [], []
                for path, categories in tables:
                    t0 = time.perf_counter()
                    configs = (_config(path, categories, method, mechanism, eps, s) for s in range(args.seeds))
                    mean, sd = mean_test_accuracy(configs)
                    seconds.append((time.perf_counter() - t0) / args.seeds)
                    cells.append(f"{mean:.1f} ± {sd:.1f} %")
                name = mechanism or method
                print(f"| {name} | {eps:g} | {cells[0]} | {cells[1]} | {statistics.median(seconds):.1f} |", flush=True)
        print(f"\n{args.seeds} seeds; {time.perf_counter() - start:.0f} s in all\n")
        folder100k = Path(folder) / "read"
        folder100k.mkdir()
        w, _, h = write_tables(folder100k, n=100_000)
        data_w, data_h = w.read_bytes(), h.read_bytes()
        t_words = median_seconds(lambda: load_user_data(data_w, "w.csv", categories=CATEGORIES), 3)
        t_numbers = median_seconds(lambda: load_user_data(data_h, "n.csv"), 3)
        print(f"reading 100,000 records (median of 3): {t_words:.2f} s with 2 text columns and their categories, "
              f"{t_numbers:.2f} s for the same table written as numbers")  # fmt: skip


if __name__ == "__main__":
    main()
