"""Training arithmetic: float32 (the default), or bfloat16 autocast where the hardware computes it natively.

``precision="bf16"`` runs each training step's forward pass under :func:`torch.autocast` with bfloat16
(convolutions and matrix products in bfloat16, weights, optimiser state, losses and evaluation in float32:
mixed precision, Micikevicius et al. 2018; bfloat16, Kalamkar et al. 2019). On a CPU with native bfloat16
(AVX512-BF16 or AMX on x86, the BF16 extension on Arm) it trains the DPFMix CNN 2.5-2.6x, the DP-CDA CNN
1.7-2.9x and the thesis CNN (batch 32) 1.1-1.3x faster than float32 (1 or 2 threads); on a CPU without it oneDNN
emulates bfloat16 and the same step is 1.4-2.4x (AVX-512 without BF16) to 6-8x (AVX2) *slower*
(``bench/bench_precision.py``, docs/PERFORMANCE.md), so such a CPU is refused with one line instead of running slower.

A bf16 run is a different measurement from a float32 one (its run key differs); its accuracy against float32
on the papers' protocols is in docs/PERFORMANCE.md. Evaluation always runs in float32.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Iterator
from pathlib import Path

import torch

from dpmix_core.training.names import PRECISIONS

__all__ = ["PRECISIONS", "cpu_has_native_bf16", "check_precision", "autocast"]

_X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo "flags" of x86 CPUs that compute bfloat16
_ARM_BF16_FEATURE = "bf16"  # /proc/cpuinfo "Features" of Arm CPUs with FEAT_BF16


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool | None:
    """True/False from the CPU's feature list (Linux ``/proc/cpuinfo``, or ``cpuinfo`` given); None: unknown here."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        if platform.system() != "Linux" or not path.is_file():
            return None
        try:
            cpuinfo = path.read_text(errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        words = set(value.split())
        if name.strip() == "flags":
            return any(flag in words for flag in _X86_BF16_FLAGS)
        if name.strip() == "Features":
            return _ARM_BF16_FEATURE in words
    return None


def check_precision(precision: str, device: torch.device, *, cpuinfo: str | None = None) -> None:
    """Refuse (one-line ValueError) a precision this device cannot compute faster than float32."""
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}. Choose one of: {', '.join(PRECISIONS)}.")
    if precision == "fp32":
        return
    if device.type == "cuda":
        if not torch.cuda.is_bf16_supported():
            raise ValueError("precision bf16: this GPU has no bfloat16 arithmetic; use --precision fp32.")
        return
    if device.type != "cpu":
        raise ValueError(f"precision bf16 is measured on CPUs and CUDA GPUs only, not {device.type}; use fp32.")
    native = cpu_has_native_bf16(cpuinfo)
    if native is None:
        raise ValueError(
            "precision bf16: cannot tell whether this CPU computes bfloat16 natively (its feature list is not "
            "readable here); without it bf16 trains up to 8x slower than fp32. Use --precision fp32."
        )
    if not native:
        raise ValueError(
            "precision bf16: this CPU has no native bfloat16 (no AVX512-BF16 or AMX); emulated, it trains 1.4-8x "
            "slower than fp32 (docs/PERFORMANCE.md). Use --precision fp32."
        )


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """The forward pass's arithmetic: bfloat16 autocast for "bf16", nothing changed for "fp32"."""
    if precision == "fp32":
        yield
        return
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        yield
