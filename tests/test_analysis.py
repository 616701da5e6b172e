"""The hand-written formulas against high-precision and independent oracles."""

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from dpmix_core.privacy.analysis.gdp import combined_noise_multiplier, gdp_delta, gdp_epsilon, poisson_clt_mu
from dpmix_core.privacy.analysis.rdp_conversion import classic_rdp_to_dp
from dpmix_core.privacy.analysis.wbk_subsampling import log_gaussian_central_moments, wbk_subsampled_gaussian_rdp


def _mp_log_moment(r: float, k: int) -> float:
    """B(k) = sum_i (-1)^i C(k,i) e^{r i (i-1)}, exactly, in 400-digit arithmetic."""
    with mpmath.workdps(400):
        total = mpmath.fsum(
            (-1) ** i * mpmath.binomial(k, i) * mpmath.exp(mpmath.mpf(r) * i * (i - 1)) for i in range(k + 1)
        )
        return float(mpmath.log(total))


@pytest.mark.parametrize("r", [1e-7, 1e-3, 0.05, 1.2, 40.0])
@pytest.mark.parametrize("k", [2, 4, 6, 20, 64, 100])
def test_central_moments_match_mpmath(r, k):
    ours = log_gaussian_central_moments(r, 100)[k]
    assert ours == pytest.approx(_mp_log_moment(r, k), rel=1e-10, abs=1e-9)


def test_odd_order_moment_can_be_negative():
    """Why DP-CDA's printed B(ceil(j/2)) cannot be right: B at odd order is not a moment."""
    with mpmath.workdps(50):
        b3 = mpmath.fsum(
            (-1) ** i * mpmath.binomial(3, i) * mpmath.exp(mpmath.mpf("0.01") * i * (i - 1)) for i in range(4)
        )
    assert b3 < 0


@pytest.mark.parametrize("gamma", [256 / 60000, 0.01, 0.2])
@pytest.mark.parametrize("sigma", [3.0, 10.0])
def test_wbk_sum_matches_dp_accounting_when_its_extra_min_is_inactive(gamma, sigma):
    """Large sigma: dp_accounting's Thm. 27 reduces to the Thm. 9 sum we implement."""
    r = 1.0 / (2 * sigma**2)
    orders = np.array([2, 3, 5, 8, 16, 32])
    ours = wbk_subsampled_gaussian_rdp(gamma, r, orders)
    theirs = [dpa_rdp._compute_rdp_sample_wor_gaussian_int(gamma, sigma, int(a)) / (a - 1) for a in orders]
    np.testing.assert_allclose(ours, theirs, rtol=1e-8)


def test_classic_conversion_formula():
    eps, order = classic_rdp_to_dp(np.array([2.0, 3.0]), np.array([1.0, 0.5]), 1e-5)
    assert eps == pytest.approx(min(1 + math.log(1e5), 0.5 + math.log(1e5) / 2))
    assert order == 3.0


def test_gdp_published_pair():
    """DPFMix: mu = 0.5016 <=> (eps, delta) = (2, 1e-5)."""
    assert gdp_delta(2.0, 0.5016) == pytest.approx(1e-5, rel=0.02)
    assert gdp_epsilon(1e-5, 0.5016) == pytest.approx(2.0, abs=0.005)


@pytest.mark.parametrize("mu", [0.01, 0.5, 3.0, 30.0])
def test_gdp_round_trip(mu):
    eps = gdp_epsilon(1e-6, mu)
    assert gdp_delta(eps, mu) == pytest.approx(1e-6, rel=1e-6)


def test_gdp_matches_direct_formula():
    mu, eps = 1.3, 0.7
    direct = float(mpmath.ncdf(-eps / mu + mu / 2) - mpmath.e**eps * mpmath.ncdf(-eps / mu - mu / 2))
    assert gdp_delta(eps, mu) == pytest.approx(direct, rel=1e-10)


def test_clt_mu_and_combined_multiplier():
    z = combined_noise_multiplier(1.2, 1.2)
    assert z == pytest.approx(1.2 / math.sqrt(2))
    mu = poisson_clt_mu(64 / 50000, 50000, 0.8440)
    assert mu == pytest.approx(0.5016, abs=5e-4)
    assert poisson_clt_mu(0.1, 10, 1e-3) == math.inf


@pytest.mark.parametrize("mu", [39.9, 40.1, 1e3, 1e80])
def test_gdp_epsilon_large_mu_is_finite_upper_bound(mu):
    eps = gdp_epsilon(1e-5, mu)
    assert math.isfinite(eps) and eps >= mu * mu / 2 - mu * 5
    if mu < 100:
        assert gdp_delta(eps, mu) <= 1e-5 * (1 + 1e-6)


@pytest.mark.parametrize("delta", [1e-300, 1e-100, 1e-20])
def test_gdp_epsilon_at_astronomically_small_delta(delta):
    """ndtri(1 - delta) is inf below 1e-16; the bound uses -ndtri(delta). Checked by 60-digit mpmath."""
    mu = 1.0
    eps = gdp_epsilon(delta, mu)
    with mpmath.workdps(60):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        exact = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    assert math.isfinite(eps) and float(exact) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("z", [1e-198, 1e-100, 1e150, 1e300])
def test_clt_mu_never_raises_across_the_double_range(z):
    mu = poisson_clt_mu(0.01, 100, z)
    with mpmath.workdps(60):
        exact = mpmath.mpf("0.01") * 10 * mpmath.sqrt(mpmath.expm1(1 / mpmath.mpf(z) ** 2))
    assert (mu == math.inf and exact > 1e300) or mu == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize("mu", [0.99e-4, 1e-8, 1e-13, 1e-20, 1e-94, 1e-200])
@pytest.mark.parametrize("delta", [1e-5, 1e-12, 1e-50, 1e-300])
def test_gdp_epsilon_at_tiny_mu_is_a_tight_upper_bound(mu, delta):
    """The two-term delta(eps) cancels to rounding at tiny mu (it gave eps = 0 at mu = 1e-94, delta = 1e-300, where the
    true eps is 3.05e-93): the eps returned must still satisfy delta(eps) <= delta, and be within 1 % of the least
    such eps (400-digit mpmath)."""
    eps = gdp_epsilon(delta, mu)
    with mpmath.workdps(400):
        m = mpmath.mpf(mu)

        def exact(e: float):
            e = mpmath.mpf(e)
            return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)

        assert exact(eps) <= delta * (1 + 1e-12)
        if eps == 0.0:
            assert math.erf(mu / (2 * math.sqrt(2))) <= delta  # delta(0) = 2 Phi(mu/2) - 1 is already small enough
        else:
            assert exact(eps * 0.99) > delta


def test_gdp_epsilon_is_continuous_where_the_tiny_mu_bound_takes_over():
    from dpmix_core.privacy.analysis.gdp import SMALL_MU

    below, above = gdp_epsilon(1e-12, SMALL_MU * (1 - 1e-9)), gdp_epsilon(1e-12, SMALL_MU * (1 + 1e-9))
    assert below == pytest.approx(above, rel=1e-3)
