"""Every published number, independent cross-checks, properties and extremes."""

import math
from dataclasses import replace

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from hypothesis import given
from hypothesis import strategies as st

from dpmix_core.privacy.accountants import (
    ACCOUNTANTS,
    MixingSetting,
    UnsupportedReleaseError,
    applicable_accountants,
    epsilon_all,
    get_accountant,
)
from dpmix_core.privacy.accountants.rdp_dp_accounting import POISSON_ORDERS
from dpmix_core.privacy.analysis.rdp_conversion import classic_rdp_to_dp
from dpmix_core.privacy.analysis.wbk_subsampling import wbk_subsampled_gaussian_rdp
from dpmix_core.privacy.release import Adjacency, DataBounds, MixingRelease, Sampling

THESIS = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711, dx=784, dy=10)


def eps(name, setting, delta=1e-5, **opts):
    acc = get_accountant(name, **opts)
    return acc.epsilon(acc.release_for(setting), delta).epsilon


def test_lee2019_reproduces_thesis():
    assert eps("lee2019", THESIS, 1 / 60000) == pytest.approx(15.00, abs=0.01)


def test_thesis_code_bug_one_over_n_gives_1_42():
    """The thesis code uses gamma = 1/n instead of l/n: it would report 1.42."""
    release = get_accountant("lee2019").release_for(THESIS)
    orders = np.arange(2, 101)
    rdp = wbk_subsampled_gaussian_rdp(1 / 60000, release.gaussian_rdp_coefficient(), orders)
    assert classic_rdp_to_dp(orders, 10000 * rdp, 1 / 60000)[0] == pytest.approx(1.42, abs=0.01)


def test_dpcda_base_rdp_is_theorem_1():
    s = replace(THESIS, clip=2.5, sigma_x=0.3, sigma_y=0.4)
    release = get_accountant("dpcda").release_for(s)
    alpha = 7
    expected = alpha / s.l**2 * (2 * 2.5**2 / 0.3**2 + 1 / 0.4**2)
    assert alpha * release.gaussian_rdp_coefficient() == pytest.approx(expected)


def test_lee2019_sensitivities():
    release = get_accountant("lee2019").release_for(THESIS)
    dx, dy = release.sensitivities()
    assert dx**2 == pytest.approx(784 / 256**2) and dy**2 == pytest.approx(10 / 256**2)


def _mp_poisson_rdp(q: float, z: float, alpha: int) -> float:
    """Mironov, Talwar, Zhang 2019, Sec. 3.3, integer alpha, in 60-digit arithmetic."""
    with mpmath.workdps(60):
        q = mpmath.mpf(q)
        a = mpmath.fsum(
            mpmath.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mpmath.exp((k * k - k) / (2 * mpmath.mpf(z) ** 2))
            for k in range(alpha + 1)
        )
        return float(mpmath.log(a) / (alpha - 1))


@pytest.mark.parametrize("setting", [
    MixingSetting(n=60000, l=256, T=10000, sigma_x=0.004, sigma_y=0.004),
    MixingSetting(n=50000, l=64, T=50000, sigma_x=0.02, sigma_y=0.02),
])
def test_rdp_poisson_matches_mpmath_oracle(setting):
    acc = get_accountant("rdp-poisson")
    release = acc.release_for(setting)
    q, z = release.sampling_rate, release.noise_multiplier()
    orders = [a for a in POISSON_ORDERS if a <= 64]
    rdp = [setting.T * _mp_poisson_rdp(q, z, a) for a in orders]
    oracle, _ = compute_epsilon(orders, rdp, 1e-5)
    # the accountant may use more orders, so it can only be tighter, and barely
    ours = acc.epsilon(release, 1e-5).epsilon
    assert ours <= oracle * (1 + 1e-9)
    assert ours == pytest.approx(oracle, rel=0.02)


