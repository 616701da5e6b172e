"""dpmix_core.mechanisms: exact sampling, unbiasedness, noise levels, determinism, validation, release descriptions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dpmix_core.mechanisms import (
    GaussianRelease,
    LaplaceLabelRelease,
    LaplaceRelease,
    SyntheticData,
    analyze_gauss_pca,
    class_centric_mix,
    dp_histogram,
    dp_mean,
    dp_variance,
    dpmix,
    gaussian_delta,
    gaussian_sigma,
    hard_label_agreement,
    laplace_label_release,
    local_perturbation,
    pca_sensitivity,
    poisson_mix,
    sample_mixture_indices,
    sample_poisson_batches,
    symmetric_gaussian_noise,
    variance_sensitivity,
)
from dpmix_core.privacy.accountants import MixingSetting, applicable_accountants, get_accountant
from dpmix_core.privacy.release import Adjacency, DataBounds, Mechanism, MixingRelease, Sampling, class_centric_release

WOR_ACCOUNTANTS = {"lee2019", "dpcda", "rdp-wor"}
POISSON_ACCOUNTANTS = {"gdp-clt", "rdp-poisson", "pld-poisson"}


def _data(n=60, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, d), dtype=np.uint8)
    y = np.arange(n) % k  # every class present, sizes n/k
    return X, y


def _dpmix_release(X, k, *, l, T, sigma_x, sigma_y, clamp_negative=False) -> MixingRelease:
    """The DPMix release for data X with K classes."""
    return MixingRelease.dpmix(
        n=len(X), l=l, T=T, sigma_x=sigma_x, sigma_y=sigma_y, dx=X.shape[1], dy=k, clamp_negative=clamp_negative
    )


def _cc_release(X, y, k, *, l, T, sigma_x, sigma_y, **kw) -> MixingRelease:
    """The class-centric release for data (X, y) with K classes (class sizes from y)."""
    sizes = tuple(int(c) for c in np.bincount(y, minlength=k))
    return MixingRelease.class_centric(
        class_sizes=sizes, l=l, T=T, sigma_x=sigma_x, sigma_y=sigma_y, dx=X.shape[1], dy=k, **kw
    )


def _poisson_release(X, *, m, T, sigma_x, sigma_y, **kw) -> MixingRelease:
    """The Poisson release for data X (its row count stated as the public n)."""
    return MixingRelease.poisson(n=len(X), m=m, T=T, sigma_x=sigma_x, sigma_y=sigma_y, **kw)


def _names(release) -> set[str]:
    return {acc.name for acc in applicable_accountants(release)}


# --------------------------------------------------------------------------- sampling


@given(
    n=st.integers(1, 40),
    frac=st.floats(0.0, 1.0),
    rows=st.integers(0, 25),
    seed=st.integers(0, 2**32 - 1),
)
def test_without_replacement_rows_are_distinct_sorted_subsets(n, frac, rows, seed):
    l = max(1, round(frac * n))  # covers l > n/2 (complement path) and l = n
    idx = sample_mixture_indices(n=n, mix_degree=l, num_points=rows, rng=np.random.default_rng(seed))
    assert idx.shape == (rows, l)
    assert ((idx >= 0) & (idx < n)).all()
    assert (np.diff(idx, axis=1) > 0).all()  # sorted and no duplicate index within a mixture


@pytest.mark.parametrize("n,l", [(6, 3), (6, 4), (7, 2)])  # (6, 4) uses the complement path
def test_without_replacement_is_uniform_over_subsets(n, l):
    rows = 30000
    idx = sample_mixture_indices(n=n, mix_degree=l, num_points=rows, rng=np.random.default_rng(1))
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n), l))}
    codes = np.array([subsets[tuple(r)] for r in idx.tolist()])
    counts = np.bincount(codes, minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > 1e-3


def test_without_replacement_marginals_are_uniform():
    n, l, rows = 50, 20, 5000
    idx = sample_mixture_indices(n=n, mix_degree=l, num_points=rows, rng=np.random.default_rng(2))
    freq = np.bincount(idx.ravel(), minlength=n) / rows
    assert np.allclose(freq, l / n, atol=0.04)  # inclusion probability l/n per record


def test_poisson_batches_inclusion_rate_and_sizes():
    n, q, rows = 200, 0.05, 6000
    idx, off = sample_poisson_batches(n=n, rate=q, num_points=rows, rng=np.random.default_rng(3))
    sizes = np.diff(off)
    assert np.isclose(sizes.mean(), n * q, rtol=0.03)
    assert np.isclose(sizes.var(), n * q * (1 - q), rtol=0.1)  # Binomial(n, q)
    freq = np.bincount(idx, minlength=n) / rows
    assert np.allclose(freq, q, atol=0.012)
    member = np.zeros((rows, n), dtype=bool)
    member[np.repeat(np.arange(rows), sizes), idx] = True
    assert np.isclose((member[:, 0] & member[:, 1]).mean(), q * q, atol=0.004)  # independent inclusion


@given(
    n=st.integers(1, 30),
    q=st.sampled_from([0.0, 0.1, 0.5, 0.8, 1.0]),
    rows=st.integers(0, 20),
    seed=st.integers(0, 2**32 - 1),
)
def test_poisson_batches_structure(n, q, rows, seed):
    idx, off = sample_poisson_batches(n=n, rate=q, num_points=rows, rng=np.random.default_rng(seed))
    assert off.shape == (rows + 1,) and off[0] == 0 and off[-1] == len(idx)
    assert (np.diff(off) >= 0).all()
    for t in range(rows):
        batch = idx[off[t] : off[t + 1]]
        assert ((batch >= 0) & (batch < n)).all() and (np.diff(batch) > 0).all()
    if q == 1.0 and rows:
        assert (np.diff(off) == n).all()


def test_sampler_validation():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="l=5, n=4"):
        sample_mixture_indices(n=4, mix_degree=5, num_points=1, rng=rng)
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        sample_mixture_indices(n=4, mix_degree=2, num_points=1, rng=0)
    with pytest.raises(ValueError, match="1.5"):
        sample_poisson_batches(n=4, rate=1.5, num_points=1, rng=rng)


# --------------------------------------------------------------------------- DPMix


def test_dpmix_noise_free_mixtures_are_unbiased():
    X, y = _data(n=40, d=5, k=4)
    out = dpmix(X, y, num_classes=4, release=_dpmix_release(X, 4, l=8, T=20000, sigma_x=0, sigma_y=0), seed=0)
    assert out.x.dtype == np.float32 and out.x.shape == (20000, 5) and out.y.shape == (20000, 4)
    assert np.allclose(out.x.mean(axis=0), X.mean(axis=0) / 255, atol=0.01)
    assert np.allclose(out.y.mean(axis=0), np.bincount(y, minlength=4) / 40, atol=0.01)
    assert np.allclose(out.y.sum(axis=1), 1.0)  # soft labels: a mixture of one-hot vectors
    assert (out.x >= 0).all() and (out.x <= 1).all()


def test_dpmix_with_l_equal_n_is_the_exact_mean():
    X, y = _data(n=30, d=4, k=3)
    out = dpmix(X, y, num_classes=3, release=_dpmix_release(X, 3, l=30, T=5, sigma_x=0, sigma_y=0), seed=0)
    exact = (X.astype(np.float64).sum(axis=0) / (255 * 30)).astype(np.float32)
    assert (out.x == exact).all()  # integer sums, one correctly rounded division


def test_dpmix_points_average_l_distinct_records():
    n, l = 24, 7
    X = (255 * np.eye(n)).astype(np.uint8)  # record i is the i-th unit vector: x_t * l shows who was mixed
    y = np.arange(n) % 2
    out = dpmix(X, y, num_classes=2, release=_dpmix_release(X, 2, l=l, T=3000, sigma_x=0, sigma_y=0), seed=0)
    counts = out.x * l
    assert np.allclose(counts, np.round(counts), atol=1e-5)
    assert set(np.unique(np.round(counts))) == {0.0, 1.0}  # a record is used at most once per point
    assert (np.round(counts).sum(axis=1) == l).all()
    assert np.allclose(np.round(counts).mean(axis=0), l / n, atol=0.04)


def test_poisson_points_include_records_independently():
    n, m = 30, 6
    X = np.eye(n)
    y = np.zeros(n, dtype=np.int64)
    release = _poisson_release(X, m=m, T=4000, sigma_x=0, sigma_y=0)
    out = poisson_mix(X, y, num_classes=1, release=release, seed=0)
    member = np.round(out.x * m)
    assert np.allclose(out.x * m, member, atol=1e-5) and set(np.unique(member)) <= {0.0, 1.0}
    assert np.allclose(member.mean(axis=0), m / n, atol=0.03)  # inclusion rate m/n


def test_many_chunks_and_threads_give_the_same_semantics(monkeypatch):
    import torch

    from dpmix_core.mechanisms import engine as _engine

    monkeypatch.setattr(_engine, "INDICES_PER_CHUNK", 1)  # one noise tile (256 points) per chunk
    y = np.repeat(np.arange(3), [12, 15, 20])
    X = (10 * y)[:, None].repeat(3, axis=1).astype(np.float64)
    release = _cc_release(X, y, 3, l=5, T=3 * 600, sigma_x=0, sigma_y=0, preprocessing="unit")
    out = class_centric_mix(X, y, num_classes=3, release=release, feature_range=(0, 100), seed=0)
    cls = np.repeat(np.arange(3), 600)
    assert np.array_equal(out.y, np.eye(3, dtype=np.float32)[cls]) and np.allclose(out.x, (10 * cls / 100)[:, None])
    Xd, yd = _data()
    noisy = _dpmix_release(Xd, 3, l=5, T=1000, sigma_x=1.0, sigma_y=1.0)
    a = dpmix(Xd, yd, num_classes=3, release=noisy, seed=3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        b = dpmix(Xd, yd, num_classes=3, release=noisy, seed=3)
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)  # thread count does not change the stream
    assert np.isclose(a.x.std(), 1.0, rtol=0.03)


def test_dpmix_noise_std_matches_sigma():
    X = np.zeros((50, 40), dtype=np.uint8)
    y = np.zeros(50, dtype=np.int64)
    release = _dpmix_release(X, 10, l=4, T=3000, sigma_x=0.3, sigma_y=0.1)
    out = dpmix(X, y, num_classes=10, release=release, seed=5)
    assert np.isclose(out.x.std(), 0.3, rtol=0.02) and abs(out.x.mean()) < 0.01
    noise_y = out.y - np.eye(10, dtype=np.float32)[0]
    assert np.isclose(noise_y.std(), 0.1, rtol=0.03) and abs(noise_y.mean()) < 0.005


def test_dpmix_is_deterministic_under_a_seed():
    X, y = _data(n=300, d=7, k=3)
    params = _dpmix_release(X, 3, l=20, T=700, sigma_x=0.5, sigma_y=0.5)  # several noise tiles
    a = dpmix(X, y, num_classes=3, release=params, seed=123)
    b = dpmix(X, y, num_classes=3, release=params, seed=123)
    c = dpmix(X, y, num_classes=3, release=params, seed=124)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.x, c.x)
    ss = np.random.SeedSequence(9)
    assert np.array_equal(
        dpmix(X, y, num_classes=3, release=params, seed=ss).x, dpmix(X, y, num_classes=3, release=params, seed=ss).x
    )
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    assert np.array_equal(
        dpmix(X, y, num_classes=3, release=params, seed=g1).x, dpmix(X, y, num_classes=3, release=params, seed=g2).x
    )


def test_dpmix_release_is_what_the_accountants_assume():
    X, y = _data(n=60, d=6, k=3)
    release = _dpmix_release(X, 3, l=10, T=50, sigma_x=0.2, sigma_y=0.3)
    out = dpmix(X, y, num_classes=3, release=release, seed=0)
    r = out.release
    assert (r.n, r.mix_degree, r.num_points, r.sigma_x, r.sigma_y) == (60, 10, 50, 0.2, 0.3)
    assert r.sampling is Sampling.WITHOUT_REPLACEMENT and r.adjacency is Adjacency.REPLACE_ONE
    assert r.bounds == DataBounds.unit_box(6, 3)
    assert r is release and r.mechanism is Mechanism.DPMIX
    assert _names(r) == WOR_ACCOUNTANTS
    setting = MixingSetting(n=60, l=10, T=50, sigma_x=0.2, sigma_y=0.3, dx=6, dy=3)
    lee = get_accountant("lee2019")
    assert lee.release_for(setting) == r  # one source of truth for epsilon
    assert lee.epsilon(r, 1e-5).epsilon == lee.epsilon(lee.release_for(setting), 1e-5).epsilon


def test_dpmix_on_clipped_records_averages_l_clipped_rows():
    """DPFMix App. E.3's DPMix ("If not specified, we set Cx = Cy = 1"): uniform mixing of clipped records."""
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 50, size=(100, 1)) * np.ones(6)  # one direction, every norm > Cx: every row clipped
    y = np.arange(100) % 2
    release = MixingRelease.dpmix(n=100, l=10, T=300, sigma_x=0, sigma_y=0, dx=6, dy=2, clip=(2.0, 0.5))
    out = dpmix(X, y, num_classes=2, release=release, seed=1)
    assert np.allclose(np.linalg.norm(out.x, axis=1), 2.0, rtol=1e-5)  # the mean of 10 rows of norm 2, one direction
    assert np.allclose(out.y.sum(axis=1), 0.5, rtol=1e-6)  # one-hot labels scaled to ||y|| <= Cy = 0.5
    r = out.release
    assert r.bounds == DataBounds.clipped(2.0, 0.5) and r.preprocessing == "clip"
    assert r.sampling is Sampling.WITHOUT_REPLACEMENT and r.mechanism is Mechanism.DPMIX
    assert _names(r) == WOR_ACCOUNTANTS
    assert any("clipped to ||x|| <= Cx=2" in note for note in out.notes)
    with pytest.raises(ValueError, match="negative"):
        MixingRelease.dpmix(n=100, l=10, T=300, sigma_x=0, sigma_y=0, dx=6, dy=2, clip=(1.0, 1.0), clamp_negative=True)


