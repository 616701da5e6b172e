"""DP-SGD's private feature ranges: the noisy histograms, their accounting, and the composition with the steps."""

import math

import dp_accounting
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmix_core.mechanisms.descriptions import gaussian_sigma
from dpmix_core.mechanisms.feature_ranges import FeatureRanges, bin_counts, dp_feature_ranges
from dpmix_core.training.dpsgd import (
    RANGES_EPSILON_SHARE,
    calibrate_noise_multiplier,
    calibrate_with_ranges,
    dpsgd_epsilons,
    dpsgd_with_ranges_epsilons,
    ranges_noise_multiplier,
)


class _SpyGenerator(np.random.Generator):
    """A generator that records the scale of every Gaussian draw (numpy's default_rng returns it as it is)."""

    def __init__(self, seed=0):
        super().__init__(np.random.PCG64(seed))
        self.scales = []

    def normal(self, loc=0.0, scale=1.0, size=None):
        self.scales.append((float(scale), size))
        return super().normal(loc, scale, size)


def _crowded(n=2000, d=3, seed=0):
    """Records in [0.30, 0.36] of the public [0, 1]: what loose public bounds leave of a feature."""
    return np.random.default_rng(seed).uniform(0.30, 0.36, size=(n, d))


def test_one_record_moves_the_counts_by_sqrt_d():
    """The sensitivity the noise is calibrated to: adding one record adds 1 to one bin of each of the d features."""
    rng = np.random.default_rng(1)
    for d in (1, 4, 9):
        X = rng.uniform(-0.2, 1.2, size=(50, d))  # some values outside: counted in the edge bins
        low, high = np.zeros(d), np.ones(d)
        counts = bin_counts(X, low, high, 16)
        assert counts.shape == (d, 16) and np.all(counts.sum(axis=1) == 50)
        record = rng.uniform(-0.2, 1.2, size=(1, d))
        moved = bin_counts(np.vstack([X, record]), low, high, 16) - counts
        assert np.array_equal(np.sort(moved, axis=1)[:, -1], np.ones(d)) and moved.sum() == d
        assert math.isclose(float(np.linalg.norm(moved)), math.sqrt(d))


def test_each_round_draws_noise_z_sqrt_rounds_sqrt_d_on_every_count():
    spy = _SpyGenerator()
    dp_feature_ranges(_crowded(d=4), noise_multiplier=2.0, rounds=3, bins=16, seed=spy)
    assert spy.scales == [(2.0 * math.sqrt(3) * math.sqrt(4), (4, 16))] * 3


def test_the_rounds_are_one_gaussian_with_the_stated_multiplier():
    """SelfComposed(Gaussian(z sqrt(k)), k) is exactly Gaussian(z) (GDP composes in quadrature): its PLD epsilon
    equals the analytic Gaussian's (Balle & Wang 2018), an independent closed form."""
    for z, rounds in ((1.5, 3), (4.0, 2), (0.8, 5)):
        ranges = FeatureRanges(np.zeros(2), np.ones(2), z, rounds, 16)
        accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        accountant.compose(ranges.dp_event())
        eps = accountant.get_epsilon(1e-5)
        # the analytic Gaussian's sigma at eps (sensitivity 1) is z again
        assert gaussian_sigma(epsilon=eps, delta=1e-5, sensitivity=1.0, method="analytic") == pytest.approx(z, rel=2e-3)


def test_crowded_features_get_their_range_and_spread_ones_keep_the_bounds():
    X = _crowded()
    ranges = dp_feature_ranges(X, noise_multiplier=1.0, seed=0)
    assert np.all(ranges.low <= 0.30) and np.all(ranges.high >= 0.36)  # every record inside
    assert np.all(ranges.high - ranges.low < 0.06 * 4)  # 16x narrower than the bounds, within a few spare bins
    scaled = ranges.scale(X)
    assert scaled.dtype == np.float32 and scaled.min() >= 0 and scaled.max() <= 1 and np.ptp(scaled, axis=0).min() > 0.2
    spread = np.random.default_rng(0).uniform(0, 1, size=(2000, 3))
    wide = dp_feature_ranges(spread, noise_multiplier=1.0, seed=0)
    assert np.all(wide.low == 0) and np.all(wide.high == 1)  # nothing to zoom into


