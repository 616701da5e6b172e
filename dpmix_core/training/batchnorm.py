"""BatchNorm statistics and the release/test shift: a diagnostic, outside every paper's protocol.

A model with BatchNorm trained on a noisy release keeps running means and variances of *noisy* inputs
(DP-CDA at ℓ = 4: per-pixel noise σ ≈ 0.3 on 784 pixels, noise norm ≈ 8.5, against a clipped signal of norm
≤ 1). At test time the clean inputs are normalised with those statistics, the activations shrink, and the
model can predict one class for almost every clean test row although it learned the task (it scores on noisy
inputs what it scores on its noisy validation split).

:func:`recalibrate_batchnorm` re-estimates the statistics on a set of *unlabelled* inputs (AdaBN: Li et al.
2016, "Revisiting Batch Normalization For Practical Domain Adaptation", arXiv:1603.04779; Schneider et al.
2020, NeurIPS, "Improving robustness against common corruptions by covariate shift adaptation"). On the test
inputs it is transductive: it uses the test images (never their labels), so the accuracy it gives is a
diagnostic of the shift, never the run's result. It touches no private record and costs no privacy.
The sentence a run shows is :func:`dpmix_core.training.collapse.shift_note` (no torch there).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["has_batchnorm", "recalibrate_batchnorm"]


def has_batchnorm(model: nn.Module) -> bool:
    """True when ``model`` has a BatchNorm layer that tracks running statistics."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1000) -> nn.Module:
    """A copy of ``model`` in eval mode whose BatchNorm statistics are the averages over ``x`` (AdaBN).

    torch's ``update_bn`` (the SWA utility) does the pass: running statistics reset, then the cumulative
    average of the batch statistics over ``x`` in batches of ``batch_size``, the model in training mode as it
    was trained (dropout on; the DP-CDA CNN's BatchNorm layers come before its dropout). A last batch of one
    row, which has no variance, is folded into the one before. The weights are not changed and ``model``
    itself is left as it was.

    Args:
        model: a trained model taking ``(n, d)`` rows.
        x: unlabelled rows ``(n, d)`` on the model's device, at least 2.
        batch_size: rows per forward pass (at least 2: a batch variance needs two rows).

    Raises:
        ValueError: fewer than 2 rows, or a batch size below 2.
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2. Found {batch_size}.")
    if x.shape[0] < 2:
        raise ValueError(f"recalibrating BatchNorm needs at least 2 rows. Found {x.shape[0]}.")
    batches = list(x.split(batch_size))
    if len(batches) > 1 and batches[-1].shape[0] < 2:
        batches[-2:] = [torch.cat(batches[-2:])]
    out = copy.deepcopy(model)
    torch.optim.swa_utils.update_bn(batches, out)
    return out.eval()
