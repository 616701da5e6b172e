"""A privacy budget across releases: composition checked against dp_accounting directly and against
closed forms of the Gaussian mechanism."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from oracles import mp_poisson_rdp

from dpmix_core.privacy.accountants import MixingSetting, get_accountant
from dpmix_core.privacy.accountants.rdp_dp_accounting import RDP_ROUNDING
from dpmix_core.privacy.budget import (
    BUDGET_ORDERS,
    _replace_one_curve,
    compose_budget,
    dpsgd_item,
    gaussian_item,
    laplace_label_item,
    mixing_item,
)

THESIS = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)


def test_two_gaussians_compose_like_one_event_of_two():
    delta = 1e-5
    budget = compose_budget(
        [gaussian_item("pca A", noise_multiplier=3.0), gaussian_item("pca B", noise_multiplier=3.0)], delta
    )
    ref = rdp.RdpAccountant(
        orders=[o for o in BUDGET_ORDERS if float(o).is_integer()], neighboring_relation=rdp.NeighborRel.REPLACE_ONE
    )
    ref.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 2))
    assert budget.epsilon == pytest.approx(ref.get_epsilon(delta), rel=1e-9)
    alone = dict(budget.per_item)["pca A"]
    assert alone < budget.epsilon < 2 * alone  # composition costs, but less than adding epsilons


def test_two_mixing_releases_cost_more_than_one():
    acc = get_accountant("rdp-wor")
    item = mixing_item("thesis release", acc.release_for(THESIS))
    once = compose_budget([item], 1 / 60000)
    twice = compose_budget([item, mixing_item("again", acc.release_for(THESIS))], 1 / 60000)
    assert once.epsilon == pytest.approx(acc.epsilon(acc.release_for(THESIS), 1 / 60000).epsilon, rel=0.02)
    assert once.epsilon < twice.epsilon < 2 * once.epsilon


def test_add_remove_items_are_converted_soundly_to_replace_one():
    """A Gaussian with sensitivity 1 under add/remove has replace-one sensitivity 2: exact RDP 2 alpha / z^2."""
    z = 4.0
    item = dpsgd_item("gaussian", n=1, batch_size=1, steps=1, noise_multiplier=z)  # rate 1: a plain Gaussian
    orders = np.arange(2, 40, dtype=float)
    converted = _replace_one_curve(item, orders)
    exact = 2 * orders / z**2
    assert np.all(converted >= exact - 1e-12)
    mixed = compose_budget([item, gaussian_item("pca", noise_multiplier=100.0)], 1e-5)
    assert mixed.relation == "replace-one" and "Prop. 11" in mixed.notes[0]
    # no better than the exact replace-one Gaussian (sensitivity 2) alone
    exact_acc = rdp.RdpAccountant(orders=list(orders), neighboring_relation=rdp.NeighborRel.REPLACE_ONE)
    exact_acc.compose(dp_accounting.GaussianDpEvent(z / 2))
    assert mixed.epsilon >= exact_acc.get_epsilon(1e-5)


def test_label_only_next_to_a_release_protects_nothing_of_the_features():
    acc = get_accountant("rdp-wor")
    budget = compose_budget(
        [laplace_label_item("labels", epsilon=1.0), mixing_item("m", acc.release_for(THESIS))], 1e-5
    )
    assert math.isinf(budget.epsilon) and "publishes features" in budget.notes[0]
    only_labels = compose_budget([laplace_label_item("a", epsilon=1.0), laplace_label_item("b", epsilon=1.0)], 1e-5)
    assert only_labels.epsilon <= 2.0 + 1e-9  # never worse than basic composition of pure DP


def test_bad_budgets_are_refused():
    with pytest.raises(ValueError, match="empty"):
        compose_budget([], 1e-5)
    from dataclasses import replace

    acc = get_accountant("rdp-wor")
    with pytest.raises(ValueError, match="not covered"):
        mixing_item(
            "x", replace(acc.release_for(THESIS), not_covered="normalisation constants computed from the private data")
        )


def test_a_dpsgd_model_in_the_budget_counts_the_steps_the_baseline_takes():
    from dpmix_core.privacy.budget import steps_per_epoch
    from dpmix_core.views.budget import dpsgd_budget_item

    item = dpsgd_budget_item(n=60000, batch_size=256, epochs=15, noise_multiplier=1.1)
    assert item.event.count == steps_per_epoch(60000, 256) * 15 == 234 * 15


def test_dpsgd_item_refuses_impossible_numbers_and_matches_the_dpsgd_event():
    from dpmix_core.privacy.budget import dpsgd_item
    from dpmix_core.training.dpsgd import dpsgd_event

    item = dpsgd_item("model", n=1000, batch_size=50, steps=200, noise_multiplier=1.3)
    assert item.event == dpsgd_event(n=1000, batch_size=50, steps=200, noise_multiplier=1.3).dp_event()
    for kw in (dict(batch_size=2000), dict(n=0), dict(steps=0), dict(noise_multiplier=-1.0)):
        args = dict(n=1000, batch_size=50, steps=200, noise_multiplier=1.3) | kw
        with pytest.raises(ValueError):
            dpsgd_item("model", **args)


def test_a_budget_is_not_zeroed_by_dp_accountings_rounding_noise():
    """T = 1e12 Poisson steps at q = 0.5, z = 7.07e8 (a mixing release at n = 2 or DP-SGD): the one-step RDP (~1e-19)
    is below double resolution, dp_accounting's composed RDP came out negative and the budget's total was 0, alone
    and next to a DP-PCA. The same RDP bound in 60-digit arithmetic is 0.0196 at integer orders <= 256 (the budget's
    replace-one orders) and 0.00156 with the orders an add/remove budget may add (the CLT puts the true eps near
    1e-3)."""
    from dpmix_core.privacy.events import SampledGaussianSteps

    release = SampledGaussianSteps.poisson(q=0.5, z=7.07e8, steps=10**12)
    orders = [int(o) for o in BUDGET_ORDERS if float(o).is_integer()] + [384, 576, 864, 1296, 1944, 2916, 4096]
    rdp_values = [release.steps * mp_poisson_rdp(0.5, 7.07e8, a) for a in orders]
    oracle_256 = rdp.compute_epsilon(orders[:-7], rdp_values[:-7], 1e-5)[0]
    oracle = rdp.compute_epsilon(orders, rdp_values, 1e-5)[0]
    assert oracle_256 == pytest.approx(0.0196, rel=0.01) and oracle == pytest.approx(0.00156, rel=0.01)
    model = dpsgd_item("model", n=2, batch_size=1, steps=10**12, noise_multiplier=7.07e8)
    alone = compose_budget([model], 1e-5)
    assert oracle <= alone.epsilon <= oracle + release.steps * RDP_ROUNDING  # T * 8 ulp of rounding allowance
    assert dict(alone.per_item)["model"] == alone.epsilon
    with_pca = compose_budget([model, gaussian_item("pca", noise_multiplier=1e9)], 1e-5)
    assert with_pca.epsilon >= oracle_256  # stated for replace-one: orders <= 256


def test_a_tiny_label_only_epsilon_is_not_zeroed_by_rounding():
    """Laplace at eps = 1e-17: dp_accounting's RDP eps + log1p(...)/(alpha - 1) cancelled to a negative number and the
    budget said 0 at delta = 1e-30; (0, delta)-DP needs delta >= 1 - e^(-eps/2) ~ 5e-18 (the Laplace profile
    delta(e) = 1 - e^((e - eps)/2)), so the exact eps there is eps + 2 log(1 - delta) ~ 1e-17."""
    import mpmath

    budget = compose_budget([laplace_label_item("labels", epsilon=1e-17)], 1e-30)
    with mpmath.workdps(80):
        exact = mpmath.mpf(1e-17) + 2 * mpmath.log1p(-mpmath.mpf(1e-30))
    assert float(exact) <= budget.epsilon <= 1e-17 * (1 + 1e-12)
    assert dict(budget.per_item)["labels"] > 0


def test_a_small_add_remove_budget_extends_its_orders_like_rdp_poisson():
    """z = 200, q = 64/60000, T = 60000 (rdp-poisson: 0.00317 at order 1944; 0.0197 at orders <= 256): the budget of
    that release alone matches the accountant, and two of them cost more, both below the orders-<=-256 floor, the
    second checked against 60-digit mpmath at the budget's orders and those it may add."""
    acc = get_accountant("rdp-poisson")
    release = acc.release_for(MixingSetting(n=60000, l=64, T=60000, sigma_x=200.0, sigma_y=200.0))
    item = mixing_item("release", release)
    once = compose_budget([item], 1e-5)
    assert once.epsilon == pytest.approx(acc.epsilon(release, 1e-5).epsilon, rel=1e-6)
    twice = compose_budget([item, mixing_item("again", release)], 1e-5)
    q, z = release.sampling_rate, release.noise_multiplier()
    ints = [int(o) for o in BUDGET_ORDERS if float(o).is_integer()] + [384, 576, 864, 1296, 1944, 2916, 4096]
    oracle, order = rdp.compute_epsilon(ints, [2 * release.num_points * mp_poisson_rdp(q, z, a) for a in ints], 1e-5)
    assert order > 256 and once.epsilon < twice.epsilon <= oracle * (1 + 1e-6)
    assert twice.epsilon == pytest.approx(oracle, rel=0.02)  # fractional orders may only tighten it