def test_gdp_clt_published_calibration():
    """DPFMix: n = T = 50000, m = 64, eps = 2, delta = 1e-5, sigma_y = sigma_x -> z = 0.8440."""
    from dpmix_core.privacy.calibration import calibrate_sigma

    s = MixingSetting(n=50000, l=64, T=50000, sigma_x=1, sigma_y=1)
    cal = calibrate_sigma(get_accountant("gdp-clt"), s, target_epsilon=2.0, delta=1e-5, sigma_ratio=1.0)
    release = get_accountant("gdp-clt").release_for(replace(s, sigma_x=cal.sigma_x, sigma_y=cal.sigma_y))
    assert release.noise_multiplier() == pytest.approx(0.8440, abs=5e-4)
    assert dict(cal.result.details)["mu"] == pytest.approx(0.5016, abs=5e-4)


def test_gdp_clt_is_flagged_as_approximation_and_is_optimistic_here():
    s = MixingSetting(n=50000, l=64, T=50000, sigma_x=0.01865, sigma_y=0.01865)
    clt = get_accountant("gdp-clt")
    result = clt.epsilon(clt.release_for(s), 1e-5)
    assert not result.upper_bound and "not an upper bound" in result.guarantee
    assert result.epsilon < eps("pld-poisson", s)


def test_pld_close_to_fine_grid_reference():
    """Our adaptive grid vs dp_accounting's default 1e-4 grid: both upper bounds, within 2 %."""
    from dp_accounting.pld import pld_privacy_accountant as pld

    s = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.004, sigma_y=0.004)
    release = get_accountant("pld-poisson").release_for(s)
    ref = pld.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(release.dp_event())
    assert eps("pld-poisson", s) == pytest.approx(ref.get_epsilon(1e-5), rel=0.02)


def test_unsupported_release_names_the_mismatch():
    poisson_release = get_accountant("gdp-clt").release_for(THESIS)
    with pytest.raises(UnsupportedReleaseError, match="without-replacement"):
        get_accountant("lee2019").epsilon(poisson_release, 1e-5)


def test_applicable_accountants():
    wor = get_accountant("lee2019").release_for(THESIS)
    assert {a.name for a in applicable_accountants(wor)} == {"lee2019", "dpcda", "rdp-wor"}
    poisson = get_accountant("gdp-clt").release_for(THESIS)
    assert {a.name for a in applicable_accountants(poisson)} == {"gdp-clt", "rdp-poisson", "pld-poisson"}


def test_class_centric_accounting():
    s = replace(THESIS, T=12000, l=128, sigma_x=0.7, sigma_y=0.7, class_sizes=(6000,) * 10)
    same_class = replace(s, protect_labels=False)
    release = get_accountant("lee2019").release_for(same_class)
    assert (release.n, release.num_points) == (6000, 1200)
    changed = get_accountant("lee2019").release_for(s)  # the default: labels protected
    assert (changed.n, changed.num_points) == (5999, 2400)
    assert eps("lee2019", s) > eps("lee2019", same_class)
    with pytest.raises(ValueError, match="smallest class"):
        get_accountant("lee2019").release_for(replace(s, l=7000, class_sizes=(6000,) * 9 + (6000,)))


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
def test_no_noise_is_infinite_with_reason(name):
    acc = get_accountant(name)
    result = acc.epsilon(acc.release_for(replace(THESIS, sigma_x=0.0)), 1e-5)
    assert result.epsilon == math.inf and "no noise" in result.reason
    assert result.to_json()["epsilon"] == "inf"


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
@pytest.mark.parametrize(
    "setting",
    [
        MixingSetting(n=60000, l=256, T=10000, sigma_x=1e-3, sigma_y=1e-3),
        MixingSetting(n=60000, l=1, T=1_000_000, sigma_x=0.5, sigma_y=0.5),
        MixingSetting(n=100, l=100, T=1, sigma_x=1e3, sigma_y=1e3),
        MixingSetting(n=1, l=1, T=1, sigma_x=1e-6, sigma_y=1e4),
        MixingSetting(n=10**9, l=2, T=10**7, sigma_x=50.0, sigma_y=50.0),
    ],
)
def test_extreme_inputs_never_nan_or_crash(name, setting):
    acc = get_accountant(name)
    result = acc.epsilon(acc.release_for(setting), 1e-5)
    assert not math.isnan(result.epsilon) and result.epsilon >= 0
    if math.isinf(result.epsilon) or result.epsilon > 1e6:
        assert result.reason


