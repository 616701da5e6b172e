"""Privacy profile and trade-off curves against closed forms (Gaussian DP) and the DPFMix number."""

import math

import numpy as np
import pytest
from oracles import mp_poisson_rdp
from scipy.stats import norm

from dpmix_core.privacy.profile import (
    attack_power_bound,
    gdp_mu_for,
    gdp_tradeoff,
    privacy_profile,
    tradeoff_from_profile,
)
from dpmix_core.privacy.release import Adjacency, DataBounds, MixingRelease, Sampling
from dpmix_core.views.privacy_scale import headline


def _gaussian(T: int, z: float, sampling: Sampling) -> MixingRelease:
    """l = n (rate 1): no subsampling, T Gaussian mechanisms with multiplier z: exactly sqrt(T)/z-GDP."""
    bounds = DataBounds.clipped(1.0, 1.0)
    l = 4
    poisson = sampling is Sampling.POISSON
    sens = (1.0 if poisson else 2.0) / l  # add/remove: radius c/m; replace-one: diameter 2c/l
    s = z * math.sqrt(2) * sens  # sigma_x = sigma_y = s on two blocks of sensitivity sens: z = s / (sqrt(2) sens)
    adjacency = Adjacency.ADD_REMOVE_ONE if poisson else Adjacency.REPLACE_ONE
    return MixingRelease(
        n=l, mix_degree=l, num_points=T, sigma_x=s, sigma_y=s, sampling=sampling, adjacency=adjacency, bounds=bounds
    )


def test_gdp_mu_matches_the_dpfmix_conversion():
    assert gdp_mu_for(2.0, 1e-5) == pytest.approx(0.5016, abs=5e-4)  # DPFMix: mu = 0.5016 <=> (2, 1e-5)
    mu = 1.3
    eps = 1.0
    delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert gdp_mu_for(eps, delta) == pytest.approx(mu, rel=1e-6)


@pytest.mark.parametrize("eps", [750.0, 5000.0])
def test_gdp_mu_matches_mpmath_where_e_to_the_eps_overflows(eps):
    """e^eps overflows a float above eps = 709; the matched mu must still satisfy delta(eps) = delta exactly."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 3000
    delta = 1e-5
    mu = gdp_mu_for(eps, delta)
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    exact = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    assert math.isfinite(mu) and float(exact) == pytest.approx(delta, rel=1e-6)


def test_gdp_mu_is_infinite_beyond_its_search_range():
    assert gdp_mu_for(1e12, 1e-5) == math.inf


@pytest.mark.parametrize("sampling", [Sampling.POISSON, Sampling.WITHOUT_REPLACEMENT])
@pytest.mark.parametrize("T, z", [(1, 2.0), (16, 8.0)])
def test_tradeoff_bound_is_below_the_exact_gaussian_curve(T, z, sampling):
    release = _gaussian(T, z, sampling)
    assert release.noise_multiplier() == pytest.approx(z)
    mu = math.sqrt(T) / z
    profile = privacy_profile(release, np.linspace(0.0, 6.0, 121))
    alphas = np.linspace(0.001, 0.999, 200)
    bound = tradeoff_from_profile(profile, alphas)
    exact = gdp_tradeoff(mu, alphas)
    assert np.all(bound <= exact + 1e-9)  # a rigorous lower bound on the attacker's type II error
    # and not vacuous: RDP's conversion costs < 0.1 for a plain Gaussian; WBK's rate-1 bound more
    assert np.max(exact - bound) < (0.1 if sampling is Sampling.POISSON else 0.45)
    # the profile itself bounds the exact Gaussian delta(eps) from above
    for eps, delta in zip(profile.epsilons, profile.deltas):
        exact_delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert delta >= exact_delta - 1e-12


def test_attack_power_bound():
    assert attack_power_bound(0.0, 1e-12, 0.05) == pytest.approx(0.05)
    assert attack_power_bound(math.log(3), 1e-12, 0.05) == pytest.approx(0.15)
    assert attack_power_bound(math.inf, 1e-5) == 1.0
    assert attack_power_bound(1e6, 1e-5) == 1.0


def test_headline_reads_in_words():
    h = headline(1.0, 1e-5, "rdp-wor")
    assert "×2.72" in h.text() or "x2.72" in h.text()
    assert "power above 13.6 %" in h.test  # e * 0.05 + 1e-5
    assert "no test is ruled out" in headline(50.0, 1e-5, "lee2019").test


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 5.0, 15.0, 50.0, 1e9, math.inf])
def test_headline_title_names_protection_once(epsilon):
    h = headline(epsilon, 1e-5, "rdp-wor")
    assert h.title.count("protection") == 1 and h.title[0].isupper()
    assert f"(rdp-wor; {h.title.lower()})" in h.text()  # the sentence names the band as the heading does


def test_profile_agrees_with_the_headline_accountant():
    """The profile at the headline epsilon gives back its delta (same RDP orders as rdp-wor, Python numbers)."""
    from dpmix_core.privacy.accountants import MixingSetting, get_accountant

    acc = get_accountant("rdp-wor")
    release = acc.release_for(MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711))
    eps = acc.epsilon(release, 1e-5).epsilon
    delta_at_eps = privacy_profile(release, [eps]).deltas[0]
    assert 1e-6 < delta_at_eps <= 1.01e-5


def test_profile_is_not_zeroed_by_dp_accountings_rounding_noise():
    """T = 1e12 Poisson steps at q = 0.5, z = 7.07e8: dp_accounting's composed RDP is rounding noise, negative at some
    orders, and its get_delta returned delta = 0 at every eps (a trade-off curve with no attacker at all). The
    profile must stay above the same RDP bound in exact arithmetic: 60-digit mpmath at the integer orders, the
    unsampled Gaussian's T alpha / (2 z^2) at the fractional ones (where dp_accounting's series does not converge)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    from dpmix_core.privacy.events import SampledGaussianSteps
    from dpmix_core.privacy.profile import PROFILE_ORDERS

    q, z, steps = 0.5, 7.07e8, 10**12
    release = SampledGaussianSteps.poisson(q=q, z=z, steps=steps)
    curve = [
        steps * min(mp_poisson_rdp(q, z, int(a)) if a.is_integer() else math.inf, a / (2 * z * z))
        for a in PROFILE_ORDERS
    ]
    epsilons = [0.0, 0.005, 0.01, 0.02]
    profile = privacy_profile(release, epsilons)
    for eps, delta in zip(epsilons, profile.deltas, strict=True):
        assert delta >= rdp.compute_delta(list(PROFILE_ORDERS), curve, eps)[0] * (1 - 1e-9) > 0