def test_rdp_wor_on_clipped_dpmix_uses_the_clipped_sensitivity():
    """Clipped to Cx = Cy = 1 a record moves a point by 2/l per part; in [0,1]^4 x [0,1]^4 by sqrt(4)/l = 2/l too:
    the two releases have one sensitivity, so the tight accountant must give them one epsilon (and [0,1]^784 more)."""
    acc = get_accountant("rdp-wor")
    kw = dict(n=6000, l=16, T=500, sigma_x=0.05, sigma_y=0.05)
    clipped = MixingRelease.dpmix(**kw, dx=784, dy=10, clip=(1.0, 1.0))
    same = MixingRelease.dpmix(**kw, dx=4, dy=4)
    wide = MixingRelease.dpmix(**kw, dx=784, dy=10)
    eps = [acc.epsilon(r, 1e-5).epsilon for r in (clipped, same, wide)]
    assert eps[0] == pytest.approx(eps[1], rel=1e-9) and eps[2] > 5 * eps[0]


def test_dpmix_clamp_negative_and_float_features():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 3, size=(40, 5))
    y = np.arange(40) % 2
    release = _dpmix_release(X, 2, l=5, T=200, sigma_x=0.5, sigma_y=0.5, clamp_negative=True)
    out = dpmix(X, y, num_classes=2, release=release, feature_range=(0.0, 2.0), seed=1)
    assert (out.x >= 0).all() and (out.y >= 0).all()
    assert any("post-processing" in note for note in out.notes)
    exact = dpmix(
        X, y, num_classes=2, release=_dpmix_release(X, 2, l=40, T=1, sigma_x=0, sigma_y=0),
        feature_range=(0.0, 2.0),
    )  # fmt: skip
    assert np.allclose(exact.x[0], (np.clip(X, 0, 2) / 2).mean(axis=0), atol=1e-6)


