"""Training benchmarks: CPU throughput per model, quick presets end to end, quick-vs-full accuracy gap.

    .venv/bin/python bench/bench_training.py --data-dir ../shared/data

1. Training throughput (samples/s) of every model on in-memory tensors through
   the real loops (``fit`` / ``train_dpsgd``), evaluation throughput, and the
   ScatterNet feature extraction rate.
2. Each quick preset variant, run end to end (data, release, train, evaluate on
   the real MNIST test split): the slowest run of each of its series and
   whether it is <= 60 s. ``--all-runs`` times every run of every quick preset.
3. The accuracy gap between a quick variant and its full protocol
   (default: thesis §4.1, DPMix series, ``--gap-seeds`` seeds each).

Prints markdown tables; ``--json FILE`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dpmix_core.experiments.presets import PRESETS, QUICK_LIMIT_S, estimate_seconds, get_preset  # noqa: E402
from dpmix_core.experiments.runner import run_config  # noqa: E402

MODELS = [
    ("thesis-cnn", (28, 28)),
    ("dpfmix-cnn", (28, 28)),
    ("dpcda-cnn", (28, 28)),
    ("dpcda-cnn-gn", (28, 28)),
    ("scatter-linear", (81, 7, 7)),
    ("scatter-cnn", (81, 7, 7)),
    ("linear", (784,)),
]


def _built(model_name: str, shape, nchw: bool) -> torch.nn.Module:
    """The model as build_model places it on a CPU, or (``nchw``) in torch's default layout, as before 2026-11-26."""
    from dpmix_core.training.models import build_model

    model = build_model(model_name, input_shape=shape, num_outputs=10)
    return model.to(memory_format=torch.contiguous_format) if nchw else model  # type: ignore[call-overload]


def fit_sps(
    model_name: str,
    shape,
    *,
    batch_size: int,
    dp: bool,
    seconds: float,
    nchw: bool = False,
    precision: str = "fp32",
) -> float:
    """Training samples/s through the real loop (``fit`` or ``train_dpsgd``): median of 3 epochs of >= seconds/3.

    ``precision``: ``fit``'s training arithmetic (fp32 or bf16; DP-SGD trains in fp32)."""
    from dpmix_core.training.dpsgd import train_dpsgd
    from dpmix_core.training.losses import get_loss
    from dpmix_core.training.train import OptimSettings, fit

    d = int(np.prod(shape))
    g = torch.Generator().manual_seed(0)
    rates = []
    n = batch_size * 8
    while True:  # grow n until one epoch takes >= `seconds` / 3
        x = torch.rand(n, d, generator=g)
        y = torch.nn.functional.one_hot(torch.randint(0, 10, (n,), generator=g), 10).float()
        torch.manual_seed(0)
        model = _built(model_name, shape, nchw)
        settings = OptimSettings(epochs=1, batch_size=batch_size, precision="fp32" if dp else precision)
        if dp:
            _, res = train_dpsgd(
                model,
                get_loss("ce"),
                x,
                y,
                settings=settings,
                noise_multiplier=1.0,
                clip=1.0,
                generator=torch.Generator().manual_seed(1),
            )
        else:
            res = fit(model, get_loss("ce"), x, y, settings=settings, generator=torch.Generator().manual_seed(1))
        if res.seconds >= seconds / 3 or n >= 200_000:
            rates.append(res.samples_per_second)
            if len(rates) == 3:
                return statistics.median(rates)
        else:
            n *= 2


def eval_sps(model_name: str, shape, seconds: float, *, nchw: bool = False) -> float:
    """Evaluation (``predict``) samples/s over batches of 4096 rows for ``seconds``."""
    from dpmix_core.training.train import predict

    model = _built(model_name, shape, nchw)
    x = torch.rand(4096, int(np.prod(shape)))
    predict(model, x)
    t0, done = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        predict(model, x)
        done += len(x)
    return done / (time.perf_counter() - t0)


