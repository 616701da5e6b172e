"""Every published number, independent cross-checks, properties and extremes."""

import math
from dataclasses import replace

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import mp_poisson_rdp

from dpmix_core.privacy.accountants import (
    ACCOUNTANTS,
    MixingSetting,
    UnsupportedReleaseError,
    applicable_accountants,
    epsilon_all,
    get_accountant,
)
from dpmix_core.privacy.accountants.rdp_dp_accounting import POISSON_ORDERS, RDP_ROUNDING
from dpmix_core.privacy.analysis.rdp_conversion import classic_rdp_to_dp
from dpmix_core.privacy.analysis.wbk_subsampling import wbk_subsampled_gaussian_rdp
from dpmix_core.privacy.events import SampledGaussianSteps
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


@pytest.mark.parametrize(
    "setting",
    [
        MixingSetting(n=60000, l=256, T=10000, sigma_x=0.004, sigma_y=0.004),
        MixingSetting(n=50000, l=64, T=50000, sigma_x=0.02, sigma_y=0.02),
    ],
)
def test_rdp_poisson_matches_mpmath_oracle(setting):
    acc = get_accountant("rdp-poisson")
    release = acc.release_for(setting)
    q, z = release.sampling_rate, release.noise_multiplier()
    orders = [a for a in POISSON_ORDERS if a <= 64]
    rdp = [setting.T * mp_poisson_rdp(q, z, a) for a in orders]
    oracle, _ = compute_epsilon(orders, rdp, 1e-5)
    # the accountant may use more orders, so it can only be tighter, and barely
    ours = acc.epsilon(release, 1e-5).epsilon
    assert ours <= oracle * (1 + 1e-9)
    assert ours == pytest.approx(oracle, rel=0.02)


# the orders rdp-poisson may try: its defaults, then x1.5 per step up to 4096 while the largest order is the best
EXTENDED_POISSON_ORDERS = POISSON_ORDERS + (384, 576, 864, 1296, 1944, 2916, 4096)


def test_rdp_poisson_is_not_zeroed_by_dp_accountings_rounding_noise():
    """T = 1e12 steps at q = 0.5, z = 7.07e8 (the CLI's n=2, l=1, sigma=1e9): the one-step RDP (~1e-19) is below double
    resolution, dp_accounting's came out negative at some orders and it returned epsilon 0 (and pld-poisson showed that
    0). The same RDP bound in 60-digit arithmetic is 0.0196 at orders <= 256 and 0.00156 at orders <= 4096; the CLT
    (mu = 7e-4) puts the true epsilon near 1e-3 > 0."""
    release = SampledGaussianSteps.poisson(q=0.5, z=7.07e8, steps=10**12)
    rdp = [release.num_points * mp_poisson_rdp(0.5, 7.07e8, a) for a in EXTENDED_POISSON_ORDERS]
    oracle_256, _ = compute_epsilon(list(POISSON_ORDERS), rdp[: len(POISSON_ORDERS)], 1e-5)
    oracle, _ = compute_epsilon(list(EXTENDED_POISSON_ORDERS), rdp, 1e-5)
    ours = get_accountant("rdp-poisson").epsilon(release, 1e-5).epsilon
    assert oracle_256 == pytest.approx(0.01955, rel=1e-3) and oracle == pytest.approx(0.00156, rel=1e-2)
    # T * 8 ulp of rounding allowance on every order's RDP: at most 1.8e-3 more epsilon at T = 1e12
    assert oracle <= ours <= oracle + release.num_points * RDP_ROUNDING
    assert get_accountant("pld-poisson").epsilon(release, 1e-5).epsilon > 1e-3