def test_local_perturbation_releases_single_records():
    X, y = _data(n=20, d=4, k=2)
    out = local_perturbation(X, y, num_classes=2, num_points=50, sigma_x=0, sigma_y=0, seed=3)
    rows = {tuple(np.round(r * 255).astype(int)) for r in out.x}
    assert rows <= {tuple(r) for r in X.astype(int)}
    assert out.release.mix_degree == 1 and out.y.max() == 1.0
    assert "local perturbation" in out.notes[0]


# --------------------------------------------------------------------------- class-centric


def test_class_centric_points_are_pure():
    y = np.repeat(np.arange(3), [12, 15, 20])
    X = (10 * y)[:, None].repeat(3, axis=1).astype(np.float64)  # feature value identifies the class
    release = _cc_release(X, y, 3, l=5, T=31, sigma_x=0, sigma_y=0, preprocessing="unit")
    out = class_centric_mix(X, y, num_classes=3, release=release, feature_range=(0, 100), seed=0)
    assert out.num_points == 30  # K * floor(T/K)
    cls = np.repeat(np.arange(3), 10)
    assert np.array_equal(out.y, np.eye(3, dtype=np.float32)[cls])  # exactly one-hot of one class
    assert np.allclose(out.x, (10 * cls / 100)[:, None])  # each point mixes records of its class only
    assert any("not a multiple of K" in note for note in out.notes)


