"""DP events: the generic accountants consume dp_accounting events; DP-SGD is one, not a mixing release."""

from __future__ import annotations

import dp_accounting
import pytest

from dpmix_core.privacy.accountants import MixingSetting, UnsupportedReleaseError, get_accountant
from dpmix_core.privacy.calibration import REPRODUCIBLE, calibrate_sigma
from dpmix_core.privacy.events import SampledGaussianSteps, UnsupportedEventError
from dpmix_core.privacy.release import Sampling


def _poisson_release():
    setting = MixingSetting(n=20000, l=64, T=2000, sigma_x=0.02, sigma_y=0.02)
    return get_accountant("pld-poisson").release_for(setting)


def _wor_release():
    setting = MixingSetting(n=5000, l=16, T=500, sigma_x=0.3, sigma_y=0.3, dx=16, dy=2)
    return get_accountant("rdp-wor").release_for(setting)


@pytest.mark.parametrize("make", [_poisson_release, _wor_release])
def test_a_release_and_its_dp_event_get_the_same_epsilon(make):
    release = make()
    event = release.dp_event()
    steps = SampledGaussianSteps.from_dp_event(event)
    assert steps.dp_event() == event  # parse and rebuild are inverse
    assert steps.num_points == release.num_points
    assert steps.sampling_rate == pytest.approx(release.sampling_rate)
    assert steps.noise_multiplier() == pytest.approx(release.noise_multiplier())
    names = ("pld-poisson", "rdp-poisson", "gdp-clt") if release.sampling is Sampling.POISSON else ("rdp-wor",)
    for name in names:
        acc = get_accountant(name)
        on_release = acc.epsilon(release, 1e-5).epsilon
        on_event = acc.epsilon_of_event(event, 1e-5).epsilon
        assert on_event == pytest.approx(on_release, rel=1e-9), name


def test_rdp_on_an_event_matches_dp_accounting_directly():
    """Oracle: dp_accounting's own RdpAccountant on the same event (its default orders are a superset-ish grid)."""
    event = SampledGaussianSteps.poisson(q=256 / 60000, z=1.1, steps=60 * 234).dp_event()
    oracle = dp_accounting.rdp.RdpAccountant()
    oracle.compose(event)
    ours = get_accountant("rdp-poisson").epsilon_of_event(event, 1e-5)
    assert ours.epsilon == pytest.approx(oracle.get_epsilon(1e-5), rel=0.02)
    assert ours.upper_bound and "DP-SGD" not in ours.assumptions


def test_pld_on_an_event_is_an_upper_bound_near_a_fine_dp_accounting_pld():
    event = SampledGaussianSteps.poisson(q=0.01, z=1.0, steps=1000).dp_event()
    fine = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    fine.compose(event)
    exact = fine.get_epsilon(1e-5)
    ours = get_accountant("pld-poisson").epsilon_of_event(event, 1e-5, mechanism="DP-SGD test").epsilon
    assert exact - 1e-3 <= ours <= exact * 1.02


def test_closed_forms_refuse_events_and_other_shapes_are_refused():
    event = SampledGaussianSteps(Sampling.WITHOUT_REPLACEMENT, 10, 1.0, n=100, l=5).dp_event()
    for name in ("lee2019", "dpcda"):
        with pytest.raises(UnsupportedReleaseError, match="closed form"):
            get_accountant(name).epsilon_of_event(event, 1e-5)
    assert get_accountant("rdp-wor").epsilon_of_event(event, 1e-5).epsilon > 0
    mixed = dp_accounting.ComposedDpEvent([event, dp_accounting.LaplaceDpEvent(1.0)])
    with pytest.raises(UnsupportedReleaseError, match="ComposedDpEvent"):
        get_accountant("rdp-wor").epsilon_of_event(mixed, 1e-5)
    with pytest.raises(UnsupportedEventError):
        SampledGaussianSteps.from_dp_event(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.LaplaceDpEvent(1)))
    with pytest.raises(UnsupportedReleaseError, match="add/remove"):
        get_accountant("pld-poisson").epsilon_of_event(event, 1e-5)  # sampling/adjacency mismatch


@pytest.mark.parametrize(
    "kw",
    [
        dict(sampling=Sampling.POISSON, steps=10, z=1.0),  # no q
        dict(sampling=Sampling.POISSON, steps=10, z=1.0, q=1.5),
        dict(sampling=Sampling.POISSON, steps=0, z=1.0, q=0.1),
        dict(sampling=Sampling.POISSON, steps=10, z=-1.0, q=0.1),
        dict(sampling=Sampling.WITHOUT_REPLACEMENT, steps=10, z=1.0, n=10, l=11),
        dict(sampling=Sampling.WITHOUT_REPLACEMENT, steps=10, z=1.0, q=0.1),
    ],
)
def test_bad_events_are_refused(kw):
    with pytest.raises(ValueError):
        SampledGaussianSteps(**kw)


def test_calibration_on_an_event_solves_for_the_noise_multiplier():
    event = SampledGaussianSteps.poisson(q=0.02, z=1.0, steps=500)
    cal = calibrate_sigma(
        get_accountant("rdp-poisson"), event, target_epsilon=1.5, delta=1e-5, time_budget=REPRODUCIBLE
    )
    assert cal.result.epsilon <= 1.5
    looser = get_accountant("rdp-poisson").epsilon(event.with_noise_multiplier(cal.sigma_x * 0.99), 1e-5)
    assert looser.epsilon > 1.5  # the smallest feasible z, to 1 %
    with pytest.raises(ValueError, match="lambda must be 1"):
        calibrate_sigma(get_accountant("rdp-poisson"), event, target_epsilon=1.5, delta=1e-5, sigma_ratio=2.0)