@pytest.mark.parametrize("bad", [
    dict(l=0), dict(n=0), dict(T=0), dict(l=10**6), dict(sigma_x=-1.0), dict(sigma_y=float("nan")),
    dict(clip=0.0), dict(dx=0), dict(class_sizes=(5, 5)),
])
def test_invalid_settings_raise_clear_errors(bad):
    with pytest.raises(ValueError):
        replace(THESIS, **bad)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, float("nan")])
def test_invalid_delta(delta):
    acc = get_accountant("lee2019")
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(acc.release_for(THESIS), delta)


def test_unknown_accountant():
    with pytest.raises(ValueError, match="Unknown accountant"):
        get_accountant("moments")


def test_all_results_are_labelled():
    for result in epsilon_all(THESIS, 1e-5):
        assert result.assumptions and result.reference and result.sampling and result.adjacency
        assert result.upper_bound == (result.accountant != "gdp-clt")


def test_release_event_round_trip():
    release = MixingRelease(
        n=100, mix_degree=10, num_points=5, sigma_x=1.0, sigma_y=1.0,
        sampling=Sampling.POISSON, adjacency=Adjacency.ADD_REMOVE_ONE, bounds=DataBounds.clipped(1.0, 1.0),
    )
    event = release.dp_event()
    assert event.count == 5 and event.event.sampling_probability == pytest.approx(0.1)


# ---------------------------------------------------------------- properties

sigmas = st.floats(min_value=0.02, max_value=20.0)
settings_st = st.builds(
    lambda n, frac, T, s, lam, d: MixingSetting(
        n=n, l=max(1, int(n * frac)), T=T, sigma_x=s, sigma_y=s * lam, dx=d, dy=10
    ),
    n=st.integers(1000, 100000),
    frac=st.floats(1e-4, 0.05),
    T=st.integers(1, 20000),
    s=st.floats(0.05, 5.0),
    lam=st.floats(0.5, 2.0),
    d=st.integers(1, 1000),
)
MONOTONE = ["lee2019", "dpcda", "gdp-clt", "rdp-poisson", "rdp-wor"]


@given(settings_st, st.floats(1.1, 3.0))
def test_epsilon_decreases_in_sigma(setting, factor):
    noisier = replace(setting, sigma_x=setting.sigma_x * factor, sigma_y=setting.sigma_y * factor)
    for name in MONOTONE:
        assert eps(name, noisier) <= eps(name, setting) * (1 + 1e-9) + 1e-12
    assert eps("pld-poisson", noisier) <= eps("pld-poisson", setting) * 1.03 + 1e-3


@given(settings_st, st.integers(2, 10))
def test_epsilon_increases_in_T(setting, factor):
    longer = replace(setting, T=setting.T * factor)
    for name in MONOTONE:
        assert eps(name, longer) >= eps(name, setting) * (1 - 1e-9) - 1e-12
    assert eps("pld-poisson", longer) >= eps("pld-poisson", setting) * 0.97 - 1e-3


@given(settings_st, st.floats(1e-10, 1e-3), st.floats(1.5, 100))
def test_epsilon_decreases_in_delta(setting, delta, factor):
    for name in MONOTONE:
        assert eps(name, setting, delta=min(delta * factor, 0.5)) <= eps(name, setting, delta=delta) + 1e-9


@given(settings_st)
def test_rdp_wor_never_above_lee2019(setting):
    assert eps("rdp-wor", setting) <= eps("lee2019", setting) * (1 + 1e-9) + 1e-9


@given(settings_st)
def test_pld_never_above_rdp_poisson(setting):
    assert eps("pld-poisson", setting) <= eps("rdp-poisson", setting) * (1 + 1e-6) + 1e-6


def test_tightest_guarantees_never_mix_release_models():
    from dpmix_core.views.reports import epsilon_table, tightest_guarantees

    best = tightest_guarantees(epsilon_table(replace(THESIS, clip=1.0), 1e-5))
    assert best["assumptions"].is_unique and len(best) == 3  # [0,1]^d WOR, clipped WOR, Poisson
    assert "gdp-clt" not in set(best["accountant"])
    poisson = best[best["assumptions"].str.startswith("poisson")]
    assert poisson["accountant"].item() in {"pld-poisson", "rdp-poisson"}