def test_a_small_file_or_a_small_epsilon_keeps_the_public_bounds_rather_than_clip():
    """Where the noise hides the records (30 of them, z = 20) the ranges stay wide: a spurious occupied bin is not
    significant on its own, so no draw of 50 clips more than a tenth of the values."""
    X = _crowded(n=30)
    for seed in range(50):
        ranges = dp_feature_ranges(X, noise_multiplier=20.0, seed=seed)
        inside = (X >= ranges.low) & (X <= ranges.high)
        assert inside.mean() > 0.9, seed


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=300),
    d=st.integers(min_value=1, max_value=6),
    z=st.floats(min_value=0.05, max_value=50),
    lo=st.floats(min_value=-1e3, max_value=1e3),
    width=st.floats(min_value=1e-3, max_value=1e4),
    seed=st.integers(min_value=0, max_value=2**31),
)
def test_ranges_stay_inside_the_bounds_and_are_the_same_for_the_same_seed(n, d, z, lo, width, seed):
    rng = np.random.default_rng(seed)
    X = lo + width * rng.beta(0.5, 3.0, size=(n, d))
    bounds = (lo, lo + width)
    ranges = dp_feature_ranges(X, noise_multiplier=z, bounds=bounds, seed=seed)
    assert np.all(ranges.low >= bounds[0]) and np.all(ranges.high <= bounds[1]) and np.all(ranges.high > ranges.low)
    again = dp_feature_ranges(X, noise_multiplier=z, bounds=bounds, seed=seed)
    assert np.array_equal(ranges.low, again.low) and np.array_equal(ranges.high, again.high)
    assert ranges.noise_multiplier == z


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_multiplier": 0.0}, "noise multiplier"),
        ({"noise_multiplier": math.inf}, "noise multiplier"),
        ({"bounds": (1.0, 1.0)}, "bounds"),
        ({"rounds": 0}, "rounds"),
        ({"bins": 0}, "bins"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dp_feature_ranges(_crowded(n=10), **{"noise_multiplier": 1.0, **kwargs})


# --------------------------------------------------------------------------- the ranges and the steps together

SHAPE = {"n": 480, "batch_size": 32, "steps": 15 * 50}


def _ranges_event(target, delta=1e-5, rounds=3):
    z = ranges_noise_multiplier(target_epsilon=target, delta=delta)
    return FeatureRanges(np.zeros(1), np.ones(1), z, rounds, 16).dp_event()


def test_the_ranges_alone_cost_their_share_of_the_target():
    for target in (1.0, 8.0):
        accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        accountant.compose(_ranges_event(target))
        assert accountant.get_epsilon(1e-5) == pytest.approx(RANGES_EPSILON_SHARE * target, rel=2e-3)


@pytest.mark.parametrize("target", [1.0, 8.0, 100.0])  # 100: a coarser PLD grid (1e-4 of the RDP epsilon)
def test_calibration_meets_the_target_tightly_and_pays_for_the_ranges(target):
    event = _ranges_event(target)
    z = calibrate_with_ranges(**SHAPE, target_epsilon=target, delta=1e-5, ranges_event=event)
    eps = dpsgd_with_ranges_epsilons(**SHAPE, noise_multiplier=z, delta=1e-5, ranges_event=event)
    assert set(eps) == {"pld-dp-accounting", "rdp-dp-accounting", "opacus-rdp", "opacus-prv"}
    assert eps["pld-dp-accounting"] <= target  # never above the target
    tighter = dpsgd_with_ranges_epsilons(**SHAPE, noise_multiplier=z * 0.995, delta=1e-5, ranges_event=event)
    assert tighter["pld-dp-accounting"] > target  # and within 0.5 % of the smallest z that meets it
    alone = calibrate_noise_multiplier(**SHAPE, target_epsilon=target, delta=1e-5)
    assert alone < z < 1.1 * alone  # the ranges cost DP-SGD a few percent more noise
    assert eps["pld-dp-accounting"] <= eps["rdp-dp-accounting"]  # PLD is the tighter of the two rigorous bounds
    if target <= 8:  # two RDP implementations; at eps 100 their order grids differ where the optimum lies
        assert eps["opacus-rdp"] == pytest.approx(eps["rdp-dp-accounting"], rel=0.02)  # (107 against 204)
    assert eps["opacus-prv"] == pytest.approx(eps["pld-dp-accounting"], rel=0.02)  # PRV estimates the same curve


def test_ranges_with_almost_no_cost_leave_dp_sgd_as_our_own_pld_accounts_it():
    """An independent check of the composition: with ranges at z = 1e4 the total is DP-SGD's alone, which our
    pld-poisson accountant (its own grid and refinement) computes without dp_accounting's composition."""
    z = 1.2
    free = FeatureRanges(np.zeros(1), np.ones(1), 1e4, 3, 16).dp_event()
    composed = dpsgd_with_ranges_epsilons(**SHAPE, noise_multiplier=z, delta=1e-5, ranges_event=free)
    alone = dpsgd_epsilons(**SHAPE, noise_multiplier=z, delta=1e-5)
    assert composed["pld-dp-accounting"] == pytest.approx(alone["pld-poisson"], rel=5e-3)
    assert composed["rdp-dp-accounting"] == pytest.approx(alone["rdp-poisson"], rel=5e-3)
    with_ranges = dpsgd_with_ranges_epsilons(**SHAPE, noise_multiplier=z, delta=1e-5, ranges_event=_ranges_event(8.0))
    assert with_ranges["pld-dp-accounting"] > composed["pld-dp-accounting"]  # composition only adds


def test_exact_features_are_neither_counted_nor_narrowed():
    """One-hot features (bounds (0, 1) exact) left out: the others' ranges are those of the table without them, the
    same noise draws at the noise of d' = 2 counted features, not d = 5."""
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0.1, 0.2, 4000), rng.integers(0, 2, (4000, 3)), rng.uniform(0.5, 0.6, 4000)])
    ranges = dp_feature_ranges(x, noise_multiplier=2.0, rounds=4, seed=7, exact=(1, 2, 3))
    alone = dp_feature_ranges(x[:, [0, 4]], noise_multiplier=2.0, rounds=4, seed=7)
    np.testing.assert_array_equal(ranges.low[[0, 4]], alone.low)
    np.testing.assert_array_equal(ranges.high[[0, 4]], alone.high)
    assert np.all(ranges.low[1:4] == 0.0) and np.all(ranges.high[1:4] == 1.0) and ranges.exact == (1, 2, 3)
    assert "3 one-hot features kept at the public bounds" in ranges.describe()
    for bad in ((5,), (-1,), (0, 1, 2, 3, 4)):
        with pytest.raises(ValueError, match="fewer than all 5 features"):
            dp_feature_ranges(x, noise_multiplier=2.0, exact=bad)
