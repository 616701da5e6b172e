"""What bfloat16 training (``precision="bf16"``) buys on this CPU, A/B in one process.

    .venv/bin/python bench/bench_precision.py --repeats 5
    ONEDNN_MAX_CPU_ISA=AVX512_CORE .venv/bin/python bench/bench_precision.py   # as a CPU without AVX512-BF16
    ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/bench_precision.py          # as a CPU with AVX2 only

For each model at its paper's batch size, alternates float32 with bfloat16 autocast through bench_training.py's
measurement (the real ``fit`` loop on random in-memory tensors, the model as :func:`build_model` places it) and
prints the median training samples/s of each and their ratio. ``ONEDNN_MAX_CPU_ISA`` caps the instructions oneDNN
may use, so one machine shows what a CPU without native bfloat16 would do (the reason
:func:`~dpmix_core.training.precision.check_precision` refuses bf16 there). Alternating makes the ratio robust to a
machine whose speed drifts; the absolute numbers are only as steady as the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from bench_training import fit_sps  # noqa: E402  (bench/ is on sys.path when a script runs)

from dpmix_core.training.precision import cpu_has_native_bf16  # noqa: E402

# (model, input shape, batch size of the paper protocol that trains it)
CASES = [
    ("thesis-cnn", (28, 28), 32),  # thesis §4.1 / §4.2 (Keras' batch 32)
    ("dpfmix-cnn", (28, 28), 256),  # DPFMix Table 1 (App. E.3)
    ("dpcda-cnn", (28, 28), 128),  # DP-CDA Table 2
    ("dpcda-cnn-gn", (28, 28), 128),
    ("scatter-linear", (81, 7, 7), 256),  # DPFMix Table 3 (App. E.3)
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="alternations per case (median reported)")
    ap.add_argument("--seconds", type=float, default=3.0, help="timing window per measurement")
    args = ap.parse_args()
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "(not set)")
    print(
        f"Command: `ONEDNN_MAX_CPU_ISA={isa} python bench/bench_precision.py --repeats {args.repeats} --seconds "
        f"{args.seconds}`; torch {torch.__version__}, {torch.get_num_threads()} threads, native bfloat16 in the "
        f"CPU's feature list: {cpu_has_native_bf16()}\n"
    )
    print("| model | batch | fp32 samples/s | bf16 samples/s | bf16 / fp32 |")
    print("|---|---:|---:|---:|---:|")
    for name, shape, bs in CASES:
        rates: dict[str, list[float]] = {"fp32": [], "bf16": []}
        for _ in range(args.repeats):
            for precision in rates:
                rates[precision].append(
                    fit_sps(name, shape, batch_size=bs, dp=False, seconds=args.seconds, precision=precision)
                )
        f32, b16 = statistics.median(rates["fp32"]), statistics.median(rates["bf16"])
        print(f"| {name} | {bs} | {f32:,.0f} | {b16:,.0f} | {b16 / f32:.2f} |", flush=True)


if __name__ == "__main__":
    main()
