"""Exact index samplers in torch, so the indices are drawn where the data lives (CPU or GPU).

Same laws as :mod:`dpmix_core.mechanisms.sampling` (the numpy samplers), drawn with a
``torch.Generator`` on the tensor's device, with no host round trip per point:

* without replacement: every slot i.i.d. uniform on {0..n-1}, rows sorted, then only
  the repeated slots redrawn (and the changed rows re-sorted) until no row repeats a
  value. Each step is equivariant under relabelling the records, so the final set is a
  uniform l-subset (the argument in :mod:`.sampling`). Rows with l > n/2 are drawn as
  the complement of a uniform (n - l)-subset. Rows come back sorted ascending.
* Poisson (DPFMix Alg. 1): every record joins every point independently with
  probability q, drawn literally as Bernoulli membership ``rand(rows, n) < q`` in
  blocks of rows (about ``MEMBERSHIP_ELEMENTS`` draws at a time), returned as
  ``embedding_bag`` input: concatenated sorted batches and their start offsets.

torch is imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["MEMBERSHIP_ELEMENTS", "sample_mixture_indices_torch", "sample_poisson_batches_torch"]

MEMBERSHIP_ELEMENTS = 1 << 25  # Bernoulli draws per block (128 MB of float32 on the device)
_COMPLEMENT_ELEMENTS = 1 << 24  # (rows, n) mask entries per block for l > n/2


def sample_mixture_indices_torch(
    *, n: int, mix_degree: int, num_points: int, generator: torch.Generator
) -> torch.Tensor:
    """(num_points, mix_degree) int64 tensor on the generator's device: uniform l-subsets of {0..n-1}, rows sorted.

    Args:
        n: the number of records to draw from (indices 0..n-1), >= 1.
        mix_degree: l, the number of distinct indices per row, 1 <= l <= n.
        num_points: T, the number of rows, >= 0.
        generator: the ``torch.Generator`` that draws them; its device is where the tensor lives.

    Returns:
        An int64 tensor of shape (num_points, mix_degree), rows independent, sorted ascending, duplicate-free.

    Raises:
        ValueError: n, l or T not an integer in range, or l > n.
    """
    import torch

    _check_int("n", n, 1)
    _check_int("mix_degree (l)", mix_degree, 1)
    _check_int("num_points (T)", num_points, 0)
    if mix_degree > n:
        raise ValueError(f"mix_degree (l) must not exceed n. Found l={mix_degree}, n={n}.")
    device = generator.device
    if num_points == 0:
        return torch.empty((0, mix_degree), dtype=torch.int64, device=device)
    if 2 * mix_degree <= n:
        return _redraw_rows(n, mix_degree, num_points, generator)
    return _complement_rows(n, mix_degree, num_points, generator)


def sample_poisson_batches_torch(
    *, n: int, rate: float, num_points: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Poisson batches by Bernoulli(q) membership: ``(indices, offsets)`` int64 on the generator's device.

    ``indices`` concatenates the sorted batches; ``offsets`` (length num_points + 1) marks where
    each starts, so batch t is ``indices[offsets[t]:offsets[t + 1]]``.

    Args:
        n: the number of records (indices 0..n-1), >= 1.
        rate: q, the inclusion probability of each record in each batch (a fraction in [0, 1], e.g. m/n).
        num_points: T, the number of batches, >= 0.
        generator: the ``torch.Generator`` that draws them; its device is where the tensors live.

    Returns:
        ``(indices, offsets)``, both int64 tensors on the generator's device: ``indices`` 1-D of length
        offsets[-1]; ``offsets`` of length num_points + 1, offsets[0] = 0. Batches may be empty.

    Raises:
        ValueError: n or T not an integer in range, or ``rate`` not a number in [0, 1].
    """
    import torch

    _check_int("n", n, 1)
    _check_int("num_points (T)", num_points, 0)
    if not isinstance(rate, numbers.Real) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate (q = m/n) must be in [0, 1]. Found {rate}.")
    device = generator.device
    step = max(1, MEMBERSHIP_ELEMENTS // n)
    parts, sizes = [], []
    for a in range(0, num_points, step):
        rows = min(step, num_points - a)
        member = torch.rand((rows, n), generator=generator, device=device) < float(rate)
        sizes.append(member.sum(dim=1))
        parts.append(member.nonzero()[:, 1])  # row-major: batch by batch, each ascending
    offsets = torch.zeros(num_points + 1, dtype=torch.int64, device=device)
    if num_points:
        torch.cumsum(torch.cat(sizes), dim=0, out=offsets[1:])
    indices = torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64, device=device)
    return indices, offsets


def _redraw_rows(n: int, width: int, rows: int, generator: torch.Generator) -> torch.Tensor:
    """i.i.d. draws, then redraw repeated slots until every row is duplicate-free (rows sorted)."""
    import torch

    device = generator.device
    idx = torch.randint(0, n, (rows, width), generator=generator, device=device).sort(dim=1).values
    if width == 1:
        return idx
    todo = torch.nonzero((idx[:, 1:] == idx[:, :-1]).any(dim=1)).squeeze(1)
    while todo.numel():
        sub = idx[todo]
        repeat = torch.zeros_like(sub, dtype=torch.bool)
        repeat[:, 1:] = sub[:, 1:] == sub[:, :-1]
        count = int(repeat.sum())
        sub[repeat] = torch.randint(0, n, (count,), generator=generator, device=device)
        sub = sub.sort(dim=1).values
        idx[todo] = sub
        todo = todo[(sub[:, 1:] == sub[:, :-1]).any(dim=1)]
    return idx


def _complement_rows(n: int, width: int, rows: int, generator: torch.Generator) -> torch.Tensor:
    """Rows with width > n/2: the records outside a uniform (n - width)-subset, ascending."""
    import torch

    device = generator.device
    out = torch.empty((rows, width), dtype=torch.int64, device=device)
    step = max(1, _COMPLEMENT_ELEMENTS // n)
    for a in range(0, rows, step):
        r = min(step, rows - a)
        keep = torch.ones((r, n), dtype=torch.bool, device=device)
        if width < n:
            excluded = _redraw_rows(n, n - width, r, generator)
            keep.scatter_(1, excluded, False)
        out[a : a + r] = keep.nonzero()[:, 1].view(r, width)
    return out


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
