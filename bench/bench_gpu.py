"""GPU benchmark of the mixing engine (issue #16): checks on the device first, then timings with CUDA sync.

    python bench/bench_gpu.py --data-dir DIR [--repeats 7] [--stream-points 10000000]

Needs a CUDA device (exits with one line otherwise). On full MNIST (n = 60,000, d = 784, K = 10):

1. **Ceilings**: a device-to-device copy of 2 GiB (bytes read + written per second).
2. **Checks** (fail loudly, before any timing): the device sampler's rows are duplicate-free and in
   range, every record's inclusion count is within 6 standard deviations of T*l/n, and the gather-sum
   on the GPU matches a float64 CPU reference of the same indices (relative error < 1e-5); the same
   seed gives the same release twice.
3. **Whole mechanism calls** (numpy arrays out, as a caller gets them) for DPMix, class-centric and
   Poisson mixing at T = 60,000, l = 256, index sampling on the device and on the host: median of
   ``--repeats`` after a warm-up, ``torch.cuda.synchronize`` before each clock read.
4. **Phases** of the DPMix call, each timed alone with CUDA events: table upload, index sampling,
   gather-sum (``embedding_bag``), noise, device-to-host copy.
5. **ScatterNet features** (J = 2, L = 8, kymatio) of all 70,000 MNIST images on the GPU, no cache.
6. **Streaming**: ``synthesize_streaming`` of ``--stream-points`` DPMix points (l = 256) from the
   MNIST images as a ``.npy`` memmap to a release folder on local disk (skipped, with the reason,
   when the disk lacks room for T*(d+K) float32 values).

Prints a markdown table per section; ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIGMA = 0.0711  # thesis §4.1 noise level; the value does not change the speed


def load_mnist(data_dir: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(data_dir) / "mnist.npz"
    if not path.is_file():
        sys.exit(f"bench_gpu: {path} not found (pass --data-dir with the keras mnist.npz).")
    with np.load(path, allow_pickle=False) as data:
        x, y = data["x_train"], data["y_train"]
    return np.ascontiguousarray(x.reshape(len(x), -1)), y.astype(np.int64)


def timed(fn, repeats: int) -> list[float]:
    import torch

    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def event_ms(fn, repeats: int) -> float:
    """Median milliseconds of ``fn`` between two CUDA events (after one warm-up)."""
    import torch

    fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def copy_bandwidth() -> float:
    import torch

    src = torch.empty(1 << 29, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = event_ms(lambda: dst.copy_(src), 10)
    return 2 * src.numel() * 4 / (ms / 1e3) / 1e12  # TB/s, read + write


def checks(x: np.ndarray, y: np.ndarray) -> dict:
    """Sampler validity, inclusion-count law, gather-sum accuracy, reproducibility: raise on failure."""
    import torch
    import torch.nn.functional as F

    from dpmix_core import mechanisms as M
    from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch, sample_poisson_batches_torch
    from dpmix_core.mechanisms.engine import device_table
    from dpmix_core.privacy.release import MixingRelease

    dev = torch.device("cuda")
    n, T, l = len(x), 60000, 256
    g = torch.Generator(device=dev).manual_seed(7)
    idx = sample_mixture_indices_torch(n=n, mix_degree=l, num_points=T, generator=g)
    assert idx.shape == (T, l) and idx.device.type == "cuda"
    assert int(idx.min()) >= 0 and int(idx.max()) < n, "index out of range"
    assert bool((idx[:, 1:] > idx[:, :-1]).all()), "a row repeats a record or is unsorted"
    counts = torch.bincount(idx.reshape(-1), minlength=n).double().cpu().numpy()
    mean, sd = T * l / n, np.sqrt(T * (l / n) * (1 - l / n))
    worst = float(np.max(np.abs(counts - mean)) / sd)
    assert worst < 6.0, f"an inclusion count is {worst:.1f} sd from T*l/n"
    g2 = torch.Generator(device=dev).manual_seed(8)
    pidx, poff = sample_poisson_batches_torch(n=n, rate=l / n, num_points=T, generator=g2)
    sizes = (poff[1:] - poff[:-1]).double()
    assert abs(float(sizes.mean()) - l) < 6 * np.sqrt(l / T), "Poisson batch sizes do not average m"
    table = device_table(x, y, 1.0, np.float32, 10, dev)
    rows = idx[:2048]
    sums = F.embedding_bag(rows, table, mode="sum").double().cpu().numpy()
    ref_table = np.concatenate([x.astype(np.float64), np.eye(10)[y]], axis=1)
    ref = ref_table[rows.cpu().numpy()].sum(axis=1)
    rel = float(np.linalg.norm(sums - ref) / np.linalg.norm(ref))
    assert rel < 1e-5, f"gather-sum relative error {rel:.2e}"
    release = MixingRelease.dpmix(n=n, l=l, T=4096, sigma_x=SIGMA, sigma_y=SIGMA, dx=x.shape[1], dy=10)
    a = M.dpmix(x, y, num_classes=10, release=release, seed=3, device="cuda")
    b = M.dpmix(x, y, num_classes=10, release=release, seed=3, device="cuda")
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y), "same seed, different release"
    assert np.isfinite(a.x).all() and np.isfinite(a.y).all()
    # the released means, noise removed in expectation: the average pixel of the data set
    gap = abs(float(a.x.mean()) - float(x.mean() / 255.0))
    assert gap < 1e-3, f"released mean off the data's mean by {gap:.2e}"
    return {"max_inclusion_sd": worst, "gather_rel_err": rel, "poisson_mean_batch": float(sizes.mean())}


def mechanism_calls(x: np.ndarray, y: np.ndarray, repeats: int, T: int, l: int) -> list[dict]:
    from dpmix_core import mechanisms as M
    from dpmix_core.privacy.release import MixingRelease

    n = len(x)
    sizes = tuple(int(c) for c in np.bincount(y, minlength=10))
    cases = {
        "dpmix": (M.dpmix, MixingRelease.dpmix(n=n, l=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA, dx=784, dy=10)),
        "class-centric": (
            M.class_centric_mix,
            MixingRelease.class_centric(class_sizes=sizes, l=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA, dx=784, dy=10),
        ),
        "poisson": (M.poisson_mix, MixingRelease.poisson(n=n, m=l, T=T, sigma_x=SIGMA, sigma_y=SIGMA)),
    }
    rows = []
    for name, (fn, release) in cases.items():
        for sampling in ("device", "host"):
            times = timed(
                lambda fn=fn, release=release, sampling=sampling: fn(
                    x, y, num_classes=10, release=release, seed=1, device="cuda", index_sampling=sampling
                ),
                repeats,
            )
            rows.append({"mechanism": name, "sampling": sampling, "T": T, "l": l, "times_s": times})
    return rows


def resident(x: np.ndarray, y: np.ndarray, repeats: int, T: int, l: int) -> dict:
    """DPMix through the engine into float32 tensors already on the GPU (no copy to the host): ms."""
    import torch

    from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch
    from dpmix_core.mechanisms.engine import Segment, chunk_rows_for, mix_and_perturb, seed_sequence

    dev = torch.device("cuda")
    n, d = x.shape

    def draw_device(gen, rows):
        return sample_mixture_indices_torch(n=n, mix_degree=l, num_points=rows, generator=gen), None

    def draw_host(rng, rows):
        raise AssertionError("index_sampling='device' never draws on the host")

    seg = Segment(0, T, 0, draw_host, None, draw_device)
    out = (torch.empty((T, d), device=dev), torch.empty((T, 10), device=dev))
    kw = dict(features=x, labels=y, label_value=1.0, dtype=np.float32, dx=d, dy=10, segments=[seg], num_points=T,
              denom_x=255.0 * l, denom_y=float(l), sigma_x=SIGMA, sigma_y=SIGMA, seed_seq=seed_sequence(1),
              chunk_rows=chunk_rows_for(l), device=dev, index_sampling="device")  # fmt: skip
    ms = [t * 1e3 for t in timed(lambda: mix_and_perturb(**kw, out=out), repeats)]
    xs = out[0].double()
    mean_gap = abs(float(xs.mean()) - float(x.mean() / 255.0))
    assert mean_gap < 1e-3 and bool(torch.isfinite(xs).all()), "resident release is off"
    return {"times_ms": ms, "median_ms": statistics.median(ms)}


def phases(x: np.ndarray, y: np.ndarray, repeats: int, T: int, l: int) -> dict:
    """DPMix at (T, l), each phase alone: milliseconds (median of CUDA-event timings)."""
    import torch
    import torch.nn.functional as F

    from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch
    from dpmix_core.mechanisms.engine import NOISE_TILE, device_table

    dev = torch.device("cuda")
    out: dict = {}
    out["upload_table_ms"] = event_ms(lambda: device_table(x, y, 1.0, np.float32, 10, dev), repeats)
    table = device_table(x, y, 1.0, np.float32, 10, dev)
    g = torch.Generator(device=dev).manual_seed(1)
    out["sample_indices_ms"] = event_ms(
        lambda: sample_mixture_indices_torch(n=len(x), mix_degree=l, num_points=T, generator=g), repeats
    )
    idx = sample_mixture_indices_torch(n=len(x), mix_degree=l, num_points=T, generator=g)
    out["gather_sum_ms"] = event_ms(lambda: F.embedding_bag(idx, table, mode="sum"), repeats)
    noise = torch.empty((T, 794), device=dev)

    def per_tile() -> None:
        for i in range(0, T, NOISE_TILE):
            gen = torch.Generator(device=dev)
            gen.manual_seed(i)
            noise[i : i + NOISE_TILE].normal_(generator=gen)

    out["noise_per_tile_generators_ms"] = event_ms(per_tile, repeats)
    out["noise_one_generator_ms"] = event_ms(lambda: noise.normal_(generator=g), repeats)
    host = np.empty((T, 794), dtype=np.float32)
    pinned = torch.empty((T, 794), dtype=torch.float32).pin_memory()
    out["d2h_pageable_ms"] = event_ms(lambda: torch.from_numpy(host).copy_(noise), repeats)
    out["d2h_pinned_ms"] = event_ms(lambda: pinned.copy_(noise), repeats)
    out["gather_bytes_gb"] = T * l * 794 * 4 / 1e9
    return out


def scattering(data_dir: str, repeats: int) -> dict:
    """ScatterNet (J=2, L=8) features of all 70,000 MNIST images on the GPU, no cache: seconds (median)."""
    from dpmix_core.data.scattering import scattering_features

    with np.load(Path(data_dir) / "mnist.npz", allow_pickle=False) as data:
        images = np.concatenate([data["x_train"], data["x_test"]])
    times = timed(lambda: scattering_features(images, device="cuda", cache=False), max(1, repeats // 3))
    return {"images": len(images), "times_s": times, "median_s": statistics.median(times)}


def streaming(x: np.ndarray, y: np.ndarray, points: int, l: int, tmp: Path) -> dict:
    from dpmix_core.synthesis.streaming import synthesize_streaming

    need = points * (784 + 10) * 4
    free = shutil.disk_usage(tmp).free
    if free < need * 1.1:
        return {"skipped": f"needs {need / 1e9:.1f} GB on {tmp}, {free / 1e9:.1f} GB free"}
    xs, ys = tmp / "x.npy", tmp / "y.npy"
    np.save(xs, x)
    np.save(ys, y.astype(np.uint8))
    src, lab = np.load(xs, mmap_mode="r"), np.load(ys, mmap_mode="r")
    out = tmp / "release"
    t0 = time.perf_counter()
    rel = synthesize_streaming(
        src, lab, num_classes=10, l=l, T=points, sigma_x=SIGMA, seed=0, out_path=out, device="cuda",
        overwrite=True, accountants=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return {"points": points, "l": l, "seconds": rel.seconds, "wall_s": wall, "chunks": rel.chunks,
            "points_per_min": points / wall * 60, "gb_written": need / 1e9}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--num-points", type=int, default=60000)
    p.add_argument("--mix-degree", type=int, default=256)
    p.add_argument("--stream-points", type=int, default=10_000_000, help="0 skips the streaming section")
    p.add_argument("--tmp", default=None)
    p.add_argument("--json", default=None, help="write all numbers here")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_gpu: no CUDA device here; run it on a GPU machine.")
    x, y = load_mnist(args.data_dir)
    res: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    res["copy_tb_s"] = copy_bandwidth()
    res["checks"] = checks(x, y)
    res["calls"] = mechanism_calls(x, y, args.repeats, args.num_points, args.mix_degree)
    res["resident"] = resident(x, y, args.repeats, args.num_points, args.mix_degree)
    res["phases"] = phases(x, y, args.repeats, args.num_points, args.mix_degree)
    res["scattering"] = scattering(args.data_dir, args.repeats)
    if args.stream_points:
        tmp = Path(tempfile.mkdtemp(prefix="dpmix_gpu_", dir=args.tmp))
        try:
            res["streaming"] = streaming(x, y, args.stream_points, args.mix_degree, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    print(f"{res['device']}, torch {res['torch']}; device-to-device copy {res['copy_tb_s']:.2f} TB/s")
    print(f"checks passed: {res['checks']}")
    print("\n| mechanism | index sampling | T | l | median (ms) | all (ms) |\n|---|---|---:|---:|---:|---|")
    for r in res["calls"]:
        ms = [t * 1e3 for t in r["times_s"]]
        print(
            f"| {r['mechanism']} | {r['sampling']} | {r['T']} | {r['l']} | {statistics.median(ms):.1f} | "
            f"{', '.join(f'{v:.0f}' for v in ms)} |"
        )
    r = res["resident"]
    print(f"| dpmix, release kept on the GPU (engine, out= device tensors) | device | {args.num_points} | "
          f"{args.mix_degree} | {r['median_ms']:.1f} | {', '.join(f'{v:.0f}' for v in r['times_ms'])} |")  # fmt: skip
    print("\n| DPMix phase | ms |\n|---|---:|")
    for k, v in res["phases"].items():
        print(f"| {k} | {v:.2f} |")
    sc = res["scattering"]
    print(f"\nScatterNet J=2, L=8 of {sc['images']} images on the GPU: {sc['median_s']:.2f} s (median)")
    if "streaming" in res:
        print(f"\nstreaming: {res['streaming']}")
    print("Command: python " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