def test_class_centric_zscore_clip_and_caveat():
    X, y = _data(n=90, d=8, k=3)
    release = _cc_release(X, y, 3, l=6, T=30, sigma_x=0, sigma_y=0, clip=0.5, preprocessing="zscore-private")
    out = class_centric_mix(X, y, num_classes=3, release=release, seed=0)
    assert (np.linalg.norm(out.x, axis=1) <= 0.5 + 1e-5).all()  # mean of vectors clipped to ||x|| <= c
    assert any("of X itself" in s for s in out.notes) and not out.release.covered
    assert out.release.caveats()[0].startswith("not covered: normalisation constants")
    result = get_accountant("dpcda").epsilon(out.release, 1e-5)
    assert not result.upper_bound and result.guarantee.startswith("not covered: normalisation constants")
    public_release = _cc_release(X, y, 3, l=6, T=30, sigma_x=0, sigma_y=0, clip=0.5, preprocessing="zscore")
    public = class_centric_mix(
        X, y, num_classes=3, release=public_release, mean=np.full(8, 127.5), std=np.full(8, 74.0), seed=0
    )
    assert not any("not covered" in s for s in public.notes + public.release.notes) and public.release.covered
    with pytest.raises(ValueError, match="needs public mean and std"):
        class_centric_mix(X, y, num_classes=3, release=public_release, seed=0)


def test_class_centric_hard_labels_and_determinism():
    X, y = _data(n=90, d=8, k=3)
    release = _cc_release(X, y, 3, l=6, T=300, sigma_x=1.0, sigma_y=1.0, hard_labels=True)
    a = class_centric_mix(X, y, num_classes=3, release=release, seed=7)
    b = class_centric_mix(X, y, num_classes=3, release=release, seed=7)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert set(np.unique(a.y)) == {0.0, 1.0} and (a.y.sum(axis=1) == 1).all()
    assert any("argmax" in s and f"about {100 * hard_label_agreement(1.0, 3):.0f} % of them" in s for s in a.notes)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 0.7071, 1.0, 3.0])
def test_hard_label_agreement_with_two_classes_is_the_closed_form(sigma):
    """K = 2: the label is right when sigma (Z_1 - Z_0) < 1, i.e. with probability Phi(1 / (sigma sqrt 2))."""
    assert hard_label_agreement(sigma, 2) == pytest.approx(stats.norm.cdf(1 / (sigma * math.sqrt(2))), abs=1e-9)