def test_rdp_poisson_extends_its_orders_for_a_small_budget():
    """z = 200, q = 64/60000, T = 60000: at orders <= 256 the conversion's log(1/delta)/(alpha - 1) floor sets
    epsilon (0.0197, mpmath); the best order is 1944 (0.00317), which rdp-poisson reaches by extending its orders,
    and so does pld-poisson, whose grid stops near 0.014 and which reports the smaller RDP bound."""
    release = SampledGaussianSteps.poisson(q=64 / 60000, z=200.0, steps=60000)
    rdp = [release.num_points * mp_poisson_rdp(64 / 60000, 200.0, a) for a in EXTENDED_POISSON_ORDERS]
    oracle_256, _ = compute_epsilon(list(POISSON_ORDERS), rdp[: len(POISSON_ORDERS)], 1e-5)
    oracle, order = compute_epsilon(list(EXTENDED_POISSON_ORDERS), rdp, 1e-5)
    result = get_accountant("rdp-poisson").epsilon(release, 1e-5)
    assert order == 1944 and oracle_256 > 6 * oracle
    assert result.epsilon == pytest.approx(oracle, rel=1e-6) and result.order == 1944
    assert dict(result.details)["max_order"] == 2916  # the first order past the best, then it stopped
    assert get_accountant("pld-poisson").epsilon(release, 1e-5).epsilon == pytest.approx(oracle, rel=1e-6)
    capped = get_accountant("rdp-poisson", max_order=256).epsilon(release, 1e-5)
    assert capped.epsilon == pytest.approx(oracle_256, rel=1e-6) and dict(capped.details)["max_order"] == 256


def test_rdp_poisson_tries_no_larger_order_where_a_small_one_is_best():
    """A typical release (epsilon ~ 1.5, best order 12): no order above the defaults is computed."""
    release = SampledGaussianSteps.poisson(q=64 / 60000, z=1.0, steps=60000)
    result = get_accountant("rdp-poisson").epsilon(release, 1e-5)
    assert result.order < 256 and dict(result.details)["max_order"] == 256


def test_gdp_clt_published_calibration():
    """DPFMix: n = T = 50000, m = 64, eps = 2, delta = 1e-5, sigma_y = sigma_x -> z = 0.8440."""
    from dpmix_core.privacy.calibration import REPRODUCIBLE, calibrate_sigma

    s = MixingSetting(n=50000, l=64, T=50000, sigma_x=1, sigma_y=1)
    cal = calibrate_sigma(get_accountant("gdp-clt"), s, target_epsilon=2.0, delta=1e-5, time_budget=REPRODUCIBLE)
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
    assert (release.n, release.num_points, release.class_sizes) == (60000, 12000, (6000,) * 10)  # what was released
    view = release.accounting_view()  # what the theorems are applied to
    assert (view.n, view.num_points) == (6000, 1200)
    changed = get_accountant("lee2019").release_for(s).accounting_view()  # the default: labels protected
    assert (changed.n, changed.num_points) == (5999, 2400)
    assert eps("lee2019", s) > eps("lee2019", same_class)
    with pytest.raises(ValueError, match="class 0 has 6000 records, fewer than l=7000"):
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


@pytest.mark.parametrize(
    "bad",
    [
        dict(l=0),
        dict(n=0),
        dict(T=0),
        dict(l=10**6),
        dict(sigma_x=-1.0),
        dict(sigma_y=float("nan")),
        dict(clip=0.0),
        dict(dx=0),
        dict(class_sizes=(5, 5)),
    ],
)
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
        n=100,
        mix_degree=10,
        num_points=5,
        sigma_x=1.0,
        sigma_y=1.0,
        sampling=Sampling.POISSON,
        adjacency=Adjacency.ADD_REMOVE_ONE,
        bounds=DataBounds.clipped(1.0, 1.0),
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
    live = {"work_cap": 0.0}  # first grid only: fast
    assert eps("pld-poisson", noisier, **live) <= eps("pld-poisson", setting, **live) * 1.03 + 1e-3


