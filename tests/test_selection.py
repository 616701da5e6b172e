"""Private selection (mechanisms.selection): Gumbel noisy max is the exponential mechanism, its one-shot top-k is
k peeling rounds of it, and the probabilities move by at most e^epsilon when one record moves every score by one."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmix_core.mechanisms.selection import SelectionRelease, gumbel_top_k, selection_probabilities

DRAWS = 20_000


def _first_picks(u, epsilon, k=1, seed=0):
    release = SelectionRelease(len(u), k, epsilon)
    rng = np.random.default_rng(seed)
    return [gumbel_top_k(u, release, rng) for _ in range(DRAWS)]


def test_gumbel_noisy_max_draws_from_the_exponential_mechanism():
    u = [10.0, 12.0, 13.0, 9.0]
    eps = 1.0
    picks = np.array([p[0] for p in _first_picks(u, eps)])
    seen = np.bincount(picks, minlength=len(u)) / DRAWS
    # exp(eps u / 2) normalised, written out: the independent oracle of the formula
    w = np.exp(eps * np.array(u) / 2)
    assert np.allclose(selection_probabilities(u, eps), w / w.sum(), rtol=1e-12)
    assert np.abs(seen - w / w.sum()).max() < 0.015  # 20,000 draws: sd of a share <= 0.0036


def test_the_second_of_a_one_shot_top_2_is_the_exponential_mechanism_on_the_rest():
    u = [10.0, 12.0, 13.0, 9.0]
    picks = _first_picks(u, 1.0, k=2, seed=1)
    assert all(len(set(p)) == 2 for p in picks)
    after_2 = [p[1] for p in picks if p[0] == 2]  # the best was picked first: the second is among 0, 1, 3
    seen = np.bincount(after_2, minlength=4) / len(after_2)
    rest = [0, 1, 3]
    expected = np.zeros(4)
    expected[rest] = selection_probabilities([u[i] for i in rest], 1.0)
    assert len(after_2) > 5000 and np.abs(seen - expected).max() < 0.03


def test_a_large_epsilon_picks_the_true_top_k_in_order_and_the_seed_fixes_the_draw():
    u = [3.0, 50.0, 10.0, 40.0]
    release = SelectionRelease(4, 3, 1e4)
    assert gumbel_top_k(u, release, 0) == (1, 3, 2)
    small = SelectionRelease(4, 2, 0.01)
    assert gumbel_top_k(u, small, 7) == gumbel_top_k(u, small, 7)
    assert release.total_epsilon == pytest.approx(3e4) and SelectionRelease(5, 2, 0.25).total_epsilon == 0.5
    assert "top-3 of 4" in release.describe() and "delta 0" in release.describe()


@settings(max_examples=200, deadline=None)
@given(
    u=st.lists(st.integers(0, 5000), min_size=2, max_size=12),
    shift=st.data(),
    eps=st.floats(0.01, 5.0),
)
def test_neighbouring_scores_change_no_probability_by_more_than_e_to_the_epsilon(u, shift, eps):
    # one record added or removed moves every count by at most one (independently): the guarantee's premise
    moves = shift.draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=len(u), max_size=len(u)))
    v = [a + b for a, b in zip(u, moves, strict=True)]
    p, q = selection_probabilities(u, eps), selection_probabilities(v, eps)
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)
    shown = (p > 1e-250) & (q > 1e-250)  # where neither underflowed (exp(-12500) is 0.0 in floats)
    ratio = np.max(np.maximum(p[shown] / q[shown], q[shown] / p[shown]), initial=1.0)
    assert ratio <= math.exp(eps) * (1 + 1e-9)


def test_huge_scores_do_not_overflow():
    p = selection_probabilities([1e9, 1e9 - 1, 0.0], 50.0)
    assert np.all(np.isfinite(p)) and p[0] > p[1] > p[2] >= 0.0
    assert gumbel_top_k([1e300, 0.0], SelectionRelease(2, 1, 1.0), 0) == (0,)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SelectionRelease(3, 4, 1.0), "cannot select 4 of 3"),
        (lambda: SelectionRelease(3, 1, 0.0), "epsilon must be a positive"),
        (lambda: SelectionRelease(3, 1, math.inf), "epsilon must be a positive"),
        (lambda: SelectionRelease(0, 1, 1.0), "candidates must be a positive"),
        (lambda: SelectionRelease(3, 1, 1.0, sensitivity=-1), "sensitivity must be a positive"),
        (lambda: gumbel_top_k([1.0, 2.0], SelectionRelease(3, 1, 1.0)), "2 scores for a selection among 3"),
        (lambda: gumbel_top_k([1.0, math.nan], SelectionRelease(2, 1, 1.0)), "finite scores"),
        (lambda: selection_probabilities([], 1.0), "at least one candidate"),
    ],
)
def test_bad_input_is_a_one_line_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()