def test_hard_label_agreement_matches_monte_carlo_and_its_limits():
    """DP-CDA's Fashion-MNIST l = 1 release (sigma_y = 1.061, ten classes): about a third of its labels are right."""
    rng = np.random.default_rng(0)
    for sigma, k in ((1.061, 10), (0.563, 10), (0.3, 100)):
        noisy = sigma * rng.standard_normal((200_000, k))
        noisy[:, 0] += 1.0
        share = float((noisy.argmax(axis=1) == 0).mean())
        p = hard_label_agreement(sigma, k)
        assert abs(p - share) < 4 * math.sqrt(p * (1 - p) / 200_000)
    assert hard_label_agreement(1.061, 10) == pytest.approx(0.3229, abs=1e-4)
    assert hard_label_agreement(0.0, 10) == 1.0 and hard_label_agreement(1e-4, 10) == pytest.approx(1.0)
    assert hard_label_agreement(1e6, 10) == pytest.approx(0.1, abs=1e-5)


@given(st.floats(0.01, 50.0), st.floats(0.01, 50.0), st.integers(2, 200))
def test_hard_label_agreement_falls_with_noise_and_classes(s1, s2, k):
    lo, hi = sorted((s1, s2))
    p = hard_label_agreement(lo, k)
    assert 1 / k <= hard_label_agreement(hi, k) <= p + 1e-9 <= 1 + 1e-9
    assert hard_label_agreement(lo, k + 1) <= p + 1e-9


@pytest.mark.parametrize("bad", [(-0.1, 10), (math.nan, 10), (math.inf, 10), (1.0, 1), (1.0, 2.0), (True, 10)])
def test_hard_label_agreement_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="must be"):
        hard_label_agreement(*bad)


@pytest.mark.parametrize("preprocessing", ["zscore", "unit"])
def test_class_centric_release(preprocessing):
    X, y = _data(n=90, d=8, k=3)
    release = _cc_release(X, y, 3, l=6, T=30, sigma_x=0.4, sigma_y=0.5, preprocessing=preprocessing, clip=2.0)
    public = {"mean": np.full(8, 127.5), "std": np.full(8, 74.0)} if preprocessing == "zscore" else {}
    r = class_centric_mix(X, y, num_classes=3, release=release, seed=0, **public).release
    bounds = DataBounds.clipped_one_hot(2.0) if preprocessing == "zscore" else DataBounds.unit_box(8, 3)
    assert r is release and (r.n, r.num_points, r.class_sizes, r.bounds) == (90, 30, (30, 30, 30), bounds)
    view = r.accounting_view()
    assert view == class_centric_release(
        class_sizes=(30, 30, 30), mix_degree=6, num_points=30, sigma_x=0.4, sigma_y=0.5, bounds=bounds
    )
    # labels protected by default: 2*T_k points of a pool of N_min - 1 (see class_centric_release)
    assert (view.n, view.num_points) == (29, 20)
    assert (view.sampling, view.adjacency) == (Sampling.WITHOUT_REPLACEMENT, Adjacency.REPLACE_ONE)
    assert _names(r) == WOR_ACCOUNTANTS
    if preprocessing == "zscore":
        setting = MixingSetting(
            n=90, l=6, T=30, sigma_x=0.4, sigma_y=0.5, dx=8, dy=3, clip=2.0, class_sizes=(30, 30, 30)
        )
        assert get_accountant("dpcda").release_for(setting) == r


# --------------------------------------------------------------------------- Poisson


def test_poisson_mix_divides_the_sum_by_m():
    n, m = 400, 20
    X = np.full((n, 4), 0.1)  # ||x|| = 0.2 <= Cx: unclipped
    y = np.zeros(n, dtype=np.int64)
    release = _poisson_release(X, m=m, T=3000, sigma_x=0, sigma_y=0, clip_x=1.0, clip_y=0.5)
    out = poisson_mix(X, y, num_classes=2, release=release, seed=0)
    sizes = out.x[:, 0] * m / 0.1  # x_t = B_t * 0.1 / m
    assert np.allclose(sizes, np.round(sizes), atol=1e-4)
    assert np.isclose(sizes.mean(), m, rtol=0.03) and np.isclose(sizes.var(), m * (1 - m / n), rtol=0.1)
    assert np.allclose(out.y[:, 0], sizes * 0.5 / m, atol=1e-5) and (out.y[:, 1] == 0).all()


def test_poisson_mix_clips_rows():
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 50, size=(100, 1)) * np.ones(6)  # one direction, norms sqrt(6)..50*sqrt(6) > Cx
    y = np.arange(100) % 2
    release = _poisson_release(X, m=10, T=500, sigma_x=0, sigma_y=0, clip_x=2.0)
    out = poisson_mix(X, y, num_classes=2, release=release, seed=1)
    sizes = np.round(out.y.sum(axis=1) * 10)  # one-hot labels of norm 1: the label sum counts the batch
    assert np.allclose(np.linalg.norm(out.x, axis=1), 2.0 * sizes / 10, rtol=1e-5)  # every row clipped to 2