@given(settings_st, st.integers(2, 10))
def test_epsilon_increases_in_T(setting, factor):
    longer = replace(setting, T=setting.T * factor)
    for name in MONOTONE:
        assert eps(name, longer) >= eps(name, setting) * (1 - 1e-9) - 1e-12
    live = {"work_cap": 0.0}
    assert eps("pld-poisson", longer, **live) >= eps("pld-poisson", setting, **live) * 0.97 - 1e-3


@given(settings_st, st.floats(1e-10, 1e-3), st.floats(1.5, 100))
def test_epsilon_decreases_in_delta(setting, delta, factor):
    for name in MONOTONE:
        assert eps(name, setting, delta=min(delta * factor, 0.5)) <= eps(name, setting, delta=delta) + 1e-9


@given(settings_st)
def test_rdp_wor_never_above_lee2019(setting):
    assert eps("rdp-wor", setting) <= eps("lee2019", setting) * (1 + 1e-9) + 1e-9


@given(settings_st)
def test_pld_never_above_rdp_poisson(setting):
    assert eps("pld-poisson", setting, work_cap=0.0) <= eps("rdp-poisson", setting) * (1 + 1e-6) + 1e-6


def test_headlines_never_mix_release_models():
    """Each release model's headline comes from an accountant of that model, never from the CLT approximation."""
    from dpmix_core.views.reports import release_reading

    setting = replace(THESIS, clip=1.0)
    expected = {
        "dpmix": {"lee2019", "rdp-wor"},
        "dpcda": {"dpcda", "rdp-wor"},
        "poisson": {"pld-poisson", "rdp-poisson"},
    }
    for model, allowed in expected.items():
        reading = release_reading(setting, 1e-5, model, with_curves=False)
        assert reading.accountant in allowed, (model, reading.accountant)
        assert reading.guarantee == "rigorous upper bound"


# ---------------------------------------------------------------- extreme floats (issue 14 §3)


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
@pytest.mark.parametrize("sigma", [1e308, 1e200, 1e-200, 1e-300, 5e-324])
def test_extreme_sigma_never_raises_and_explains(name, sigma):
    acc = get_accountant(name)
    result = acc.epsilon(acc.release_for(replace(THESIS, sigma_x=sigma, sigma_y=sigma)), 1e-5)
    assert result.reason
    if sigma > 1:
        assert result.epsilon == 0.0 and "total variation" in result.reason
    else:
        assert result.epsilon == math.inf


def test_noise_multiplier_is_exact_across_the_double_range():
    """z = (Dx^2/sx^2 + Dy^2/sy^2)^(-1/2) against 50-digit mpmath, where the naive formula over/underflows."""
    base = get_accountant("lee2019").release_for(THESIS)
    dx, dy = base.sensitivities()
    for sx, sy in [(1e308, 1e308), (1e-300, 1e-300), (1e-320, 1.0), (1e300, 1e-5), (0.0711, 0.0711)]:
        release = base.with_sigma(sx, sy)
        with mpmath.workdps(50):
            z = 1 / mpmath.sqrt((mpmath.mpf(dx) / sx) ** 2 + (mpmath.mpf(dy) / sy) ** 2)
        assert release.noise_multiplier() == pytest.approx(float(z), rel=1e-12)


def test_total_variation_bound_dominates_exact_subsampled_gaussian_tv():
    """One Poisson step has TV exactly q (2 Phi(1/(2z)) - 1) (mpmath, 50 digits); the bound is above it and close."""
    from dpmix_core.privacy.accountants.extremes import total_variation_bound

    for sigma in [0.5, 10.0, 1e6, 1e200]:
        release = get_accountant("gdp-clt").release_for(MixingSetting(n=100, l=10, T=1, sigma_x=sigma, sigma_y=sigma))
        z = release.noise_multiplier()
        with mpmath.workdps(50):
            exact = float(release.sampling_rate * mpmath.erf(1 / (2 * mpmath.sqrt(2) * mpmath.mpf(z))))
        assert exact * (1 - 1e-12) <= total_variation_bound(release)
        if z > 10:
            assert total_variation_bound(release) <= exact * 1.001


