"""Exact index samplers for random mixing: l distinct records per point, or Poisson batches.

Without replacement (Lee et al. 2019 Alg. 1; DP-CDA Alg. 1) every synthetic
point averages ``l`` *distinct* records chosen uniformly: exactly what the
accountants assume. Drawing one ``rng.choice(n, l, replace=False)`` per point is
exact but slow in Python, so the rows are drawn in bulk:

1. draw every slot i.i.d. uniform on {0..n-1} and sort each row;
2. wherever a row repeats a value, redraw only the repeated slots i.i.d. uniform;
3. re-sort the rows that changed and repeat until no row has a repeat.

Why this is exactly uniform over l-subsets: each step is equivariant under any
relabelling pi of {0..n-1} (i.i.d. uniform draws are pi-invariant in law, and
which slots count as repeats depends only on the equality pattern), so the final
set's law is invariant under every permutation of the records. A law on sets of
a fixed size l that every permutation leaves unchanged is the uniform law on
l-subsets. Rows with l > n/2 are drawn as the complement of a uniform
(n - l)-subset, which keeps the number of rounds small.

Poisson sampling (DPFMix Alg. 1) includes every record independently with
probability q. Equivalently, and this is how it is drawn: the batch size is
B ~ Binomial(n, q) and, given B, the batch is a uniform B-subset.

Rows come back sorted ascending (the order inside a mixture never matters to a
mean, and sorted rows make the gather cache-friendlier). Index arrays are int32
when n + l < 2**31 - 1, else int64.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["sample_mixture_indices", "sample_poisson_batches", "index_dtype"]


def index_dtype(n: int, width: int = 0) -> type[np.integer]:
    """int32 when every index (and padding sentinel n..n+width) fits, else int64."""
    return np.int32 if n + width < 2**31 - 1 else np.int64


def sample_mixture_indices(*, n: int, mix_degree: int, num_points: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform l-subsets of {0..n-1}, one per row, without replacement within a row (Lee et al. 2019, Alg. 1 line 3).

    Returns an array of shape (num_points, mix_degree), each row sorted and
    duplicate-free. Rows are independent.

    Args:
        n: the number of records to draw from (indices 0..n-1), >= 1.
        mix_degree: l, the number of distinct indices per row, 1 <= l <= n.
        num_points: T, the number of rows, >= 0.
        rng: the numpy Generator that draws them.

    Returns:
        An int32 array (int64 when n + l reaches 2**31 - 1) of shape (num_points, mix_degree).

    Raises:
        ValueError: n, l or T not an integer in range, l > n, or ``rng`` not a numpy Generator.
    """
    _check_int("n", n, minimum=1)
    _check_int("mix_degree (l)", mix_degree, minimum=1)
    _check_int("num_points (T)", num_points, minimum=0)
    if mix_degree > n:
        raise ValueError(f"mix_degree (l) must not exceed n. Found l={mix_degree}, n={n}.")
    _check_rng(rng)
    sizes = np.full(num_points, mix_degree, dtype=np.int64)
    return _sorted_distinct_rows(rng, n, sizes, mix_degree)


