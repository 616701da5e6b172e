"""Training losses for released labels: soft (noisy) label vectors, argmax labels, non-negative vectors, numbers.

Every loss takes the model's raw outputs and a float target, averages over the
batch, and is named after the paper that trains with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dpmix_core.training.names import LOSSES

__all__ = [
    "LOSSES",
    "clamp_renormalise",
    "kl_soft_labels",
    "cross_entropy_argmax",
    "tied_label_shares",
    "generalized_kl",
    "mse_loss",
    "get_loss",
]


def clamp_renormalise(target: torch.Tensor) -> torch.Tensor:
    """Noisy label rows -> probability vectors: negatives set to 0, each row divided by its sum.

    A row with no positive entry (sum 0 after clamping) becomes uniform, 1/K per class.
    """
    t = target.clamp_min(0)
    total = t.sum(dim=1, keepdim=True)
    uniform = torch.full_like(t, 1.0 / t.shape[1])
    return torch.where(total > 0, t / total.clamp_min(torch.finfo(t.dtype).tiny), uniform)


def kl_soft_labels(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KL(t || softmax(logits)) to noisy soft labels renormalised: t = clamp_renormalise(target).

    mean over rows of sum_k t_k (log t_k - log p_k), with 0 log 0 = 0. The
    entropy term makes the loss 0 at a perfect fit; its gradient is that of
    cross-entropy with the soft target t. The thesis (§4.1) trained with Keras' ``KLDivergence``, which
    does not renormalise: :func:`generalized_kl` has that loss's gradient.
    """
    t = clamp_renormalise(target)
    log_p = F.log_softmax(logits, dim=1)
    return (torch.xlogy(t, t) - t * log_p).sum(dim=1).mean()


def tied_label_shares(target: torch.Tensor) -> torch.Tensor:
    """(n, K) label rows -> each row's argmax as a distribution: 1 on a row's largest value, or 1/k on each of the
    k classes that share it (label-only Laplace's labels clamped to [0, 1] tie at 1; ``argmax`` alone would name
    the first of them, class 0 most often)."""
    tied = target == target.max(dim=1, keepdim=True).values
    return tied / tied.sum(dim=1, keepdim=True)


def cross_entropy_argmax(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on hard labels argmax(target) (thesis §4.2; DP-CDA Eq. 1); 1-D targets are class indices.

    A row whose largest value k classes share targets each of them with 1/k (:func:`tied_label_shares`): argmax
    alone would teach class 0 wherever labels tie. A batch without a tie is the plain cross-entropy on argmax
    labels, as before.
    """
    if target.ndim != 2:
        return F.cross_entropy(logits, target.long())
    shares = tied_label_shares(target)
    if bool((shares.amax(dim=1) == 1).all()):  # no row ties
        return F.cross_entropy(logits, target.argmax(dim=1))
    return -(shares * F.log_softmax(logits.float(), dim=1)).sum(dim=1).mean()


def generalized_kl(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Generalized KL for non-negative vectors (DPFMix App. D): sum_k y_k log(y_k / p_k) - y_k + p_k.

    y = max(target, 0) is *not* renormalised (a Poisson-mixed label sums to
    |batch|/m, not 1); p = softmax(logits). Mean over rows; 0 log 0 = 0.
    Equals KL when y sums to 1. Its gradient in the logits, S p - y with S = sum y, is also that of Keras'
    ``KLDivergence`` (sum y log(y / p), y not renormalised: the thesis §4.1 loss); the two differ by 1 - S per row.
    """
    y = target.clamp_min(0)
    log_p = F.log_softmax(logits, dim=1)
    return (torch.xlogy(y, y) - y * log_p - y + log_p.exp()).sum(dim=1).mean()


def mse_loss(outputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error to regression labels (the class as a number 0..K-1), outputs (B, 1)."""
    return F.mse_loss(outputs.reshape(target.shape), target)


_LOSSES = {"kl": kl_soft_labels, "ce": cross_entropy_argmax, "gkl": generalized_kl, "mse": mse_loss}


def get_loss(name: str):
    """The loss function by name: kl, ce, gkl or mse."""
    try:
        return _LOSSES[name]
    except KeyError:
        raise ValueError(f"Unknown loss {name!r}. Choose one of: {', '.join(LOSSES)}.") from None