_floats_0_to_max = st.one_of(
    st.just(0.0), st.floats(0.0, 1e308), st.floats(-324.0, 308.0).map(lambda e: min(10.0**e, 1e308))
)


@st.composite
def _any_setting(draw):
    n = draw(st.integers(1, 10**12))
    return MixingSetting(
        n=n,
        l=draw(st.integers(1, n)),
        T=draw(st.integers(1, 10**12)),
        sigma_x=draw(_floats_0_to_max),
        sigma_y=draw(_floats_0_to_max),
    )


@settings(max_examples=25, deadline=None)
@given(_any_setting(), st.floats(1e-12, 0.5), st.sampled_from(list(ACCOUNTANTS)))
def test_any_float_input_gives_a_number_or_inf_with_reason(setting, delta, name):
    acc = get_accountant(name, **({"work_cap": 0.0} if name == "pld-poisson" else {}))
    result = acc.epsilon(acc.release_for(setting), delta)
    assert not math.isnan(result.epsilon) and result.epsilon >= 0
    assert all(not math.isnan(v) for _, v in result.details)
    if math.isinf(result.epsilon) or result.epsilon > 1e6:
        assert result.reason


# ---------------------------------------------------------------- rdp-wor vs lee2019 (issue 11 §3)


def test_rdp_wor_small_epsilon_case_from_the_issue():
    """Was 0.284 vs lee2019's 0.233 (orders stopped at 64); orders now extend and Thm. 9 is a floor."""
    s = MixingSetting(n=60000, l=1024, T=1, sigma_x=30.0, sigma_y=30.0)
    acc = get_accountant("rdp-wor")
    result = acc.epsilon(acc.release_for(s), 1e-10)
    details = dict(result.details)
    assert result.epsilon <= eps("lee2019", s, 1e-10) * 0.6 and details["max_order"] > 64
    # independent: dp_accounting itself with every integer order 2..128
    from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

    oracle = dpa_rdp.RdpAccountant(orders=list(range(2, 129)), neighboring_relation=dpa_rdp.NeighborRel.REPLACE_ONE)
    oracle.compose(acc.release_for(s).dp_event())
    assert details["thm27_epsilon"] == pytest.approx(oracle.get_epsilon(1e-10), rel=0.01)
    assert details["thm27_epsilon"] >= oracle.get_epsilon(1e-10) * (1 - 1e-9)
    # one step: the same Gaussian step without subsampling is tighter still, and is what is shown
    assert result.epsilon == details["unsampled_gaussian_epsilon"] < details["thm27_epsilon"]


def test_rdp_wor_reports_thm9_when_dp_accounting_fails():
    """dp_accounting's Thm. 27 raises a math domain error at huge sigma; the reason says so, and the smaller of
    Thm. 9 (lee2019's formula) and the unsampled Gaussian bound is shown."""
    s = replace(THESIS, sigma_x=1e10, sigma_y=1e10)
    acc = get_accountant("rdp-wor")
    result = acc.epsilon(acc.release_for(s), 1e-12)
    details = dict(result.details)
    assert details["thm9_epsilon"] == pytest.approx(eps("lee2019", s, 1e-12))
    assert "Thm. 27 failed" in result.reason and "Thm. 9" in result.reason
    assert result.epsilon == min(details["thm9_epsilon"], details["unsampled_gaussian_epsilon"])


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1000, 100000),
    st.floats(1e-4, 0.2),
    st.integers(1, 1000),
    st.floats(0.5, 1000.0),
    st.floats(1e-12, 1e-3),
)
def test_rdp_wor_never_above_lee2019_at_small_epsilon(n, frac, T, sigma, delta):
    s = MixingSetting(n=n, l=max(1, int(n * frac)), T=T, sigma_x=sigma, sigma_y=sigma)
    assert eps("rdp-wor", s, delta) <= eps("lee2019", s, delta) * (1 + 1e-9) + 1e-12