def sample_poisson_batches(
    *, n: int, rate: float, num_points: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson batches: each record joins each point independently w.p. q (DPFMix Alg. 1 line 3).

    Drawn as B_t ~ Binomial(n, q), then a uniform B_t-subset (same law).
    Returns ``(indices, offsets)``: ``indices`` is the concatenation of the
    sorted batches and ``offsets`` (length num_points + 1, int64) marks where
    each batch starts, so batch t is ``indices[offsets[t]:offsets[t + 1]]``.

    Args:
        n: the number of records (indices 0..n-1), >= 1.
        rate: q, the inclusion probability of each record in each batch (a fraction in [0, 1], e.g. m/n).
        num_points: T, the number of batches, >= 0.
        rng: the numpy Generator that draws them.

    Returns:
        ``(indices, offsets)``: ``indices`` 1-D int32 (int64 for very large n), of total length
        offsets[-1] = sum of the batch sizes; ``offsets`` int64 of length num_points + 1, offsets[0] = 0.
        Batches may be empty.

    Raises:
        ValueError: n or T not an integer in range, ``rate`` not a number in [0, 1], or ``rng`` not a numpy
            Generator.
    """
    _check_int("n", n, minimum=1)
    _check_int("num_points (T)", num_points, minimum=0)
    if not isinstance(rate, numbers.Real) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate (q = m/n) must be in [0, 1]. Found {rate}.")
    _check_rng(rng)
    sizes = rng.binomial(n, float(rate), size=num_points).astype(np.int64)
    offsets = np.zeros(num_points + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    width = int(sizes.max()) if num_points else 0
    padded = _sorted_distinct_rows(rng, n, sizes, width)
    if width and bool((sizes == width).all()):
        return padded.reshape(-1), offsets
    return padded[padded < n], offsets


# --------------------------------------------------------------------------- internals


def _sorted_distinct_rows(rng: np.random.Generator, n: int, sizes: np.ndarray, width: int) -> np.ndarray:
    """(len(sizes), width) array: row t holds a sorted uniform sizes[t]-subset of {0..n-1},
    then distinct sentinels >= n (padding) up to ``width``."""
    rows = len(sizes)
    dtype = index_dtype(n, width)
    if rows == 0 or width == 0:
        return np.empty((rows, width), dtype=dtype)
    big = 2 * sizes > n
    if not big.any():
        return _redraw_rows(rng, n, sizes, width, dtype)
    out = np.empty((rows, width), dtype=dtype)
    small = ~big
    if small.any():
        w_small = int(sizes[small].max())
        part = np.empty((int(small.sum()), width), dtype=dtype)
        part[:, :w_small] = _redraw_rows(rng, n, sizes[small], w_small, dtype)
        part[:, w_small:] = n + np.arange(w_small, width, dtype=dtype)
        out[small] = part
    out[big] = _complement_rows(rng, n, sizes[big], width, dtype)
    return out


def _redraw_rows(rng: np.random.Generator, n: int, sizes: np.ndarray, width: int, dtype) -> np.ndarray:
    """Bulk i.i.d. draws, then redraw repeated slots until every row is duplicate-free (see module doc)."""
    rows = len(sizes)
    idx = rng.integers(0, n, size=(rows, width), dtype=dtype)
    padded = bool((sizes < width).any())
    if padded:
        pad = np.arange(width) >= sizes[:, None]
        idx[pad] = (n + np.broadcast_to(np.arange(width, dtype=dtype), (rows, width)))[pad]
    if width == 1:
        return idx
    idx.sort(axis=1)
    todo = np.flatnonzero((idx[:, 1:] == idx[:, :-1]).any(axis=1))
    while todo.size:
        sub = idx[todo]
        repeat = np.zeros(sub.shape, dtype=bool)
        np.equal(sub[:, 1:], sub[:, :-1], out=repeat[:, 1:])
        sub[repeat] = rng.integers(0, n, size=int(repeat.sum()), dtype=dtype)
        sub.sort(axis=1)
        idx[todo] = sub
        todo = todo[(sub[:, 1:] == sub[:, :-1]).any(axis=1)]
    return idx


def _complement_rows(rng: np.random.Generator, n: int, sizes: np.ndarray, width: int, dtype) -> np.ndarray:
    """Rows with size > n/2: the complement of a uniform (n - size)-subset (uniform size-subset)."""
    rows = len(sizes)
    out = np.empty((rows, width), dtype=dtype)
    out[...] = n + np.arange(width, dtype=dtype)
    step = max(1, (1 << 24) // n)  # bound the (rows, n) mask to ~16 MB
    for a in range(0, rows, step):
        s = sizes[a : a + step]
        excl_sizes = n - s
        w_excl = int(excl_sizes.max())
        keep = np.ones((len(s), n + max(w_excl, 1)), dtype=bool)
        if w_excl:
            excl = _redraw_rows(rng, n, excl_sizes, w_excl, dtype)
            np.put_along_axis(keep, excl.astype(np.intp), False, axis=1)
        keep = keep[:, :n]
        row_id, col = np.nonzero(keep)
        pos = np.arange(len(col)) - np.repeat(np.concatenate(([0], np.cumsum(s)[:-1])), s)
        out[a + row_id, pos] = col
    return out


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")


def _check_rng(rng: object) -> None:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator. Found {type(rng).__name__}.")
