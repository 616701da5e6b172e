"""How large is a released DP-CDA point, against a test image under each test loader? (REPRODUCTION.md §3b)

    .venv/bin/python bench/release_scale.py --data-dir .devdata --dataset fashion-mnist \
        --constants .devdata/zscore-constants/fashion-mnist-test-even.npz \
        --l 1 2 4 8 16 32 --sigma 1.061 0.563 0.301 0.163 0.091 0.053

A BatchNorm CNN keeps running statistics of its training inputs, the released points, and applies them to the
test images. DP-CDA's records are z-scored with public per-pixel constants and clipped to ||x|| <= 1; a released
point is the mean of l records of one class plus N(0, sigma^2) noise per pixel. This prints, per (l, sigma): the
median norm of the mixture alone, of the noise (sigma * sqrt(d)) and of the released point, over --draws random
class-centric mixtures of the training records; and the median norm of the odd test images z-scored with the same
constants, not clipped and clipped (the two test loaders, test_inputs 'unclipped' and 'release'). The sigmas are
the runs' own (each run's result records its sigma_x). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dpmix_core.data import load_dataset, pick_rows  # noqa: E402
from dpmix_core.mechanisms.mixing import zscore_clip  # noqa: E402
from dpmix_core.synthesis.public_constants import read_zscore_constants  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--data-dir")
    p.add_argument("--constants", required=True, help="the per-pixel public constants (.npz) the release used")
    p.add_argument("--l", type=int, nargs="+", required=True)
    p.add_argument("--sigma", type=float, nargs="+", required=True, help="sigma_x for each --l, in order")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if len(args.l) != len(args.sigma):
        p.error("give one --sigma per --l")
    data = load_dataset(args.dataset, data_dir=args.data_dir)
    constants = read_zscore_constants(args.constants)
    flat = data.x_train.reshape(len(data.x_train), -1)
    records, _ = zscore_clip(flat, constants.mean, constants.std, 1.0)  # the mechanism's own preprocessing
    odd = pick_rows(data.x_test, "odd").reshape(-1, flat.shape[1])
    test = np.linalg.norm(zscore_clip(odd, constants.mean, constants.std, np.inf)[0], axis=1)  # z-scored, not clipped
    rng = np.random.default_rng(args.seed)
    by_class = [np.flatnonzero(data.y_train == k) for k in range(int(data.y_train.max()) + 1)]
    d = records.shape[1]
    print(
        f"odd test images, median norm: not clipped {np.median(test):.1f}, clipped {np.median(np.minimum(test, 1)):.2f}"
    )
    print("\n| l | sigma_x | mixture | noise (sigma sqrt(d)) | released point |\n|---|---|---|---|---|")
    for l, sigma in zip(args.l, args.sigma, strict=True):
        mixture, released = [], []
        for _ in range(args.draws):
            members = rng.choice(by_class[rng.integers(len(by_class))], l, replace=False)
            mean = records[members].mean(axis=0)
            mixture.append(np.linalg.norm(mean))
            released.append(np.linalg.norm(mean + rng.normal(0.0, sigma, d)))
        print(f"| {l} | {sigma:g} | {np.median(mixture):.2f} | {sigma * np.sqrt(d):.2f} | {np.median(released):.2f} |")


if __name__ == "__main__":
    main()
