"""Lesson 5 (teaching.public_bounds): the DP mean's noise follows the public bounds; a private range first keeps it
small, and the two parts together are exactly (epsilon, delta)-DP, checked with dp_accounting's PLD."""

import math

import dp_accounting
import numpy as np
import pytest

from dpmix_core.privacy.budget import add_remove_pld_epsilon
from dpmix_core.synthesis.private_ranges import range_noise_multiplier
from dpmix_core.teaching.public_bounds import BOUNDS_HIGHS, bounds_figure, bounds_lesson, survey_ages

AGES = survey_ages(1000)


@pytest.fixture(scope="module")
def lesson():
    return bounds_lesson(AGES, epsilon=1.0, draws=60)


def _column(lesson, method: str, name: str) -> np.ndarray:
    return lesson.rows[lesson.rows["method"] == method][name].to_numpy()


def test_without_a_range_the_noise_is_proportional_to_the_bounds(lesson):
    noise = _column(lesson, "public bounds as they are", "noise std (years)")
    np.testing.assert_allclose(noise / noise[0], np.array(BOUNDS_HIGHS) / BOUNDS_HIGHS[0])
    error = _column(lesson, "public bounds as they are", "error (RMSE)")
    np.testing.assert_allclose(error, noise, rtol=0.35)  # unbiased (no age is clipped): the error is the noise


def test_a_private_range_keeps_the_error_near_the_ages_whatever_the_bounds(lesson):
    ranged = _column(lesson, "private range first", "error (RMSE)")
    plain = _column(lesson, "public bounds as they are", "error (RMSE)")
    assert ranged.max() < 15  # the ages' scale (sd 12) at every width: a range now and then lands on part of them
    assert plain[-1] / ranged[-1] > 100  # at (0, 1e6) orders of magnitude better
    assert ranged[0] > plain[0]  # at (0, 100) the bounds fit: the range only costs
    sentences = " ".join(lesson.sentences())
    assert "times smaller" in sentences and "it costs" in sentences and "exactly" in sentences


@pytest.mark.parametrize(("epsilon", "share"), [(1.0, 0.1), (4.0, 0.3), (0.5, 0.05)])
def test_the_range_and_the_mean_together_spend_exactly_the_target(epsilon, share):
    """The lesson's noise: the ranges' multiplier (replace-one, sensitivity sqrt(2)) and the mean's sigma over its
    sensitivity (b - a) / n, recovered from a one-row lesson; composed by dp_accounting's PLD as two Gaussians they
    give back the target epsilon (to the PLD's discretisation), not less and not more."""
    one = bounds_lesson(AGES, epsilon=epsilon, range_share=share, highs=(1000.0,), draws=1)
    row = one.rows[one.rows["method"] == "private range first"].iloc[0]
    low, high = (float(v.replace(",", "")) for v in row["bounds the mean used (median)"].strip("()").split(", "))
    z_mean = row["noise std (years)"] / ((high - low) / len(AGES))
    z_ranges = range_noise_multiplier(share * epsilon, 1e-5, "replace-one") / math.sqrt(2.0)  # per unit sensitivity
    event = dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(z_ranges), dp_accounting.GaussianDpEvent(z_mean)]
    )
    assert add_remove_pld_epsilon(event, 1e-5) == pytest.approx(epsilon, rel=2e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(values=np.array([1.0, -2.0])), ">= 0"),
        (dict(values=np.zeros((2, 2))), "1-D"),
        (dict(range_share=1.0), "range share"),
        (dict(highs=(0.0,)), "positive and finite"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(draws=0), "draws"),
    ],
)
def test_bad_settings_are_one_line(kwargs, message):
    args = {"values": AGES, "epsilon": 1.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        bounds_lesson(**args)


def test_the_figure_draws_both_lines_on_log_axes(lesson):
    fig = bounds_figure(lesson)
    assert [t.name for t in fig.data] == ["public bounds as they are", "private range first"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_the_ages_are_seeded():
    assert np.array_equal(survey_ages(500, 3), survey_ages(500, 3)) and not np.array_equal(
        survey_ages(500, 3), survey_ages(500, 4)
    )
