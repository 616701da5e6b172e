"""The CUDA path on a real GPU (skipped without one: CI and laptops run the same logic on CPU tensors).

Run on a GPU machine with ``pytest tests/test_cuda.py``. Each test compares the GPU with an
independent CPU computation or checks a law the sampler must satisfy.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

from dpmix_core import mechanisms as M  # noqa: E402
from dpmix_core.mechanisms.device_sampling import (  # noqa: E402
    sample_mixture_indices_torch,
    sample_poisson_batches_torch,
)
from dpmix_core.mechanisms.engine import device_table  # noqa: E402
from dpmix_core.privacy.release import MixingRelease  # noqa: E402


def _data(n=3000, d=50, k=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, d), dtype=np.uint8), rng.integers(0, k, n)


@pytest.mark.parametrize("l", [1, 7, 64, 1600, 2999])
def test_device_subsets_are_distinct_sorted_and_in_range(l):
    g = torch.Generator(device="cuda").manual_seed(l)
    idx = sample_mixture_indices_torch(n=3000, mix_degree=l, num_points=500, generator=g)
    assert idx.device.type == "cuda" and idx.shape == (500, l)
    assert int(idx.min()) >= 0 and int(idx.max()) < 3000
    assert bool((idx[:, 1:] > idx[:, :-1]).all())


def test_device_subsets_include_every_record_at_rate_l_over_n():
    n, l, T = 1000, 50, 20000
    g = torch.Generator(device="cuda").manual_seed(0)
    counts = torch.bincount(sample_mixture_indices_torch(n=n, mix_degree=l, num_points=T, generator=g).reshape(-1))
    p = l / n
    z = (counts.double().cpu().numpy() - T * p) / np.sqrt(T * p * (1 - p))
    assert np.abs(z).max() < 5.5
    assert abs(z.mean()) < 0.2  # the counts sum to T*l exactly; their spread is binomial


def test_device_poisson_batches_have_binomial_sizes():
    n, q, T = 2000, 0.05, 5000
    g = torch.Generator(device="cuda").manual_seed(1)
    idx, off = sample_poisson_batches_torch(n=n, rate=q, num_points=T, generator=g)
    sizes = (off[1:] - off[:-1]).double().cpu().numpy()
    assert abs(sizes.mean() - n * q) < 5 * np.sqrt(n * q * (1 - q) / T)
    assert abs(sizes.var() / (n * q * (1 - q)) - 1) < 0.1
    assert int(idx.min()) >= 0 and int(idx.max()) < n


def test_gpu_gather_sum_matches_float64_reference():
    x, y = _data()
    table = device_table(x, y, 1.0, np.float32, 10, torch.device("cuda"))
    g = torch.Generator(device="cuda").manual_seed(2)
    idx = sample_mixture_indices_torch(n=len(x), mix_degree=64, num_points=300, generator=g)
    got = torch.nn.functional.embedding_bag(idx, table, mode="sum").double().cpu().numpy()
    ref = np.concatenate([x.astype(np.float64), np.eye(10)[y]], axis=1)[idx.cpu().numpy()].sum(axis=1)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("mechanism", ["dpmix", "class-centric", "poisson"])
def test_gpu_release_is_reproducible_and_unbiased(mechanism):
    x, y = _data(n=4000)
    n, T, l = len(x), 4096, 16
    if mechanism == "dpmix":
        fn, rel = M.dpmix, MixingRelease.dpmix(n=n, l=l, T=T, sigma_x=0.0, sigma_y=0.0, dx=50, dy=10)
    elif mechanism == "class-centric":
        sizes = tuple(int(c) for c in np.bincount(y, minlength=10))
        fn = M.class_centric_mix
        rel = MixingRelease.class_centric(class_sizes=sizes, l=l, T=T, sigma_x=0.0, sigma_y=0.0, dx=50, dy=10)
    else:
        fn, rel = M.poisson_mix, MixingRelease.poisson(n=n, m=l, T=T, sigma_x=0.0, sigma_y=0.0)
    a = fn(x, y, num_classes=10, release=rel, seed=5, device="cuda")
    b = fn(x, y, num_classes=10, release=rel, seed=5, device="cuda")
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert np.isfinite(a.x).all()
    cpu = fn(x, y, num_classes=10, release=rel, seed=5, device="cpu")
    # different draws of the same law: the column means agree within sampling error
    assert np.abs(a.x.mean(axis=0) - cpu.x.mean(axis=0)).max() < 0.05
