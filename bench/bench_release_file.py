"""train --release: what reading a release file costs before training starts (CPU).

    .venv/bin/python bench/bench_release_file.py                       # T = 60000 points of 784 pixels (.npz)
    .venv/bin/python bench/bench_release_file.py --points 60000 --dim 3969 --repeats 5   # a ScatterNet release

A release is written by ``synthesize`` (embedded sample, DPMix, small T: its card is real), then its arrays are
replaced by synthetic float32 rows of the asked size (the cost depends on the file's size only). Prints the
median of ``--repeats`` timings of :func:`~dpmix_core.experiments.release_files.file_sha256` (the run's identity)
and of :func:`~dpmix_core.experiments.release_files.read_release` (hash, load, checks against the card).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from timing import median_seconds  # noqa: E402

from dpmix_core.cli.main import main  # noqa: E402
from dpmix_core.experiments.release_files import file_sha256, read_release  # noqa: E402


def bench(points: int, dim: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "release.npz"
        args = ["--dataset", "embedded", "--mechanism", "dpmix", "--l", "4", "--T", "10", "--sigma-x", "0.1"]
        assert main(["synthesize", *args, "--out", str(path)]) == 0
        card = read_release(path).card
        card["released"] = {**card["released"], "points": points, "feature_dim": dim}
        rng = np.random.default_rng(0)
        x = rng.random((points, dim), dtype=np.float32)
        y = rng.random((points, card["released"]["label_dim"]), dtype=np.float32)
        with open(path, "wb") as fh:
            np.savez(fh, x=x, y=y, privacy_card=np.array(json.dumps(card)))
        size = path.stat().st_size
        return {
            "points": points,
            "dim": dim,
            "file_mib": size / 2**20,
            "sha256_s": median_seconds(lambda: file_sha256(path), repeats),
            "read_release_s": median_seconds(lambda: read_release(path), repeats),
        }


def run(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=60000)
    p.add_argument("--dim", type=int, default=784)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    res = bench(args.points, args.dim, args.repeats)
    print(
        f"T = {res['points']}, d = {res['dim']} ({res['file_mib']:.0f} MiB): sha256 {res['sha256_s']:.2f} s, "
        f"read_release {res['read_release_s']:.2f} s (median of {args.repeats})"
    )


if __name__ == "__main__":
    run()