def test_no_accountant_claims_to_be_tighter_than_it_is():
    text = " ".join(f"{c.__doc__} {c.explanation}" for c in ACCOUNTANTS.values()).lower()
    assert "tighter than the published" not in text


# ---------------------------------------------------------------- pld-poisson grid, error bar, large mu, huge T


def test_pld_reports_pessimistic_and_optimistic_around_an_independent_reference():
    from dp_accounting.pld import pld_privacy_accountant as pld

    s = MixingSetting(n=1000, l=10, T=100, sigma_x=0.5, sigma_y=0.5)
    acc = get_accountant("pld-poisson")
    result = acc.epsilon(acc.release_for(s), 1e-5)
    d = dict(result.details)
    assert d["epsilon_optimistic"] <= d["epsilon_pessimistic"] == result.epsilon
    ref = pld.PLDAccountant(value_discretization_interval=2e-5)  # pessimistic reference, 2e-5 grid
    ref.compose(acc.release_for(s).dp_event())
    exact = ref.get_epsilon(1e-5)
    assert d["epsilon_optimistic"] <= exact * (1 + 1e-6) and 0 < d["epsilon_optimistic"]
    assert exact * (1 - 1e-6) <= result.epsilon <= exact * 1.01


def test_pld_exact_where_it_used_to_fall_back_to_rdp():
    """CLT mu > 60 used to give the RDP bound, 3.6x looser; the PLD is cheap there."""
    from dp_accounting.pld import pld_privacy_accountant as pld

    s = MixingSetting(n=1000, l=500, T=1000, sigma_x=5e-4, sigma_y=5e-4)
    acc = get_accountant("pld-poisson")
    result = acc.epsilon(acc.release_for(s), 1e-5)
    assert result.reason is None and result.epsilon < eps("rdp-poisson", s) / 3
    ref = pld.PLDAccountant(value_discretization_interval=0.02)  # an independent, coarser grid
    ref.compose(acc.release_for(s).dp_event())
    assert result.epsilon == pytest.approx(ref.get_epsilon(1e-5), rel=0.01)
    assert result.epsilon >= dict(result.details)["epsilon_optimistic"]


def _gaussian_epsilon_mpmath(z: float, delta: float) -> float:
    """Exact epsilon of N(0, z^2) vs N(1, z^2) (Balle & Wang 2018, Thm. 8) by bisection at 60 digits."""
    mpmath.mp.dps = 60
    z, delta = mpmath.mpf(z), mpmath.mpf(delta)

    def excess(e):
        return mpmath.ncdf(-e * z + 1 / (2 * z)) - mpmath.exp(e) * mpmath.ncdf(-e * z - 1 / (2 * z)) - delta

    lo, hi = mpmath.mpf(0), mpmath.mpf(10) ** 4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return float(hi)


def test_pld_falls_back_to_the_unsampled_gaussian_where_grid_and_rdp_are_looser():
    """Tiny z, one step: the PLD grid overflows and RDP gives 1468; the same step with the record surely in it is
    a Gaussian mechanism whose exact epsilon (mpmath) bounds the subsampled one, and is what pld-poisson reports."""
    s = MixingSetting(n=60000, l=1, T=1, sigma_x=0.0368, sigma_y=0.0368)
    acc = get_accountant("pld-poisson")
    release = acc.release_for(s)
    result = acc.epsilon(release, 1e-5)
    oracle = _gaussian_epsilon_mpmath(release.noise_multiplier(), 1e-5)
    assert result.epsilon == pytest.approx(oracle, rel=1e-6) and result.epsilon < eps("rdp-poisson", s) / 1.5
    assert "without subsampling" in result.reason and result.guarantee == "rigorous upper bound"