def bench_throughput(seconds: float, only: list[str] | None = None) -> list[dict]:
    rows = []
    for name, shape in MODELS:
        if only and name not in only:
            continue
        row = {"model": name}
        for bs in (32, 128):
            row[f"train_bs{bs}"] = fit_sps(name, shape, batch_size=bs, dp=False, seconds=seconds)
        row["dpsgd_bs128"] = (
            None if name == "dpcda-cnn" else fit_sps(name, shape, batch_size=128, dp=True, seconds=seconds)
        )
        row["eval"] = eval_sps(name, shape, seconds)
        rows.append(row)
        print(f"  {name}: {row}", file=sys.stderr, flush=True)
    return rows


def bench_scattering(n: int = 4096) -> float:
    from dpmix_core.data.scattering import scattering_features

    imgs = np.random.default_rng(0).integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    scattering_features(imgs[:256], cache=False)
    t0 = time.perf_counter()
    scattering_features(imgs, cache=False)
    return n / (time.perf_counter() - t0)


def _runs_to_time(spec, all_runs: bool):
    if all_runs:
        return spec.runs()
    picked, seen = [], set()
    for run in spec.runs():  # the most expensive run of each series
        if run.label in seen:
            continue
        same = [r for r in spec.runs() if r.label == run.label]
        picked.append(max(same, key=estimate_seconds))
        seen.add(run.label)
    return picked


def warm_scattering(data_dir: str) -> float:
    """Compute (and cache) the ScatterNet features of full MNIST, as the first scattering run does; seconds."""
    from dpmix_core.data import load_dataset
    from dpmix_core.data.scattering import scattering_features

    ds = load_dataset("mnist", data_dir=data_dir)
    t0 = time.perf_counter()
    scattering_features(ds.x_train)
    scattering_features(ds.x_test)
    return time.perf_counter() - t0


def quick_presets(names: list[str] | None) -> dict:
    """The quick presets to time: every one, or those named (a name that is no quick preset is refused)."""
    quick = {name: spec for name, spec in PRESETS.items() if spec.quick}
    if names is None:
        return quick
    unknown = [n for n in names if n not in quick]
    if unknown:
        raise SystemExit(f"not a quick preset: {', '.join(unknown)} (quick presets: {', '.join(quick)})")
    return {n: quick[n] for n in names}


def bench_presets(data_dir: str, all_runs: bool, presets: dict) -> list[dict]:
    rows = []
    for name, spec in presets.items():
        for run in _runs_to_time(spec, all_runs):
            run = run.replace(data_dir=data_dir, device="cpu")
            t0 = time.perf_counter()
            res = run_config(run)
            wall = time.perf_counter() - t0
            rows.append(
                {
                    "preset": name,
                    "series": run.label,
                    "axis_value": _axis_value(spec, run),
                    "seconds": wall,
                    "estimate": estimate_seconds(run),
                    "test_accuracy": res["test_accuracy"],
                    "test_mse": res["test_mse"],
                    "train_sps": res["train_samples_per_second"],
                    "ok": wall <= QUICK_LIMIT_S,
                }
            )
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def _axis_value(spec, run):
    from dpmix_core.experiments.spec import axis_value

    v = axis_value(run, spec.axis)
    return None if v is None else (str(v) if isinstance(v, float) and np.isinf(v) else v)


