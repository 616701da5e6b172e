"""Mixing-mechanism throughput on full MNIST (issue: mechanisms). Prints a markdown table of medians.

    python bench/bench_mixing.py --data-dir ../shared/data [--repeats 3] [--num-points 60000]

Target on the 2-core reference machine: DPMix at l=256, T=60000 on MNIST
(n=60000, d=784) in <= 3 s (>= 20,000 samples/s) with peak RSS <= 2 GB;
class-centric and Poisson mixing at least as fast. Each mechanism runs in its
own process so that its peak RSS is its own (the number includes Python, numpy,
torch and the 47 MB uint8 data set). The naive baseline is the thesis's
per-point loop (a dense weight vector over all n records, X^T C_t), timed on a
few hundred points and extrapolated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

SIGMA = 0.0711  # thesis §4.1 noise level; the value does not change the speed
MECHANISMS = ("dpmix", "class-centric", "poisson", "naive")


def load_mnist(data_dir: str | None) -> tuple[np.ndarray, np.ndarray, str]:
    """Full MNIST train split flattened to (60000, 784) uint8, or random data of that shape."""
    if data_dir:
        path = Path(data_dir) / "mnist.npz"
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                x, y = data["x_train"], data["y_train"]
            return x.reshape(len(x), -1), y.astype(np.int64), f"MNIST from {path}"
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(60000, 784), dtype=np.uint8)
    y = rng.integers(0, 10, size=60000)
    return x, y, "random uint8 data of MNIST's shape (mnist.npz not found)"


def run_one(name: str, args: argparse.Namespace) -> dict:
    """Time one mechanism in this process; returns times, peak RSS and the setting."""
    from dpmix_core import mechanisms as M
    from dpmix_core.privacy.release import MixingRelease

    x, y, source = load_mnist(args.data_dir)
    T, l = args.num_points, args.mix_degree
    if name == "naive":
        return _naive(x, y, l, args.naive_points) | {"source": source}
    if name == "dpmix":
        params = MixingRelease.dpmix(n=len(x), l=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA, dx=x.shape[1], dy=10)
        fn = lambda: M.dpmix(
            x, y, num_classes=10, release=params, seed=1, device=args.device, index_sampling=args.index_sampling
        )  # noqa: E731
        setting = f"l={l}, T={T}, without replacement"
    elif name == "class-centric":
        sizes = tuple(int(c) for c in np.bincount(y, minlength=10))
        params = MixingRelease.class_centric(
            class_sizes=sizes, l=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA, dx=x.shape[1], dy=10
        )
        fn = lambda: M.class_centric_mix(
            x, y, num_classes=10, release=params, seed=1, device=args.device, index_sampling=args.index_sampling
        )  # noqa: E731
        setting = f"l={l}, T_k=floor(T/10), [0,1] features"
    elif name == "poisson":
        params = MixingRelease.poisson(n=len(x), m=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA)
        fn = lambda: M.poisson_mix(
            x, y, num_classes=10, release=params, seed=1, device=args.device, index_sampling=args.index_sampling
        )  # noqa: E731
        setting = f"m={l} (E|batch|), T={T}, Poisson"
    else:
        raise ValueError(name)
    # warm-up on a few points: imports torch, starts its thread pool
    small = replace(params, num_points=512)
    {"dpmix": M.dpmix, "class-centric": M.class_centric_mix, "poisson": M.poisson_mix}[name](
        x, y, num_classes=10, release=small, seed=0, device=args.device, index_sampling=args.index_sampling
    )
    rss_before = _peak_rss_mb()
    times, points = [], 0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        points = out.num_points
        del out
    return {
        "setting": setting,
        "points": points,
        "median_s": statistics.median(times),
        "times": times,
        "peak_rss_mb": _peak_rss_mb(),
        "rss_after_warmup_mb": rss_before,
        "source": source,
    }


def _naive(x: np.ndarray, y: np.ndarray, l: int, points: int) -> dict:
    """The thesis's loop, re-typed: for each point a dense weight vector C_t over all n records, x_t = X^T C_t."""
    rng = np.random.default_rng(1)
    n = len(x)
    X = x.astype(np.float32) / 255.0
    Y = np.eye(10, dtype=np.float32)[y]
    out_x = np.empty((points, X.shape[1]), dtype=np.float32)
    out_y = np.empty((points, 10), dtype=np.float32)
    t0 = time.perf_counter()
    for t in range(points):
        C = np.zeros(n, dtype=np.float32)
        C[rng.choice(n, l, replace=False)] = 1.0 / l
        out_x[t] = X.T @ C + rng.normal(0, SIGMA, X.shape[1])
        out_y[t] = Y.T @ C + rng.normal(0, SIGMA, 10)
    elapsed = time.perf_counter() - t0
    return {
        "setting": f"l={l}, {points} points timed, extrapolated to 60000",
        "points": points,
        "median_s": elapsed,
        "times": [elapsed],
        "peak_rss_mb": _peak_rss_mb(),
        "rss_after_warmup_mb": None,
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder holding mnist.npz (keras layout); else random data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-points", type=int, default=60000, help="T")
    parser.add_argument("--mix-degree", type=int, default=256, help="l (and m for Poisson)")
    parser.add_argument("--naive-points", type=int, default=300)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument(
        "--index-sampling",
        default="auto",
        choices=["auto", "host", "device"],
        help="where the indices are drawn (auto: on the device off the CPU)",
    )
    parser.add_argument("--only", choices=MECHANISMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(args.only, args)))
        return

    load_start = os.getloadavg()
    results = {}
    for name in MECHANISMS:
        cmd = [sys.executable, __file__, "--only", name] + _forward(args)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"{name} failed:\n{proc.stderr}")
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    load_end = os.getloadavg()

    import torch

    naive_rate = results["naive"]["points"] / results["naive"]["median_s"]
    print(f"Data: {results['dpmix']['source']}; n=60000, d=784, K=10.")
    print(
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU(s), torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), device={args.device}, index sampling {args.index_sampling}; "
        f"load average {load_start[0]:.2f} before, "
        f"{load_end[0]:.2f} after (other work on the machine slows the numbers down)."
    )
    print()
    print("| mechanism | setting | median time for T points (s) | samples/s | x naive | peak RSS (MB) | before (MB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in MECHANISMS:
        r = results[name]
        rate = r["points"] / r["median_s"]
        if name == "naive":
            t_full = args.num_points / rate
            print(
                f"| naive per-point loop | {r['setting']} | {t_full:.0f} (extrapolated) | {rate:,.0f} | 1 | "
                f"{r['peak_rss_mb']:.0f} | |"
            )
            continue
        spread = ", ".join(f"{t:.2f}" for t in r["times"])
        print(
            f"| {name} | {r['setting']} | {r['median_s']:.2f} ({spread}) | {rate:,.0f} | {rate / naive_rate:,.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r['rss_after_warmup_mb']:.0f} |"
        )
    print()
    print(
        "Peak RSS is the whole process (Python, numpy, torch, the uint8 data); 'before' is its peak after loading "
        "and a 512-point warm-up, so the difference is what the mechanism adds."
    )
    print("Command: " + " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv))


def _forward(args: argparse.Namespace) -> list[str]:
    out = [
        "--repeats", str(args.repeats),
        "--num-points", str(args.num_points),
        "--mix-degree", str(args.mix_degree),
        "--naive-points", str(args.naive_points),
        "--device", args.device,
        "--index-sampling", args.index_sampling,
    ]  # fmt: skip
    if args.data_dir:
        out += ["--data-dir", args.data_dir]
    return out


if __name__ == "__main__":
    main()