def test_rdp_wor_keeps_falling_with_noise_where_thm27_fails():
    """T = 1e12: at z ~ 1e7 dp_accounting's Thm. 27 raises (math domain error) and the Thm. 9 fallback, capped at
    order 100, gave 0.116 at sigma = 1e10 against 0.050 at sigma = 1e5; the unsampled mu-GDP bound keeps it falling."""
    sigmas = (1e5, 1e6, 1e7, 1e8, 1e10)
    values = [eps("rdp-wor", MixingSetting(n=60000, l=256, T=10**12, sigma_x=s, sigma_y=s)) for s in sigmas]
    assert all(b <= a for a, b in zip(values, values[1:], strict=False)) and values[-1] < 0.01
    failing = get_accountant("rdp-wor").epsilon(
        get_accountant("rdp-wor").release_for(MixingSetting(n=60000, l=256, T=10**12, sigma_x=1e8, sigma_y=1e8)), 1e-5
    )
    assert "without subsampling" in failing.reason and failing.guarantee == "rigorous upper bound"


@given(settings_st)
def test_rdp_wor_never_above_the_same_steps_without_subsampling(setting):
    from dpmix_core.privacy.accountants.extremes import unsampled_gaussian_epsilon

    release = get_accountant("rdp-wor").release_for(setting)
    assert eps("rdp-wor", setting) <= unsampled_gaussian_epsilon(release, 1e-5) * (1 + 1e-9) + 1e-9


@given(settings_st)
def test_pld_never_above_the_same_steps_without_subsampling(setting):
    from dpmix_core.privacy.accountants.extremes import unsampled_gaussian_epsilon

    release = get_accountant("pld-poisson").release_for(setting)
    assert eps("pld-poisson", setting) <= unsampled_gaussian_epsilon(release, 1e-5) * (1 + 1e-9) + 1e-9


def test_pld_astronomical_T_falls_back_to_rdp_with_reason():
    s = MixingSetting(n=10**6, l=100, T=10**12, sigma_x=0.02, sigma_y=0.02)
    result = get_accountant("pld-poisson").epsilon(get_accountant("pld-poisson").release_for(s), 1e-5)
    assert result.epsilon == eps("rdp-poisson", s) and "rdp-poisson" in result.reason


def test_pld_large_T_is_an_upper_bound_of_the_block_composition():
    """T = 3e5 > 1e5 goes through block squaring; it must agree with dp_accounting's direct power."""
    from dpmix_core.privacy.accountants.pld_poisson import pld_epsilon

    release = get_accountant("pld-poisson").release_for(
        MixingSetting(n=10**6, l=100, T=300_001, sigma_x=0.01, sigma_y=0.01)
    )
    from dp_accounting.pld import privacy_loss_distribution as pldist

    single = pldist.from_gaussian_mechanism(
        standard_deviation=release.noise_multiplier(),
        value_discretization_interval=1e-3,
        sampling_prob=release.sampling_rate,
    )
    direct = single.self_compose(300_001).get_epsilon_for_delta(1e-5)
    assert pld_epsilon(release, 1e-5, 1e-3, pessimistic=True) == pytest.approx(direct, rel=1e-3)


# ---------------------------------------------------------------- CLT gap (issue 11 §3)


def test_clt_gap_is_signed_difference_to_the_pld():
    from dpmix_core.privacy.accountants import clt_gap
    from dpmix_core.privacy.analysis.gdp import gdp_epsilon, poisson_clt_mu

    s = MixingSetting(n=50000, l=64, T=50000, sigma_x=0.01865, sigma_y=0.01865)
    release = get_accountant("pld-poisson").release_for(s)
    clt = gdp_epsilon(1e-5, poisson_clt_mu(release.sampling_rate, release.num_points, release.noise_multiplier()))
    pld_eps = get_accountant("pld-poisson", work_cap=0.0).epsilon(release, 1e-5).epsilon
    gap = clt_gap(release, 1e-5, work_cap=0.0)
    assert gap == pytest.approx(clt - pld_eps) and gap < 0  # the CLT understates epsilon here
    # q T <= delta: the release is (0, delta)-DP whatever the noise, yet the CLT reports a large epsilon
    tiny_q = MixingSetting(n=10**6, l=1, T=1, sigma_x=1e-3, sigma_y=1e-3)
    assert clt_gap(tiny_q, 1e-5, work_cap=0.0) > 1