def bench_gap(data_dir: str, preset: str, seeds: int) -> dict:
    quick = get_preset(f"{preset}-quick")
    full = get_preset(preset)
    label = full.runs()[0].label
    out = {"preset": preset, "series": label, "quick": [], "full": [], "quick_seconds": [], "full_seconds": []}
    for variant, spec in (("quick", quick), ("full", full)):
        base = next(r for r in spec.runs() if r.label == label)
        for seed in range(seeds):
            res = run_config(base.replace(seed=seed, data_dir=data_dir, device="cpu"))
            out[variant].append(res["test_accuracy"])
            out[f"{variant}_seconds"].append(res["seconds"])
            print(
                f"  gap {variant} seed {seed}: {res['test_accuracy']:.4f} in {res['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    out["gap_points"] = 100 * (statistics.mean(out["full"]) - statistics.mean(out["quick"]))
    return out


def _fmt(x, digits=0):
    return "" if x is None else f"{x:,.{digits}f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("DPMIX_DATA_DIR"), help="folder with mnist.npz")
    p.add_argument("--seconds", type=float, default=3.0, help="timing window per throughput measurement")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--models", nargs="+", choices=[m for m, _ in MODELS], help="throughput of these models only")
    p.add_argument("--skip-presets", action="store_true")
    p.add_argument("--skip-gap", action="store_true")
    p.add_argument("--all-runs", action="store_true", help="time every run of every quick preset")
    p.add_argument("--presets", nargs="+", metavar="NAME", help="time these quick presets only (default: all)")
    p.add_argument("--gap-preset", default="thesis-4.1")
    p.add_argument("--gap-seeds", type=int, default=2)
    p.add_argument("--json", help="also write the numbers to this file")
    args = p.parse_args(argv)
    cmd = "python bench/bench_training.py " + " ".join(argv if argv is not None else sys.argv[1:])
    report: dict = {
        "command": cmd,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads",
    }
    print(f"Command: `{cmd}`  \nMachine: {report['machine']}\n")
    if not args.skip_throughput:
        rows = bench_throughput(args.seconds, args.models)
        report["throughput"] = rows
        report["scattering_images_per_second"] = bench_scattering()
        print("### Training throughput on CPU (samples/s, in-memory tensors)\n")
        print("| model | train, batch 32 | train, batch 128 | DP-SGD (Opacus), batch 128 | evaluate |")
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            dp = _fmt(r["dpsgd_bs128"]) if r["dpsgd_bs128"] is not None else "n/a (batch-norm)"
            print(f"| {r['model']} | {_fmt(r['train_bs32'])} | {_fmt(r['train_bs128'])} | {dp} | {_fmt(r['eval'])} |")
        print(
            f"\nScatterNet (J=2, L=8) features: {report['scattering_images_per_second']:,.0f} images/s "
            "(computed once per dataset, then cached)\n",
            flush=True,
        )
    if not args.skip_presets:
        if not args.data_dir:
            print("(presets skipped: pass --data-dir with mnist.npz)")
        else:
            presets = quick_presets(args.presets)
            scattering = any(r.features == "scattering" for spec in presets.values() for r in spec.runs())
            with tempfile.TemporaryDirectory() as cache:  # a fresh feature cache, warmed once and timed
                os.environ["DPMIX_CACHE_DIR"] = cache
                if scattering:
                    report["scattering_warmup_seconds"] = warm_scattering(args.data_dir)
                rows = bench_presets(args.data_dir, args.all_runs, presets)
            report["presets"] = rows
            print("### Quick presets end to end (data + release + train + evaluate on the real test split)\n")
            if scattering:
                print(
                    f"One-time ScatterNet features of full MNIST (70,000 images, then cached): "
                    f"{report['scattering_warmup_seconds']:.0f} s, not included below.\n"
                )
            print("| quick preset | series | axis value | seconds | estimate | <= 60 s | test accuracy |")
            print("|---|---|---:|---:|---:|:---:|---:|")
            for r in rows:
                acc = f"{r['test_accuracy']:.4f}" + (f" (MSE {r['test_mse']:.3f})" if r["test_mse"] is not None else "")
                print(
                    f"| {r['preset']} | {r['series']} | {r['axis_value']} | {r['seconds']:.1f} | "
                    f"{r['estimate']:.0f} | {'yes' if r['ok'] else 'NO'} | {acc} |"
                )
            print(flush=True)
    if not args.skip_gap:
        if not args.data_dir:
            print("(accuracy gap skipped: pass --data-dir with mnist.npz)")
        else:
            gap = bench_gap(args.data_dir, args.gap_preset, args.gap_seeds)
            report["gap"] = gap
            print(f"### Quick vs full protocol: {gap['preset']} ({gap['series']}), {args.gap_seeds} seeds\n")
            print("| variant | test accuracy (mean ± std) | per seed | seconds per run |")
            print("|---|---:|---|---:|")
            for v in ("quick", "full"):
                accs = gap[v]
                sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
                print(
                    f"| {v} | {statistics.mean(accs):.4f} ± {sd:.4f} | {', '.join(f'{a:.4f}' for a in accs)} | "
                    f"{statistics.mean(gap[v + '_seconds']):.0f} |"
                )
            print(
                f"\nGap (full - quick): {gap['gap_points']:+.2f} accuracy points "
                f"({'within' if abs(gap['gap_points']) <= 5 else 'NOT within'} 5)\n"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
