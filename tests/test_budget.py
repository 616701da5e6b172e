"""A privacy budget across releases: composition checked against dp_accounting directly and against
closed forms of the Gaussian mechanism."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpmix_core.privacy.accountants import MixingSetting, get_accountant
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