def test_pld_live_grid_within_0_2_percent_where_the_old_fixed_grid_was_2_percent_above():
    """n=1000, m=100, T=1000: the old live grid (h = 0.01) gave 2.886 vs 2.830 on a 2e-5 grid (+2.0 %)."""
    from dpmix_core.privacy.accountants.pld_poisson import pld_epsilon

    s = MixingSetting(n=1000, l=100, T=1000, sigma_x=0.06684, sigma_y=0.06684)
    # the page's default start grid, refined within the default work cap
    acc = get_accountant("pld-poisson", relative_accuracy=0.2)
    release = acc.release_for(s)
    reference = pld_epsilon(release, 1e-5, 2e-5, pessimistic=True)  # dp_accounting on a fine grid
    assert pld_epsilon(release, 1e-5, 0.01, pessimistic=True) > reference * 1.015  # the old grid
    assert reference * (1 - 1e-4) <= acc.epsilon(release, 1e-5).epsilon <= reference * 1.002


def test_rdp_wor_on_clipped_records_matches_dp_accounting_with_a_hand_computed_noise_multiplier():
    """Uniform mixing of records clipped to ||x|| <= Cx, ||y|| <= Cy (DPFMix App. E.3's DPMix): replacing one
    record moves a mean of l records by at most 2Cx/l in x and 2Cy/l in y, so each step is a Gaussian with noise
    multiplier 1/sqrt((2Cx/(l sx))^2 + (2Cy/(l sy))^2), subsampled without replacement (WBK 2019, Thm. 27)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

    n, l, T, sx, sy, cx, cy, delta = 60000, 64, 60000, 0.0581, 0.09, 1.0, 0.5, 1e-5
    s = MixingSetting(n=n, l=l, T=T, sigma_x=sx, sigma_y=sy, clip_x=cx, clip_y=cy, clip_records=True)
    acc = get_accountant("rdp-wor")
    release = acc.release_for(s)
    assert release.bounds == DataBounds.clipped(cx, cy) and release.preprocessing == "clip"
    z = 1 / math.hypot(2 * cx / (l * sx), 2 * cy / (l * sy))
    step = dp_accounting.SampledWithoutReplacementDpEvent(n, l, dp_accounting.GaussianDpEvent(z))
    oracle = dpa_rdp.RdpAccountant(orders=list(range(2, 65)), neighboring_relation=dpa_rdp.NeighborRel.REPLACE_ONE)
    oracle.compose(dp_accounting.SelfComposedDpEvent(step, T))
    result = acc.epsilon(release, delta)
    assert result.upper_bound and result.epsilon <= oracle.get_epsilon(delta) * (1 + 1e-9)
    assert result.epsilon == pytest.approx(oracle.get_epsilon(delta), rel=0.02)
    # the bounds matter: the same noise on [0,1] data is a different (far weaker) release
    unit = acc.epsilon(acc.release_for(replace(s, clip_records=False)), delta)
    assert unit.epsilon > 100 * result.epsilon


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"clip": 1.0}, "two different releases"),
        ({"class_sizes": (30000, 30000)}, "class-centric mixing clips"),
        ({"clip_records": 1}, "True or False"),
    ],
)
def test_clipped_records_are_refused_where_they_contradict_the_setting(changes, message):
    with pytest.raises(ValueError, match=message):
        MixingSetting(n=60000, l=64, T=10, sigma_x=1.0, sigma_y=1.0, **{"clip_records": True, **changes})
