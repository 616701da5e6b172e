"""What build_model's channels-last layout buys on a CPU, A/B in one process.

    .venv/bin/python bench/bench_cpu_layout.py --repeats 5

For each CNN and batch size, alternates "before" (torch's default NCHW layout) with "now" (the model as
:func:`build_model` places it on a CPU), through the real ``fit`` loop on random in-memory tensors, and prints the
median training samples/s of each, their ratio, and the evaluation samples/s (``predict``) with each layout.
Alternating makes the ratio robust to a machine whose speed drifts (shared cloud cores); the absolute numbers are
only as steady as the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import dpmix_core.training.train as T  # noqa: E402
from dpmix_core.training.losses import get_loss  # noqa: E402
from dpmix_core.training.models import build_model  # noqa: E402

CASES = [("thesis-cnn", 32), ("thesis-cnn", 128), ("dpfmix-cnn", 256), ("dpcda-cnn", 128)]


def _model(name: str, now: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(name, input_shape=(28, 28), num_outputs=10)
    return model if now else model.to(memory_format=torch.contiguous_format)  # type: ignore[call-overload]


def _train_sps(name: str, batch_size: int, now: bool, n: int) -> float:
    model = _model(name, now)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 784, generator=g)
    y = torch.nn.functional.one_hot(torch.randint(0, 10, (n,), generator=g), 10).float()
    settings = T.OptimSettings(epochs=1, batch_size=batch_size)
    return T.fit(
        model, get_loss("ce"), x, y, settings=settings, generator=torch.Generator().manual_seed(1)
    ).samples_per_second


def _eval_sps(name: str, now: bool, n: int = 4096) -> float:
    model = _model(name, now)
    x = torch.rand(n, 784)
    T.predict(model, x[:256])
    t0 = time.perf_counter()
    T.predict(model, x)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="alternations per case (median reported)")
    ap.add_argument("--n", type=int, default=3072, help="training rows per measurement (one epoch)")
    args = ap.parse_args()
    print(
        f"Command: `python bench/bench_cpu_layout.py --repeats {args.repeats}`; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads\n"
    )
    print("| model | batch | train before | train now | ratio | evaluate before | evaluate now | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, bs in CASES:
        train: dict[bool, list[float]] = {False: [], True: []}
        evals: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for now in (False, True):
                train[now].append(_train_sps(name, bs, now, args.n))
                evals[now].append(_eval_sps(name, now))
        t0, t1 = statistics.median(train[False]), statistics.median(train[True])
        e0, e1 = statistics.median(evals[False]), statistics.median(evals[True])
        print(
            f"| {name} | {bs} | {t0:,.0f} | {t1:,.0f} | {t1 / t0:.2f} | {e0:,.0f} | {e1:,.0f} | {e1 / e0:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
