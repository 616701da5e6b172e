"""Membership inference (loss-threshold attack) on models trained from the real records or from a release."""

import math

import numpy as np
import pytest

from dpmix_core.audit.membership import (
    attack_advantage,
    attack_auc,
    default_configs,
    membership_inference,
    membership_table,
)
from dpmix_core.data import load_embedded
from dpmix_core.synthesis.pipeline import SynthesisConfig


@pytest.fixture(scope="module")
def ds():
    return load_embedded()


def _brute_auc(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    lower = (a[:, None] < b[None, :]).sum()
    ties = (a[:, None] == b[None, :]).sum()
    return (lower + 0.5 * ties) / (a.size * b.size)


def _brute_adv(a, b):
    best = 0.0
    for t in np.concatenate([a, b]):
        best = max(best, np.mean(a <= t) - np.mean(b <= t))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_auc_and_advantage_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 8, size=rng.integers(1, 40)).astype(float)  # many ties
    b = rng.integers(0, 8, size=rng.integers(1, 40)).astype(float) + rng.integers(0, 2)
    assert math.isclose(attack_auc(a, b), _brute_auc(a, b), abs_tol=1e-12)
    adv, thr = attack_advantage(a, b)
    assert math.isclose(adv, _brute_adv(a, b), abs_tol=1e-12)
    if adv > 0:
        assert math.isclose(np.mean(a <= thr) - np.mean(b <= thr), adv, abs_tol=1e-12)


def test_auc_extremes():
    assert attack_auc([0.1, 0.2], [1.0, 2.0]) == 1.0
    assert attack_auc([1.0, 2.0], [0.1, 0.2]) == 0.0
    assert attack_auc([1.0, 1.0], [1.0]) == 0.5
    assert attack_advantage([0.1, 0.2], [1.0, 2.0])[0] == 1.0
    assert attack_advantage([1.0, 2.0], [0.1, 0.2]) == (0.0, -math.inf)
    with pytest.raises(ValueError, match="at least one"):
        attack_auc([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        attack_auc([np.nan], [1.0])


def test_overfitted_non_private_model_leaks(ds):
    res = membership_inference(ds, setting="non-private", members=200, epochs=200, seed=1)
    assert res.members == 200 and res.nonmember_losses.shape == (200,)
    assert res.train_accuracy > 0.97
    assert res.gap > 0.1
    assert res.auc > 0.6
    assert res.advantage > 0.15
    assert res.epsilon == {} and res.epsilon_label() == "inf (non-private)"


def test_mixing_with_large_noise_gives_chance_auc(ds):
    syn = SynthesisConfig("dpmix", l=16, T=1000, sigma_x=2.0, sigma_y=2.0)
    res = membership_inference(ds, setting="mixing", synthesis=syn, members=500, epochs=20, seed=0)
    assert abs(res.auc - 0.5) < 0.1
    assert abs(res.gap) < 0.1
    assert res.released_points == 1000 and res.sigma_x == 2.0
    assert res.epsilon and all(0 < v < math.inf for v in res.epsilon.values())
    assert set(res.epsilon) >= {"rdp-wor"}


def test_deterministic_and_seed_sensitive(ds):
    kw = dict(setting="non-private", members=100, epochs=3)
    a, b = membership_inference(ds, seed=5, **kw), membership_inference(ds, seed=5, **kw)
    np.testing.assert_array_equal(a.member_losses, b.member_losses)
    np.testing.assert_array_equal(a.nonmember_losses, b.nonmember_losses)
    assert a.auc == b.auc
    c = membership_inference(ds, seed=6, **kw)
    assert not np.array_equal(a.member_losses, c.member_losses)


def test_test_split_nonmembers(ds):
    res = membership_inference(ds, setting="non-private", members=100, epochs=2, nonmembers="test")
    assert res.nonmember_source == "test" and res.nonmember_losses.shape == (100,)


def test_table_default_rows(ds):
    table = membership_table(ds, configs=default_configs(T=500), members=300, epochs=3)
    assert list(table.columns) == [
        "label",
        "setting",
        "epsilon",
        "epsilon_min",
        "AUC",
        "advantage",
        "train acc",
        "test acc",
        "gap",
        "seconds",
    ]
    assert len(table) == 4
    assert table["epsilon"][0] == "inf (non-private)" and table["epsilon"][1] == "inf (no noise)"
    assert math.isclose(table["epsilon_min"][2], 8.0, rel_tol=1e-3)
    assert math.isclose(table["epsilon_min"][3], 1.0, rel_tol=1e-3)
    assert ((table["AUC"] >= 0) & (table["AUC"] <= 1)).all()
    np.testing.assert_allclose(table["gap"], table["train acc"] - table["test acc"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(setting="dp-sgd"), "setting must be one of"),
        (dict(setting="mixing"), "needs a SynthesisConfig"),
        (dict(setting="non-private", synthesis=SynthesisConfig("dpmix", sigma_x=0.1)), "synthesis=None"),
        (dict(setting="mixing", synthesis=SynthesisConfig("label-laplace")), "label-laplace"),
        (dict(setting="non-private", model="resnet"), "model must be one of"),
        (dict(setting="non-private", epochs=0), "epochs must be"),
        (dict(setting="non-private", members=1), "members must be"),
        (dict(setting="non-private", members=2001), "2\\*members <= n_train"),
        (dict(setting="non-private", members=1001, nonmembers="test"), "members <= test records"),
        (dict(setting="non-private", nonmembers="val"), "nonmembers must be one of"),
        (dict(setting="non-private", lr=0.0), "lr must be"),
    ],
)
def test_bad_inputs(ds, kwargs, match):
    with pytest.raises(ValueError, match=match):
        membership_inference(ds, **kwargs)


def test_bad_inputs_table_and_dataset(ds):
    with pytest.raises(ValueError, match="at least one"):
        membership_table(ds, configs=[])
    with pytest.raises(ValueError, match="tuple"):
        membership_table(ds, configs=[("x", "non-private")])
    with pytest.raises(ValueError, match="Dataset"):
        membership_inference(np.zeros((4, 4)), setting="non-private")
