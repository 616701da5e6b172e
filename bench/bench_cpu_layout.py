"""What build_model's channels-last layout buys on a CPU, A/B in one process.

    .venv/bin/python bench/bench_cpu_layout.py --repeats 5

For each CNN and batch size, alternates "before" (torch's default NCHW layout) with "now" (the model as
:func:`build_model` places it on a CPU), through bench_training.py's measurements (the real ``fit`` loop on random in-memory tensors), and prints the
median training samples/s of each, their ratio, and the evaluation samples/s (``predict``) with each layout.
Alternating makes the ratio robust to a machine whose speed drifts (shared cloud cores); the absolute numbers are
only as steady as the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from bench_training import eval_sps, fit_sps  # noqa: E402  (bench/ is on sys.path when a script runs)

CASES = [("thesis-cnn", 32), ("thesis-cnn", 128), ("dpfmix-cnn", 256), ("dpcda-cnn", 128)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="alternations per case (median reported)")
    ap.add_argument("--seconds", type=float, default=3.0, help="timing window per measurement")
    args = ap.parse_args()
    print(
        f"Command: `python bench/bench_cpu_layout.py --repeats {args.repeats} --seconds {args.seconds}`; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads\n"
    )
    print("| model | batch | train before | train now | ratio | evaluate before | evaluate now | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, bs in CASES:
        train: dict[bool, list[float]] = {False: [], True: []}
        evals: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for now in (False, True):
                train[now].append(fit_sps(name, (28, 28), batch_size=bs, dp=False, seconds=args.seconds, nchw=not now))
                evals[now].append(eval_sps(name, (28, 28), args.seconds, nchw=not now))
        t0, t1 = statistics.median(train[False]), statistics.median(train[True])
        e0, e1 = statistics.median(evals[False]), statistics.median(evals[True])
        print(
            f"| {name} | {bs} | {t0:,.0f} | {t1:,.0f} | {t1 / t0:.2f} | {e0:,.0f} | {e1:,.0f} | {e1 / e0:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
