"""The GPU path of the mixing engine, tested on CPU tensors (issue #16): device samplers and device draws.

Laws: every row of the without-replacement sampler is a duplicate-free sorted l-subset and every record's
inclusion frequency is l/n; Poisson batches have Binomial(n, m/n) sizes and inclusion m/n. Equality:
for fixed indices the device path gives the host path's output.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from dpmix_core.mechanisms import (
    class_centric_mix,
    dpmix,
    poisson_mix,
)
from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch, sample_poisson_batches_torch
from dpmix_core.mechanisms.engine import NOISE_TILE, Segment, mix_and_perturb, seed_sequence
from dpmix_core.mechanisms.sampling import sample_mixture_indices
from dpmix_core.privacy.release import MixingRelease


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("n, l", [(1000, 16), (60, 25), (60, 45), (10, 10), (7, 1)])
def test_wor_rows_are_sorted_distinct_and_uniform_in_inclusion(n, l):
    T = 4000
    idx = sample_mixture_indices_torch(n=n, mix_degree=l, num_points=T, generator=_gen(n + l)).numpy()
    assert idx.shape == (T, l) and idx.dtype == np.int64
    assert idx.min() >= 0 and idx.max() < n
    assert (np.diff(idx, axis=1) > 0).all()  # sorted and no duplicate within a point
    counts = np.bincount(idx.ravel(), minlength=n)
    expected = T * l / n
    sd = np.sqrt(T * (l / n) * (1 - l / n)) + 1e-9
    assert np.abs(counts - expected).max() < 5 * sd + 1e-9


def test_wor_is_uniform_over_subsets():
    n, l, T = 6, 3, 20000
    idx = sample_mixture_indices_torch(n=n, mix_degree=l, num_points=T, generator=_gen(1)).numpy()
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n), l))}
    counts = np.bincount([subsets[tuple(r)] for r in idx], minlength=len(subsets))
    expected = T / len(subsets)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 45  # 19 degrees of freedom: P(chi2 > 45) < 1e-3


def test_poisson_batches_have_binomial_sizes_and_inclusion_q():
    n, m, T = 200, 10, 5000
    q = m / n
    idx, off = sample_poisson_batches_torch(n=n, rate=q, num_points=T, generator=_gen(3))
    idx, off = idx.numpy(), off.numpy()
    assert off[0] == 0 and off[-1] == len(idx) and off.shape == (T + 1,)
    sizes = np.diff(off)
    assert abs(sizes.mean() - m) < 4 * np.sqrt(m * (1 - q) / T)
    assert abs(sizes.var() - m * (1 - q)) < 0.1 * m
    for t in range(0, T, 97):
        batch = idx[off[t] : off[t + 1]]
        assert (np.diff(batch) > 0).all()
    counts = np.bincount(idx, minlength=n)
    assert np.abs(counts - T * q).max() < 5 * np.sqrt(T * q * (1 - q))


def test_poisson_blocks_cover_every_row(monkeypatch):
    import dpmix_core.mechanisms.device_sampling as ds

    monkeypatch.setattr(ds, "MEMBERSHIP_ELEMENTS", 50)  # 2 rows per block of n = 25
    idx, off = sample_poisson_batches_torch(n=25, rate=0.5, num_points=7, generator=_gen(4))
    assert off.shape == (8,) and int(off[-1]) == idx.numel()


def test_device_samplers_check_arguments():
    with pytest.raises(ValueError, match="must not exceed n"):
        sample_mixture_indices_torch(n=3, mix_degree=4, num_points=1, generator=_gen(0))
    with pytest.raises(ValueError, match="rate"):
        sample_poisson_batches_torch(n=3, rate=1.5, num_points=1, generator=_gen(0))
    assert sample_mixture_indices_torch(n=3, mix_degree=2, num_points=0, generator=_gen(0)).shape == (0, 2)


@pytest.mark.parametrize("sigma", [0.0, 0.3])
@pytest.mark.parametrize("poisson", [False, True])
def test_device_path_equals_host_path_for_fixed_indices(sigma, poisson):
    rng = np.random.default_rng(0)
    n, d, k, l, T = 300, 12, 4, 5, 3 * NOISE_TILE + 17
    X = rng.integers(0, 256, (n, d), dtype=np.uint8)
    y = rng.integers(0, k, n)
    if poisson:
        sizes = rng.integers(0, 2 * l, T)
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        idx = np.concatenate([np.sort(rng.choice(n, s, replace=False)) for s in sizes]).astype(np.int64)
    else:
        offsets = None
        idx = np.sort(np.stack([rng.choice(n, l, replace=False) for _ in range(T)]), axis=1).astype(np.int64)

    def rows_of(a: int, c: int):
        if offsets is None:
            return idx[a : a + c], None
        lo, hi = offsets[a], offsets[a + c]
        return idx[lo:hi], offsets[a : a + c + 1] - lo

    cursor = {"host": 0, "device": 0}

    def draw(_rng, c):
        a = cursor["host"]
        cursor["host"] += c
        return rows_of(a, c)

    def draw_device(_gen, c):
        a = cursor["device"]
        cursor["device"] += c
        i, o = rows_of(a, c)
        return torch.from_numpy(i), None if o is None else torch.from_numpy(o)

    seg = Segment(0, T, 0, draw, draw_device=draw_device)
    common = {
        "features": X,
        "labels": y,
        "label_value": 1.0,
        "dtype": np.float32,
        "dx": d,
        "dy": k,
        "segments": [seg],
        "num_points": T,
        "denom_x": 255.0 * l,
        "denom_y": float(l),
        "sigma_x": sigma,
        "sigma_y": sigma,
        "chunk_rows": NOISE_TILE,
        "device": torch.device("cpu"),
    }
    hx, hy = mix_and_perturb(**common, seed_seq=seed_sequence(7), index_sampling="host")
    dx_, dy_ = mix_and_perturb(**common, seed_seq=seed_sequence(7), index_sampling="device")
    np.testing.assert_allclose(dx_, hx, rtol=0, atol=1e-6)
    np.testing.assert_allclose(dy_, hy, rtol=0, atol=1e-6)
    if sigma == 0 and offsets is None:
        np.testing.assert_allclose(hx, X[idx].astype(np.float64).sum(1) / (255 * l), atol=1e-6)


def _eye(n: int, k: int):
    return (np.eye(n) * 255).astype(np.uint8), np.arange(n) % k


def test_dpmix_device_sampling_law_and_reproducibility():
    X, y = _eye(40, 4)
    p = MixingRelease.dpmix(n=40, l=6, T=3000, sigma_x=0.0, sigma_y=0.0, dx=40, dy=4)
    out = dpmix(X, y, num_classes=4, release=p, seed=5, index_sampling="device")
    hits = np.round(out.x * 6)
    assert set(np.unique(hits)) <= {0.0, 1.0} and (hits.sum(1) == 6).all()
    assert np.abs(hits.sum(0) - 3000 * 6 / 40).max() < 5 * np.sqrt(3000 * 6 / 40)
    again = dpmix(X, y, num_classes=4, release=p, seed=5, index_sampling="device")
    np.testing.assert_array_equal(out.x, again.x)
    noisy = MixingRelease.dpmix(n=40, l=6, T=500, sigma_x=0.1, sigma_y=0.1, dx=40, dy=4)
    a = dpmix(X, y, num_classes=4, release=noisy, seed=1, index_sampling="device")
    b = dpmix(X, y, num_classes=4, release=noisy, seed=2, index_sampling="device")
    assert not np.array_equal(a.x, b.x)


def test_poisson_mix_device_sampling_law():
    n, m, T = 50, 5, 4000
    X, y = _eye(n, 2)
    p = MixingRelease.poisson(n=n, m=m, T=T, sigma_x=0.0, sigma_y=0.0)
    out = poisson_mix(X, y, num_classes=2, release=p, seed=3, index_sampling="device")
    hits = np.round(out.x * m)
    assert set(np.unique(hits)) <= {0.0, 1.0}
    sizes = hits.sum(1)
    assert abs(sizes.mean() - m) < 0.2 and abs(sizes.var() - m * (1 - m / n)) < 0.6
    np.testing.assert_allclose(out.y.sum(1) * m, sizes, atol=1e-5)


def test_class_centric_device_sampling_stays_in_class():
    X, y = _eye(60, 3)
    p = MixingRelease.class_centric(
        class_sizes=(20, 20, 20), l=5, T=900, sigma_x=0.0, sigma_y=0.0, dx=60, dy=3, preprocessing="unit"
    )
    out = class_centric_mix(X, y, num_classes=3, release=p, seed=4, index_sampling="device")
    hits = np.round(out.x * 5)
    assert set(np.unique(hits)) <= {0.0, 1.0} and (hits.sum(1) == 5).all()
    cls = np.repeat(np.arange(3), 300)
    chosen_class = np.where(hits > 0)[1] % 3
    assert (chosen_class == np.repeat(cls, 5)).all()


def test_index_sampling_is_checked():
    X, y = _eye(10, 2)
    p = MixingRelease.dpmix(n=10, l=2, T=10, sigma_x=0.0, sigma_y=0.0, dx=10, dy=2)
    with pytest.raises(ValueError, match="index_sampling"):
        dpmix(X, y, num_classes=2, release=p, index_sampling="gpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_labels", [True, False])
def test_device_table_is_features_then_scaled_one_hot_labels(dtype, with_labels):
    from dpmix_core.mechanisms.engine import device_table

    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, (50, 9), dtype=np.uint8)
    y = rng.integers(0, 4, 50) if with_labels else None
    table = device_table(X, y, 0.5, dtype, 4, torch.device("cpu"))
    expected = X.astype(dtype)
    if with_labels:
        expected = np.concatenate([expected, 0.5 * np.eye(4, dtype=dtype)[y]], axis=1)
    assert table.dtype == torch.from_numpy(expected).dtype
    np.testing.assert_array_equal(table.numpy(), expected)


def test_release_into_device_tensors_equals_the_numpy_release():
    """out= torch tensors on the device (a release kept on the GPU; here CPU tensors): same values, no new arrays."""
    rng = np.random.default_rng(3)
    X, y = rng.integers(0, 256, (300, 12), dtype=np.uint8), rng.integers(0, 4, 300)
    T, l = 3 * NOISE_TILE, 9

    def draw(r, c):
        return sample_mixture_indices(n=300, mix_degree=l, num_points=c, rng=r), None

    common = {
        "features": X, "labels": y, "label_value": 1.0, "dtype": np.float32, "dx": 12, "dy": 4,
        "segments": [Segment(0, T, 0, draw)], "num_points": T, "denom_x": 255.0 * l, "denom_y": float(l),
        "sigma_x": 0.3, "sigma_y": 0.2, "chunk_rows": NOISE_TILE, "device": torch.device("cpu"),
    }  # fmt: skip
    hx, hy = mix_and_perturb(**common, seed_seq=seed_sequence(4))
    tx, ty = torch.full((T, 12), float("nan")), torch.full((T, 4), float("nan"))
    rx, ry = mix_and_perturb(**common, seed_seq=seed_sequence(4), out=(tx, ty))
    assert rx is tx and ry is ty
    np.testing.assert_array_equal(tx.numpy(), hx)
    np.testing.assert_array_equal(ty.numpy(), hy)
    for bad in [(torch.empty((T, 12), dtype=torch.float64), ty), (torch.empty((T, 11)), ty), (tx, hy), (hx, ty)]:
        with pytest.raises(ValueError, match="out must be"):
            mix_and_perturb(**common, seed_seq=seed_sequence(4), out=bad)