def test_poisson_release_and_accountants():
    X, y = _data(n=60)
    release = _poisson_release(X, m=8, T=40, sigma_x=0.7, sigma_y=0.9, clip_x=3.0, clip_y=0.5)
    out = poisson_mix(X, y, num_classes=3, release=release, seed=0)
    r = out.release
    assert (r.n, r.mix_degree, r.num_points, r.sigma_x, r.sigma_y) == (60, 8, 40, 0.7, 0.9)
    assert r.sampling is Sampling.POISSON and r.adjacency is Adjacency.ADD_REMOVE_ONE
    assert r.bounds == DataBounds.clipped(3.0, 0.5)
    assert _names(r) == POISSON_ACCOUNTANTS
    setting = MixingSetting(n=60, l=8, T=40, sigma_x=0.7, sigma_y=0.9, clip_x=3.0, clip_y=0.5)
    assert get_accountant("gdp-clt").release_for(setting) == r


# --------------------------------------------------------------------------- validation


def _mix(X=None, y=None, k=3, **kw):
    X0, y0 = _data()
    release = kw.pop("release", _dpmix_release(X0, 3, l=4, T=10, sigma_x=0.1, sigma_y=0.1))
    return dpmix(X0 if X is None else X, y0 if y is None else y, num_classes=k, release=release, **kw)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: _dpmix_release(_data()[0], 3, l=61, T=5, sigma_x=0.1, sigma_y=0.1), "l=61, n=60"),
        (lambda: _mix(release=_dpmix_release(_data(n=61)[0], 3, l=4, T=5, sigma_x=0.1, sigma_y=0.1)), "n=61.*60"),
        (lambda: _mix(release=_dpmix_release(_data(d=5)[0], 3, l=4, T=5, sigma_x=0.1, sigma_y=0.1)), "\\[0,1\\]\\^5"),
        (lambda: _dpmix_release(_data()[0], 3, l=4, T=5, sigma_x=-0.1, sigma_y=0.1), "sigma_x.*-0.1"),
        (lambda: _dpmix_release(_data()[0], 3, l=4, T=5, sigma_x=0.1, sigma_y=float("nan")), "sigma_y.*nan"),
        (lambda: _dpmix_release(_data()[0], 3, l=0, T=5, sigma_x=0.1, sigma_y=0.1), "l \\(mix degree\\).*0"),
        (lambda: _dpmix_release(_data()[0], 3, l=4, T=True, sigma_x=0.1, sigma_y=0.1), "T .*True"),
        (lambda: _mix(X=np.where(np.eye(60, 6) > 0, np.nan, 1.0), feature_range=(0, 1)), "NaN.*index \\(0, 0\\)"),
        (lambda: _mix(X=np.zeros(60, dtype=np.uint8)), "shape \\(60,\\)"),
        (lambda: _mix(X=np.zeros((60, 2, 2), dtype=np.uint8)), "flatten"),
        (lambda: _mix(y=np.zeros((60, 1), dtype=int)), "shape \\(60,\\)"),
        (lambda: _mix(y=np.zeros(59, dtype=int)), "Found shape \\(59,\\)"),
        (lambda: _mix(y=np.full(60, 3)), "0..2.*Found 3"),
        (lambda: _mix(y=np.full(60, 0.5)), "integer class labels. Found 0.5"),
        (lambda: _mix(X=np.zeros((60, 6))), "feature_range"),
        (lambda: _mix(feature_range=(1.0, 1.0)), "low < high"),
        (lambda: _mix(release=_poisson_release(_data()[0], m=4, T=5, sigma_x=0.1, sigma_y=0.1)), "dpmix MixingRelease"),
        (lambda: _mix(device="tpu"), "tpu"),
        (lambda: _mix(seed=-1), "seed.*-1"),
        (lambda: _cc_release(*_data(), 3, l=4, T=5, sigma_x=0.1, sigma_y=0.1, preprocessing="l2"), "'l2'"),
        (
            lambda: _cc_release(*_data(), 3, l=4, T=5, sigma_x=0.1, sigma_y=0.1, preprocessing="zscore", clip=0),
            "norm.*0",
        ),
        (lambda: _poisson_release(_data()[0], m=4, T=5, sigma_x=0.1, sigma_y=0.1, clip_y=-1), "norm.*-1"),
        (lambda: _poisson_release(_data()[0], m=70, T=5, sigma_x=1, sigma_y=1), "l=70, n=60"),
    ],
)
def test_validation_errors_name_the_bad_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_class_smaller_than_l_is_named():
    y = np.repeat(np.arange(3), [10, 10, 3])
    X = np.zeros((23, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="class 2 has 3 records, fewer than l=5"):
        _cc_release(X, y, 3, l=5, T=30, sigma_x=0.1, sigma_y=0.1)
    with pytest.raises(ValueError, match="class size must be a positive integer. Found 0"):
        _cc_release(X, y, 4, l=3, T=30, sigma_x=0.1, sigma_y=0.1)  # class 3 has no record
    with pytest.raises(ValueError, match="needs l <= N_min - 1 when labels are protected"):
        _cc_release(X, y, 3, l=3, T=30, sigma_x=0.1, sigma_y=0.1)  # the neighbour's class 2 has only 2 records
    other = _cc_release(X, np.repeat(np.arange(3), [9, 10, 4]), 3, l=2, T=30, sigma_x=0.1, sigma_y=0.1)
    with pytest.raises(ValueError, match="class sizes \\(9, 10, 4\\); the data's are \\(10, 10, 3\\)"):
        class_centric_mix(X, y, num_classes=3, release=other)
    zscore = _cc_release(X, y, 3, l=2, T=30, sigma_x=0.1, sigma_y=0.1, preprocessing="zscore")
    with pytest.raises(ValueError, match="mean must have shape \\(4,\\)"):
        class_centric_mix(X, y, num_classes=3, release=zscore, mean=np.zeros(3), std=np.ones(4))


def test_device_auto_and_unavailable_cuda():
    import torch

    X, y = _data()
    assert _mix(device="auto", seed=0).x.shape == (10, 6)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            _mix(device="cuda")


def test_synthetic_data_checks_its_arrays():
    X, y = _data()
    r = _dpmix_release(X, 3, l=2, T=3, sigma_x=1, sigma_y=1)
    with pytest.raises(ValueError, match="float32"):
        SyntheticData(np.zeros((3, 6)), np.zeros((3, 3), np.float32), r)
    with pytest.raises(ValueError, match="same number of rows"):
        SyntheticData(np.zeros((3, 6), np.float32), np.zeros((2, 3), np.float32), r)


# --------------------------------------------------------------------------- label-only Laplace


@pytest.mark.parametrize("task, sensitivity", [("classification", 2.0), ("regression", 9.0)])
def test_laplace_label_noise_scale(task, sensitivity):
    n, eps = 20000, 0.5
    X = np.random.default_rng(0).integers(0, 256, size=(n, 3), dtype=np.uint8)
    y = np.arange(n) % 10
    out = laplace_label_release(X, y, num_classes=10, epsilon=eps, task=task, seed=0)
    truth = np.eye(10)[y] if task == "classification" else y[:, None].astype(float)
    noise = out.y - truth
    scale = sensitivity / eps
    assert out.release == LaplaceLabelRelease(epsilon=eps, sensitivity=sensitivity, n=n, task=task)
    assert np.isclose(np.abs(noise).mean(), scale, rtol=0.03)  # E|Lap(b)| = b
    assert np.isclose(noise.std(), math.sqrt(2) * scale, rtol=0.05)
    assert np.array_equal(out.x, X.astype(np.float32))  # features released as they are
    assert any("NOT private" in s for s in out.notes)


def test_laplace_label_postprocessing():
    X, y = _data(n=500, k=10)
    reg = laplace_label_release(X, y, num_classes=10, epsilon=1.0, task="regression", postprocess=True, seed=1)
    assert reg.y.shape == (500, 1) and set(np.unique(reg.y)) <= set(range(10))
    cls = laplace_label_release(X, y, num_classes=10, epsilon=1.0, postprocess=True, seed=1)
    assert cls.y.min() >= 0 and cls.y.max() <= 1
    with pytest.raises(ValueError, match="'ranking'"):
        laplace_label_release(X, y, num_classes=10, epsilon=1.0, task="ranking")
    with pytest.raises(ValueError, match="epsilon.*0"):
        laplace_label_release(X, y, num_classes=10, epsilon=0)


# --------------------------------------------------------------------------- Analyze-Gauss PCA


def test_analyze_gauss_noise_is_symmetric_with_the_stated_std():
    E = symmetric_gaussian_noise(dim=300, sigma=0.7, rng=np.random.default_rng(0))
    assert np.array_equal(E, E.T)
    upper = E[np.triu_indices(300)]
    assert np.isclose(upper.std(), 0.7, rtol=0.02) and abs(upper.mean()) < 0.01


@given(
    a=st.lists(st.floats(-1, 1), min_size=5, max_size=5),
    b=st.lists(st.floats(-1, 1), min_size=5, max_size=5),
)
def test_analyze_gauss_sensitivity_bound(a, b):
    x, z = np.array(a), np.array(b)
    x, z = x / max(1.0, np.linalg.norm(x)), z / max(1.0, np.linalg.norm(z))
    E = np.outer(x, x) - np.outer(z, z)
    assert np.linalg.norm(E) <= math.sqrt(2) + 1e-12  # Frobenius
    assert np.linalg.norm(E[np.triu_indices(5)]) <= math.sqrt(2) + 1e-12  # the released upper triangle


def test_analyze_gauss_pca_release_and_recovery():
    n = 2000
    rng = np.random.default_rng(0)
    direction = np.ones(10) / math.sqrt(10)
    X = rng.normal(size=(n, 1)) * direction + 0.05 * rng.normal(size=(n, 10))
    res = analyze_gauss_pca(X, num_components=2, epsilon=0.5, delta=1e-5, seed=0)
    assert pca_sensitivity(n=n) == math.sqrt(2) / n
    assert math.isclose(res.release.sigma, math.sqrt(2) / n * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5)
    assert res.components.shape == (2, 10) and np.allclose(res.components @ res.components.T, np.eye(2), atol=1e-8)
    assert abs(res.components[0] @ direction) > 0.99
    assert np.array_equal(res.noisy_second_moment, res.noisy_second_moment.T)
    with pytest.raises(ValueError, match="analytic"):
        analyze_gauss_pca(X, num_components=2, epsilon=2.0, delta=1e-5)
    analytic = analyze_gauss_pca(X, num_components=1, epsilon=2.0, delta=1e-5, method="analytic", seed=0)
    assert analytic.release.method == "analytic"


# --------------------------------------------------------------------------- DP statistics


def test_dp_mean_laplace_and_gaussian_noise():
    n, d = 10, 20000
    X = np.zeros((n, d))
    lap = dp_mean(X, epsilon=2.0, seed=0)
    assert lap.release == LaplaceRelease(epsilon=2.0, sensitivity=d / n, what=lap.release.what)
    assert np.isclose(np.abs(lap.value).mean(), d / n / 2.0, rtol=0.03)
    gau = dp_mean(X, epsilon=0.5, delta=1e-5, mechanism="gaussian", seed=0)
    assert math.isclose(gau.release.sensitivity, math.sqrt(d) / n)
    assert np.isclose(gau.value.std(), gau.release.sigma, rtol=0.03)
    scalar = dp_mean(np.linspace(0, 1, 1001), epsilon=1.0, clamp=True, seed=0)
    assert scalar.value.shape == () and 0 <= scalar.value <= 1 and scalar.release.sensitivity == 1 / 1001
    img = dp_mean(np.full((1000, 4), 255, dtype=np.uint8), epsilon=100.0, clamp=True, seed=0)
    assert np.allclose(img.value, 1.0, atol=0.05) and img.value.max() <= 1.0


@given(
    values=st.lists(st.floats(0, 1), min_size=2, max_size=12),
    new=st.floats(0, 1),
)
def test_variance_sensitivity_bound(values, new):
    x = np.array(values)
    x2 = x.copy()
    x2[0] = new
    l1, _ = variance_sensitivity(n=len(x), dim=1)
    assert abs(x.var() - x2.var()) <= l1 + 1e-12


def test_dp_variance_and_histogram():
    X = np.random.default_rng(0).uniform(0, 1, size=(5000, 3))
    v = dp_variance(X, epsilon=1.0, seed=0)
    assert np.allclose(v.value, 1 / 12, atol=0.01) and math.isclose(v.release.sensitivity, 3 * 4999 / 5000**2)
    y = np.repeat(np.arange(4), [10, 20, 30, 0])
    h = dp_histogram(y, num_classes=4, epsilon=1.0, postprocess=True, seed=0)
    assert h.release.sensitivity == 2.0 and (h.value >= 0).all() and (h.value == np.round(h.value)).all()
    g = dp_histogram(y, num_classes=4, epsilon=0.5, delta=1e-6, mechanism="gaussian", seed=0)
    assert math.isclose(g.release.sensitivity, math.sqrt(2))
    with pytest.raises(ValueError, match="delta is only used by the Gaussian"):
        dp_histogram(y, num_classes=4, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="needs delta"):
        dp_mean(X, epsilon=0.5, mechanism="gaussian")
    with pytest.raises(ValueError, match="'exponential'"):
        dp_mean(X, epsilon=0.5, mechanism="exponential")


def test_gaussian_calibration():
    classic = gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0)
    analytic = gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0, method="analytic")
    assert analytic < classic
    assert gaussian_delta(epsilon=0.5, sigma=analytic, sensitivity=1.0) <= 1e-5
    assert math.isclose(gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0, method="analytic"), 3.73, rel_tol=0.01)
    with pytest.raises(ValueError, match="below"):
        GaussianRelease(epsilon=0.5, delta=1e-5, sensitivity=1.0, sigma=1.0, what="mean")
    with pytest.raises(ValueError, match="epsilon=1.5"):
        gaussian_sigma(epsilon=1.5, delta=1e-5, sensitivity=1.0)
    # a card names the analysis that certifies sigma, not the description's class
    for method in ("classic", "analytic"):
        release = GaussianRelease.calibrated(epsilon=0.5, delta=1e-5, sensitivity=1.0, what="mean", method=method)
        assert release.accountant == f"{method}-gaussian" and f"the {method} Gaussian analysis" in release.guarantee
