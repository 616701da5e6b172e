"""DP-SGD on one's own file: the features as the public bounds scale them vs rescaled by private feature ranges.

    .venv/bin/python bench/dpsgd_feature_ranges.py                      # 3 seeds, eps 2 and 8 (about 1.5 min, 2 cores)
    .venv/bin/python bench/dpsgd_feature_ranges.py --seeds 5 --eps 1 2 4 8
    .venv/bin/python bench/dpsgd_feature_ranges.py --clipping           # the ranges alone: how much they clip

Three tables, each written as a CSV into a temporary folder: a synthetic 3-class file of 600 records and 4 features
(``tests/test_own_data_training.py``'s), read with tight (-5, 10), loose (-50, 100) and very loose (-500, 1000)
bounds; scikit-learn's wine (178 records, 13 features, one of them in the thousands) with bounds (0, 1700); and its
breast-cancer table (569 records, 30 features) with bounds (0, 4300). Each run is ``train --data-file`` as the CLI
makes it (20 % held out, the own-data linear protocol: Adam 1e-2, batch 32, 50 epochs), once with
``input_norm="none"``, once with ``"dp-ranges"`` (the ranges' first version: 3 rounds) and once with
``"private-ranges"`` (the default since 2026-12-02: 10 rounds, as a release's ``--private-ranges``); prints a
markdown table of mean ± sd test accuracy.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from own_data import mean_test_accuracy, seeds_and_eps  # noqa: E402  (bench/ is on sys.path when a script runs)

from dpmix_core.experiments.config import RunConfig  # noqa: E402
from dpmix_core.experiments.run_data import open_data_file  # noqa: E402
from dpmix_core.training.protocols import protocol_options  # noqa: E402


def _write(path: Path, x: np.ndarray, y: np.ndarray) -> Path:
    header = ",".join(f"f{i}" for i in range(x.shape[1])) + ",label"
    rows = [",".join(f"{v:.6g}" for v in row) + f",{c}" for row, c in zip(x, y, strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def tables(folder: Path) -> list[tuple[str, Path, tuple[float, float]]]:
    from sklearn.datasets import load_breast_cancer, load_wine

    rng = np.random.default_rng(0)  # the synthetic file of tests/test_own_data_training.py (_pets)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 4)) + 1.5 * y[:, None]
    x = np.round(x, 3)
    pets = _write(folder / "pets.csv", x, y)
    wine, cancer = load_wine(), load_breast_cancer()
    return [
        ("synthetic 3-class, 600 x 4", pets, (-5.0, 10.0)),
        ("synthetic 3-class, 600 x 4", pets, (-50.0, 100.0)),
        ("synthetic 3-class, 600 x 4", pets, (-500.0, 1000.0)),
        ("wine, 178 x 13", _write(folder / "wine.csv", wine.data, wine.target), (0.0, 1700.0)),
        ("breast cancer, 569 x 30", _write(folder / "cancer.csv", cancer.data, cancer.target), (0.0, 4300.0)),
    ]


def accuracy(path: Path, bounds: tuple[float, float], eps: float, norm: str, seeds: int) -> tuple[float, float]:
    own = open_data_file(path, label_column="label")
    steps = protocol_options("linear", method="dp-sgd", own_data=True)
    return mean_test_accuracy(
        RunConfig(
            "dp-sgd",
            model="linear",
            dpsgd_epsilon=eps,
            feature_range=bounds,
            seed=seed,
            epochs=50,
            **own.options,
            **{**steps, "input_norm": norm},
        )
        for seed in range(seeds)
    )


def clipping(folder: Path, draws: int = 40) -> None:
    """How much of each file's values the ranges clip: over ``draws`` seeds at ε = 1, 2, 8 on every file and bounds,
    the median per cell of the share of its values the feature clipped most loses, and the draws where it is more
    than half, at 3 and at 10 rounds (the ranges alone, no training)."""
    from dpmix_core.data import load_user_data
    from dpmix_core.mechanisms.feature_ranges import dp_feature_ranges
    from dpmix_core.training.dpsgd import ranges_noise_multiplier

    for rounds in (3, 10):
        medians, over_half, cells = [], 0, 0
        for _, path, (lo, hi) in tables(folder):
            x = load_user_data(path.read_bytes(), path.name, label_column="label").x_train.astype(np.float64)
            unit = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
            for eps in (1.0, 2.0, 8.0):
                z = ranges_noise_multiplier(target_epsilon=eps, delta=1e-5)
                worst = []
                for seed in range(draws):
                    r = dp_feature_ranges(unit, noise_multiplier=z, rounds=rounds, seed=seed)
                    worst.append(float(np.mean((unit < r.low) | (unit > r.high), axis=0).max()))
                medians.append(float(np.median(worst)))
                over_half += sum(w > 0.5 for w in worst)
                cells += draws
        print(
            f"{rounds} rounds: the feature clipped most loses a median {min(medians):.0%}-{max(medians):.0%} of its "
            f"values per cell; more than half in {over_half} of {cells} draws"
        )


def main() -> None:
    if "--clipping" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            clipping(Path(tmp))
        return
    args = seeds_and_eps(__doc__.split("\n")[0], (2.0, 8.0))
    norms = ("none", "dp-ranges", "private-ranges")
    print(
        "| file | public bounds | ε | as scaled (none) | ranges, 3 rounds (dp-ranges) | ranges, 10 rounds (private-ranges) |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, bounds in tables(Path(tmp)):
            for eps in args.eps:
                cells = [accuracy(path, bounds, eps, norm, args.seeds) for norm in norms]
                text = " | ".join(f"{m:.1f} ± {s:.1f} %" for m, s in cells)
                print(f"| {name} | ({bounds[0]:g}, {bounds[1]:g}) | {eps:g} | {text} |", flush=True)


if __name__ == "__main__":
    main()
