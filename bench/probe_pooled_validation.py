"""One-off probe behind docs/REPRODUCTION.md §9: does scoring on the *pooled* validation splits of all candidate
releases rank feature-mixing releases better than each release's own split?

    nice -n 10 .venv/bin/python bench/probe_pooled_validation.py --data-dir ../shared/data --best best.json

Reads the calibrated sigmas of a ``best-release`` result (``--best``), trains scatter-linear for 20 epochs on four
of its candidates (features computed once) and prints, per candidate, validation accuracy on its own held-out
points, on the union of all four held-out sets, the noisy label's mass on the predicted class (pooled), and the
test accuracy (a diagnostic only).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpmix_core.data import load_dataset  # noqa: E402
from dpmix_core.data.scattering import feature_dataset, scattering_shape  # noqa: E402
from dpmix_core.experiments.best_release import BestReleaseSearch, Candidate, candidate_run  # noqa: E402
from dpmix_core.synthesis.pipeline import synthesize  # noqa: E402
from dpmix_core.training import data as D  # noqa: E402
from dpmix_core.training.losses import get_loss  # noqa: E402
from dpmix_core.training.models import build_model  # noqa: E402
from dpmix_core.training.train import OptimSettings, fit, predict  # noqa: E402

CANDIDATES = ((64, 10000, 1.0), (64, 30000, 1.0), (256, 30000, 1.0), (64, 10000, 4.0))


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir")
    p.add_argument("--best", required=True, help="a best-release result (JSON) with these candidates' sigmas")
    p.add_argument("--epochs", type=int, default=20)
    args = p.parse_args()
    t0 = time.perf_counter()
    trials = json.loads(Path(args.best).read_text())["trials"]
    sigmas = {tuple(t["candidate"].values()): (t["sigma_x"], t["sigma_y"]) for t in trials}
    raw = load_dataset("mnist", data_dir=args.data_dir)
    feats = feature_dataset(raw, "scattering")
    search = BestReleaseSearch(target_epsilon=1.0)
    x_test, y_test = _tensor(D.flat(feats.x_test)), feats.y_test
    held_out, models = {}, {}
    e = args.epochs
    for c in CANDIDATES:
        sx, sy = sigmas[c]
        cfg = candidate_run(search, Candidate(*c), epochs=e, sigma_x=sx, sigma_y=sy)
        release = synthesize(cfg.synthesis, raw, transformed=feats, job=True)
        xt, yt, xv, yv = D.split_validation(release.data.x, release.data.y, 0.1, np.random.default_rng(0))
        torch.manual_seed(0)
        model = build_model(
            "scatter-linear", input_shape=scattering_shape((28, 28)), num_outputs=10, normalised_features=True
        )
        settings = OptimSettings(
            lr=1e-3, schedule="multistep", lr_milestones=cfg.lr_milestones, lr_gamma=0.1, epochs=e, batch_size=256
        )
        fit(
            model,
            get_loss("gkl"),
            _tensor(xt),
            _tensor(yt),
            settings=settings,
            generator=torch.Generator().manual_seed(0),
        )
        held_out[c], models[c] = (_tensor(xv), yv), model
    for c, model in models.items():
        hits, mass = [], []
        for xv, yv in held_out.values():
            pred = predict(model, xv).argmax(1).numpy()
            hits.append(pred == yv.argmax(1))
            mass.append(yv[np.arange(len(pred)), pred])
        own_x, own_y = held_out[c]
        own = float((predict(model, own_x).argmax(1).numpy() == own_y.argmax(1)).mean())
        test = float((predict(model, x_test).argmax(1).numpy() == y_test).mean())
        print(
            f"m={c[0]} T={c[1]} lambda={c[2]:g}: own {own:.4f} pooled {np.concatenate(hits).mean():.4f} "
            f"pooled label mass {np.concatenate(mass).mean():.4f} test {test:.4f}"
        )
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
