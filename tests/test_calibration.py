import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpmix_core.privacy.accountants import ACCOUNTANTS, MixingSetting, get_accountant
from dpmix_core.privacy.calibration import calibrate_sigma

THESIS = MixingSetting(n=60000, l=256, T=10000, sigma_x=1, sigma_y=1)


def test_thesis_calibration_eps15_gives_sigma_0_0711():
    cal = calibrate_sigma(get_accountant("lee2019"), THESIS, target_epsilon=15.0, delta=1 / 60000)
    assert cal.sigma_x == pytest.approx(0.0711, abs=2e-4)
    assert cal.sigma_y == cal.sigma_x
    assert cal.result.epsilon <= 15.0


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
def test_calibration_never_overshoots_and_is_tight(name):
    acc = get_accountant(name)
    cal = calibrate_sigma(acc, THESIS, target_epsilon=4.0, delta=1e-5, sigma_ratio=2.0)
    assert cal.result.epsilon <= 4.0
    assert cal.sigma_y == pytest.approx(2.0 * cal.sigma_x)
    s = replace(THESIS, sigma_x=cal.sigma_x * 0.99, sigma_y=cal.sigma_y * 0.99)
    assert acc.epsilon(acc.release_for(s), 1e-5).epsilon > 4.0  # 1 % less noise breaks the budget


@given(
    target=st.floats(0.2, 50.0),  # lee2019/dpcda: alpha <= 100 puts a floor log(1/delta)/99 = 0.116
    ratio=st.floats(0.25, 4.0),
    name=st.sampled_from(["lee2019", "dpcda", "gdp-clt", "rdp-poisson", "rdp-wor"]),
)
def test_calibrated_sigma_never_exceeds_target(target, ratio, name):
    acc = get_accountant(name)
    cal = calibrate_sigma(acc, THESIS, target_epsilon=target, delta=1e-5, sigma_ratio=ratio)
    s = replace(THESIS, sigma_x=cal.sigma_x, sigma_y=cal.sigma_y)
    assert acc.epsilon(acc.release_for(s), 1e-5).epsilon <= target


def test_order_range_floor_is_reported_not_hidden():
    """With alpha <= 100 the published accountants cannot certify eps < log(1/delta)/99."""
    with pytest.raises(ValueError, match="out of reach"):
        calibrate_sigma(get_accountant("lee2019"), THESIS, target_epsilon=0.1, delta=1e-5)


def test_unreachable_target_is_a_clear_error():
    tiny = MixingSetting(n=10, l=10, T=10**6, sigma_x=1, sigma_y=1)
    with pytest.raises(ValueError, match="out of reach"):
        calibrate_sigma(get_accountant("lee2019"), tiny, target_epsilon=1e-4, delta=1e-5, sigma_max=10.0)


@pytest.mark.parametrize("target", [0.0, -1.0, math.inf, math.nan])
def test_bad_target(target):
    with pytest.raises(ValueError, match="target epsilon"):
        calibrate_sigma(get_accountant("gdp-clt"), THESIS, target_epsilon=target, delta=1e-5)


def test_bad_ratio():
    with pytest.raises(ValueError, match="lambda"):
        calibrate_sigma(get_accountant("gdp-clt"), THESIS, target_epsilon=1.0, delta=1e-5, sigma_ratio=0.0)
