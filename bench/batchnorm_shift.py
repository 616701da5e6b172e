"""How far do BatchNorm statistics learned on a noisy release miss clean inputs? One preset cell, five readings.

    .venv/bin/python bench/batchnorm_shift.py --data-dir ../shared/data --preset dpcda-table2-quick --l 4 --epsilon 20 10
    .venv/bin/python bench/batchnorm_shift.py --data-dir ../shared/data --preset dpcda-table2 --l 4 --epsilon 10 --set lr=1e-3

For each cell (the preset's run at that l and target epsilon, seed ``--seed``, fields changed with ``--set``) the
same trained weights are evaluated on

* the clean test split with the release's statistics (the protocol's result, ``test_accuracy``),
* the clean test split with the statistics re-estimated on its unlabelled inputs (AdaBN, the run's
  ``test_accuracy_bn_recalibrated``: a diagnostic, never a result),
* the test inputs plus the release's own Gaussian noise N(0, sigma_x^2) (what the release's validation split
  looks like to the model),
* the test inputs through the release's feature map without its clip (class-centric 'zscore': z-scored only, the
  norm of a real image, ~28, instead of c = 1): DP-CDA clips the private records it mixes (Algorithm 1, step 6)
  and says only that it tests on "the original test partition ... unmixed and noise-free" (Sec. 4), so a test
  loader that z-scores and does not clip is a reading of the paper (``RunConfig.test_inputs = "unclipped"``,
  ``train --test-inputs unclipped``), measured here on the same weights,
* the test inputs clipped and then scaled to the released points' median norm (``test_inputs = "release-scale"``;
  the run's own reading, for a clipped class-centric z-score release),

next to the accuracy on the release's validation split and the largest share of one predicted class.
Prints a markdown table; ``--json FILE`` also writes the rows. REPRODUCTION.md ("What the collapse is") used it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from set_fields import parse_set  # noqa: E402  (bench/ is on sys.path when a script runs)

from dpmix_core.data import load_dataset  # noqa: E402
from dpmix_core.experiments.presets import get_preset  # noqa: E402
from dpmix_core.experiments.runner import run_config  # noqa: E402
from dpmix_core.training.data import release_feature_map  # noqa: E402
from dpmix_core.training.train import evaluate  # noqa: E402


def unclipped_test_inputs(config, shape: tuple[int, ...]) -> torch.Tensor | None:
    """The run's test split through its release's feature map without the clip, in the model's shape (None where
    the release has no clip to lift: RunConfig refuses test_inputs="unclipped" there)."""
    if config.synthesis is None or not config.synthesis.zscore_clipped:
        return None
    ds = load_dataset(config.dataset, data_dir=config.data_dir)
    feature_map = release_feature_map(config.synthesis, ds.x_train, clip=False)
    return torch.as_tensor(feature_map(ds.x_test).reshape(shape), dtype=torch.float32)


def cell(preset: str, mix_degree: int, epsilon: float, seed: int, overrides: dict) -> dict:
    runs = [
        r
        for r in get_preset(preset).runs()
        if r.synthesis is not None and r.synthesis.l == mix_degree and r.synthesis.target_epsilon == epsilon
    ]
    if not runs:
        raise SystemExit(f"{preset} has no run with l = {mix_degree} and target epsilon {epsilon}")
    config = replace(runs[0], seed=seed, **overrides)
    keep: dict = {}
    result = run_config(config, keep=keep)
    model, device = keep["model"], keep["device"]
    x_test = torch.as_tensor(keep["x_test"], dtype=torch.float32)
    noise = np.random.default_rng(seed).normal(0.0, result["sigma_x"], keep["x_test"].shape).astype(np.float32)
    y_test = torch.as_tensor(keep["y_test"]).to(device)
    noisy = evaluate(model, (x_test + torch.as_tensor(noise)).to(device), y_test)
    clean = evaluate(model, x_test.to(device), y_test)
    lifted = unclipped_test_inputs(config, tuple(x_test.shape))
    unclipped = {} if lifted is None else evaluate(model, lifted.to(device), y_test)
    return {
        "preset": preset,
        "l": mix_degree,
        "epsilon": epsilon,
        "seed": seed,
        "set": overrides,
        "sigma_x": result["sigma_x"],
        "test_accuracy": result["test_accuracy"],
        "one_class_share": clean["prediction_share"],
        "collapsed": result["collapsed"],
        "adabn_accuracy": result["test_accuracy_bn_recalibrated"],
        "noisy_test_accuracy": noisy["accuracy"],
        "unclipped_test_accuracy": unclipped.get("accuracy"),
        "unclipped_one_class_share": unclipped.get("prediction_share"),
        "release_scale_test_accuracy": (result.get("test_accuracy_by_inputs") or {})
        .get("release-scale", {})
        .get("accuracy"),
        "val_accuracy": result["val_accuracy"],
        "seconds": result["seconds"],
        "torch_threads": result["torch_threads"],
    }


def unclipped_cell(row: dict) -> str:
    """'acc (share % one class)', or '—' where the release has no clip."""
    if row["unclipped_test_accuracy"] is None:
        return "—"
    return f"{100 * row['unclipped_test_accuracy']:.2f} ({100 * row['unclipped_one_class_share']:.0f} % one class)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", help="folder with mnist.npz (sets DPMIX_DATA_DIR)")
    ap.add_argument("--preset", default="dpcda-table2-quick")
    ap.add_argument("--l", type=int, default=4)
    ap.add_argument("--epsilon", type=float, nargs="+", default=[20.0, 10.0])
    ap.add_argument("--seed", type=int, nargs="+", default=[0])
    ap.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="RunConfig fields, e.g. lr=1e-3")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    if args.data_dir:
        os.environ["DPMIX_DATA_DIR"] = args.data_dir
    overrides = parse_set(args.set)
    rows = [cell(args.preset, args.l, e, s, overrides) for e in args.epsilon for s in args.seed]
    print(
        "| cell | sigma_x | test (protocol) | one class | AdaBN | noisy test | test not clipped | test at the "
        "release's scale | release val | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    pct = lambda v: "—" if v is None else f"{100 * v:.2f}"  # noqa: E731
    for r in rows:
        extra = "".join(f", {k}={v}" for k, v in r["set"].items())
        print(
            f"| {r['preset']} l={r['l']} eps={r['epsilon']:g} seed {r['seed']}{extra} | {r['sigma_x']:.4f} | "
            f"{100 * r['test_accuracy']:.2f}{' (collapsed)' if r['collapsed'] else ''} | "
            f"{100 * r['one_class_share']:.0f} % | {pct(r['adabn_accuracy'])} | "
            f"{pct(r['noisy_test_accuracy'])} | {unclipped_cell(r)} | {pct(r['release_scale_test_accuracy'])} | "
            f"{pct(r['val_accuracy'])} | {r['seconds']:.0f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
