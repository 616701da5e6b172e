"""Benchmark: streaming releases from a memory-mapped source (dpmix_core.synthesis.streaming).

Shows the cost model: time is proportional to T * l * d and independent of n, and the peak memory
is bounded by the chunk (neither n nor T). Three sweeps, each run in a fresh process (so its peak
RSS is its own):

* n in {1e5, 1e6, 1e7} at fixed T, l, d  (the source is a uint8 np.memmap on disk: 6.4 MB .. 640 MB);
* T in three sizes at fixed n, l, d;
* l in three sizes at fixed n, T, d.

Command: ``.venv/bin/python bench/bench_streaming.py`` (about 2 minutes on 2 cores; add ``--quick``
for a smaller run). The temporary memmaps go to ``--tmp`` (default: the system temp dir) and are
deleted at the end. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
D, K = 64, 10


def make_source(folder: Path, n: int) -> tuple[Path, Path]:
    x_path, y_path = folder / f"x_{n}.npy", folder / f"y_{n}.npy"
    x = np.lib.format.open_memmap(x_path, mode="w+", dtype=np.uint8, shape=(n, D))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.uint8, shape=(n,))
    block = 1_000_000
    for a in range(0, n, block):
        rng = np.random.default_rng(a)
        b = min(n, a + block)
        x[a:b] = rng.integers(0, 256, (b - a, D), dtype=np.uint8)
        y[a:b] = rng.integers(0, K, b - a, dtype=np.uint8)
    x.flush()
    y.flush()
    del x, y
    return x_path, y_path


def one(args: argparse.Namespace) -> None:
    """Child process: one streamed release, then a JSON line with the timings and peak RSS."""
    import torch

    from dpmix_core.synthesis.streaming import synthesize_streaming

    torch.set_num_threads(args.threads)
    x = np.load(args.x, mmap_mode="r")
    y = np.load(args.y, mmap_mode="r")
    out = Path(args.out)
    times = []
    for r in range(args.repeats):
        rel = synthesize_streaming(
            x,
            y,
            num_classes=K,
            l=args.l,
            T=args.T,
            sigma_x=0.5,
            sigma_y=0.5,
            seed=r,
            out_path=out,
            device=args.device,
            overwrite=True,
            accountants=False,
        )
        times.append(rel.seconds)
    peak_kb = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak_kb = int(line.split()[1])
    shutil.rmtree(out, ignore_errors=True)
    print(
        json.dumps(
            {
                "seconds": float(np.median(times)),
                "chunks": rel.chunks,
                "chunk_points": rel.chunk_points,
                "peak_rss_mb": peak_kb / 1024,
                "device": rel.device,
            }
        )
    )


def run_one(x: Path, y: Path, n: int, T: int, l: int, tmp: Path, threads: int, device: str, repeats: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--one",
        "--x",
        str(x),
        "--y",
        str(y),
        "--T",
        str(T),
        "--l",
        str(l),
        "--out",
        str(tmp / "out"),
        "--threads",
        str(threads),
        "--device",
        device,
        "--repeats",
        str(repeats),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    row = json.loads(res.stdout.strip().splitlines()[-1])
    row.update(n=n, T=T, l=l, d=D, work=T * l * D)
    row["ns_per_elem"] = row["seconds"] / row["work"] * 1e9
    row["points_per_s"] = T / row["seconds"]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--x"), p.add_argument("--y"), p.add_argument("--out")
    p.add_argument("--T", type=int), p.add_argument("--l", type=int)
    p.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1))
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--repeats", type=int, default=3, help="timed releases per size (the median is shown)")
    p.add_argument("--tmp", default=None, help="folder for the temporary memmaps (deleted at the end)")
    p.add_argument("--quick", action="store_true", help="n up to 1e6 and smaller T (CI smoke)")
    args = p.parse_args()
    if args.one:
        one(args)
        return
    ns = [100_000, 1_000_000] if args.quick else [100_000, 1_000_000, 10_000_000]
    T0, L0 = (20_000, 64) if args.quick else (100_000, 64)
    tmp = Path(tempfile.mkdtemp(prefix="dpmix_bench_stream_", dir=args.tmp))
    rows: list[tuple[str, dict]] = []
    t_start = time.time()
    try:
        sources = {}
        for n in ns:
            t = time.perf_counter()
            sources[n] = make_source(tmp, n)
            print(
                f"# source n={n:,}: {n * D / 1e6:.0f} MB uint8 memmap written in {time.perf_counter() - t:.1f} s",
                file=sys.stderr,
            )
        mid = ns[1]
        for n in ns:
            rows.append(("n", run_one(*sources[n], n, T0, L0, tmp, args.threads, args.device, args.repeats)))
        for T in (T0 // 4, T0 // 2, T0 * 2):
            rows.append(("T", run_one(*sources[mid], mid, T, L0, tmp, args.threads, args.device, args.repeats)))
        for l in (16, 256):
            rows.append(("l", run_one(*sources[mid], mid, T0 // 2, l, tmp, args.threads, args.device, args.repeats)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"Command: `.venv/bin/python bench/bench_streaming.py{' --quick' if args.quick else ''}` "
        f"({args.threads} thread(s), device {rows[0][1]['device']}, d={D} uint8, K={K}, median of {args.repeats}, "
        f"load {load:.2f}, "
        f"total {time.time() - t_start:.0f} s)\n"
    )
    print("| varied | n | T | l | T·l·d | median time (s) | points/s | ns per T·l·d | chunks | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for what, r in rows:
        print(
            f"| {what} | {r['n']:,} | {r['T']:,} | {r['l']} | {r['work']:.2e} | {r['seconds']:.2f} | "
            f"{r['points_per_s']:,.0f} | {r['ns_per_elem']:.2f} | {r['chunks']} | {r['peak_rss_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
