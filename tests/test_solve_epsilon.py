"""Solve for epsilon (issue #13 §5): invert a stored accuracy-vs-epsilon curve with its error bars."""

import math

import pandas as pd
import pytest

from dpmix_core.experiments.solve_epsilon import (
    ALREADY_REACHED,
    NOT_MONOTONE,
    NOT_REACHED,
    REACHED,
    SAME_EPSILON_RTOL,
    curve_points,
    epsilon_choices,
    invert_curve,
    solvable_series,
    solve_epsilon,
)


def _agg(points, label="mixing", axis="target_epsilon", count=3, extra=None):
    """An aggregated sweep as ``sweep_results`` returns it: (epsilon, mean, std) per point."""
    rows = []
    for eps, mean, std in points:
        row = {
            "label": label,
            "method": "mixing",
            "mechanism": "poisson",
            "axis": axis,
            "axis_value": eps,
            "test_accuracy_mean": mean,
            "test_accuracy_std": std,
            "test_accuracy_count": count,
            "collapsed": 0,
            "runs": count,
            "epsilon_gdp-clt": 0.8 * eps,
            "epsilon_pld-poisson": eps,
        }
        row.update(extra or {})
        rows.append(row)
    return pd.DataFrame(rows)


MONOTONE = [(1.0, 0.80, 0.02), (2.0, 0.86, 0.02), (4.0, 0.90, 0.01), (8.0, 0.92, 0.01)]


def test_monotone_curve_is_inverted_in_log_epsilon_with_a_range():
    ans = solve_epsilon(_agg(MONOTONE), axis="target_epsilon", series="mixing", accuracy=0.88)
    assert ans.status == REACHED and ans.epsilon_name == "target epsilon"
    assert ans.epsilon == pytest.approx(2 * math.sqrt(2))  # half way between 2 and 4 on a log axis
    # upper band (mean+std: 0.88 at eps=2) reaches first; lower band (0.84, 0.89) crosses 0.88 between 2 and 4
    assert ans.epsilon_low == pytest.approx(2.0)
    assert 2.0 < ans.epsilon_high < 4.0 and ans.epsilon_low <= ans.epsilon <= ans.epsilon_high
    assert "ε ≈ 2.83 for 88 % test accuracy" in ans.sentence() and "between 2 and" in ans.sentence()


def test_unreachable_level_says_so_with_the_range():
    ans = solve_epsilon(_agg(MONOTONE), axis="target_epsilon", series="mixing", accuracy=0.95)
    assert ans.status == NOT_REACHED and ans.epsilon is None and ans.epsilon_high is None
    assert "not reached within the sweep's ε range (1 to 8; best 92.0 %)" in ans.sentence()


def test_lower_band_beyond_the_sweep():
    ans = solve_epsilon(_agg(MONOTONE), axis="target_epsilon", series="mixing", accuracy=0.915)
    assert ans.status == REACHED and ans.epsilon_high is None
    assert "above 8 (beyond the sweep)" in ans.sentence()


def test_non_monotone_curve_is_refused_in_words():
    bumpy = [(1.0, 0.80, 0.0), (2.0, 0.90, 0.0), (4.0, 0.85, 0.0), (8.0, 0.93, 0.0)]
    ans = solve_epsilon(_agg(bumpy), axis="target_epsilon", series="mixing", accuracy=0.88)
    assert ans.status == NOT_MONOTONE and ans.epsilon is None
    assert "not monotone" in ans.sentence()
    # a level the curve crosses once, below the bump, is still answered
    assert solve_epsilon(_agg(bumpy), axis="target_epsilon", series="mixing", accuracy=0.82).status == REACHED


def test_level_met_at_the_smallest_epsilon():
    ans = solve_epsilon(_agg(MONOTONE), axis="target_epsilon", series="mixing", accuracy=0.5)
    assert ans.status == ALREADY_REACHED and "already reached at the smallest ε" in ans.sentence()


def test_one_seed_gives_no_range():
    points = [(e, m, math.nan) for e, m, _ in MONOTONE]
    ans = solve_epsilon(_agg(points, count=1), axis="target_epsilon", series="mixing", accuracy=0.88)
    assert ans.status == REACHED and ans.epsilon_low == ans.epsilon == ans.epsilon_high
    assert "no error bar" in ans.sentence()


def test_sigma_axis_reads_an_accountant_column_rigorous_first():
    # a sigma sweep: axis values are sigmas (accuracy falls with sigma), epsilons are in the accountant columns
    rows = _agg(MONOTONE, axis="sigma")
    rows["axis_value"] = [2.0, 1.0, 0.5, 0.25]
    assert epsilon_choices(rows, "sigma") == ["pld-poisson", "gdp-clt"]
    ans = solve_epsilon(rows, axis="sigma", series="mixing", accuracy=0.88)
    assert ans.epsilon_name == "pld-poisson" and ans.epsilon == pytest.approx(2 * math.sqrt(2))
    clt = solve_epsilon(rows, axis="sigma", series="mixing", accuracy=0.88, epsilon_name="gdp-clt")
    assert clt.epsilon == pytest.approx(0.8 * 2 * math.sqrt(2))
    with pytest.raises(ValueError, match="not the target ε"):
        solve_epsilon(rows, axis="sigma", series="mixing", accuracy=0.88, epsilon_name="target epsilon")


def test_baselines_and_collapsed_points_are_not_curves():
    agg = pd.concat(
        [
            _agg(MONOTONE),
            _agg([(math.inf, 0.98, 0.0)], label="non-private"),
            _agg([(1.0, 0.1, 0.0), (2.0, 0.1, 0.0)], label="dead", extra={"collapsed": 3}),
        ]
    )
    assert solvable_series(agg, "target_epsilon", "target epsilon") == ["mixing"]
    with pytest.raises(ValueError, match="fewer than two points"):
        solve_epsilon(agg, axis="target_epsilon", series="non-private", accuracy=0.9)
    with pytest.raises(ValueError, match="no series 'nope'"):
        solve_epsilon(agg, axis="target_epsilon", series="nope", accuracy=0.9)
    with pytest.raises(ValueError, match="fraction"):
        solve_epsilon(agg, axis="target_epsilon", series="mixing", accuracy=90)


def test_collapsed_runs_behind_the_curve_are_counted_and_said():
    """A point whose other runs learned stays on the curve; the answer counts the runs left out of its mean."""
    agg = _agg(MONOTONE)
    clean = solve_epsilon(agg, axis="target_epsilon", series="mixing", accuracy=0.88)
    assert clean.collapsed_runs == 0 and "collapsed" not in clean.sentence()
    partly = agg.assign(collapsed=[2, 0, 1, 0], runs=[3, 3, 3, 3], test_accuracy_count=[1, 3, 2, 3])
    ans = solve_epsilon(partly, axis="target_epsilon", series="mixing", accuracy=0.88)
    assert ans.epsilon == pytest.approx(clean.epsilon)  # the same means: only the words change
    assert ans.collapsed_runs == 3 and ans.to_dict()["collapsed_runs"] == 3
    assert ans.sentence().endswith(
        "3 run(s) of these points collapsed (the model never learned) and are left out of their means: "
        "the curve is what a run that learns reaches."
    )
    dead = pd.concat([agg, _agg([(16.0, 0.1, 0.0)], extra={"collapsed": 3})])  # a point with no result: no count
    assert solve_epsilon(dead, axis="target_epsilon", series="mixing", accuracy=0.88).collapsed_runs == 0


def test_invert_curve_edges():
    assert invert_curve([1.0, 4.0], [0.2, 0.6], 0.4) == (pytest.approx(2.0), True)
    assert invert_curve([1.0, 4.0], [0.2, 0.3], 0.4) == (None, False)
    with pytest.raises(ValueError):
        invert_curve([], [], 0.5)


def test_releases_calibrated_to_one_target_are_one_point_not_a_curve():
    """A sweep along ℓ at eps = 1: each release lands within the calibration's tolerance of 1 (rdp-wor 0.9999992,
    0.9999984, ...), which is one epsilon, not a curve to read off (the page showed "ε range 1 to 1")."""
    agg = _agg([(0.9999992, 0.36, 0.0), (0.9999984, 0.31, 0.0), (0.9999988, 0.12, 0.0)], axis="l")
    agg["axis_value"] = [16.0, 32.0, 256.0]
    assert solvable_series(agg, "l", "pld-poisson") == []
    points, _ = curve_points(agg, "l", "mixing", "pld-poisson")
    assert [p.epsilon for p in points] == [0.9999992]  # the largest: a bound is read on its safe side
    assert points[0].mean == pytest.approx((0.36 + 0.31 + 0.12) / 3)
    apart = _agg([(1.0, 0.5, 0.0), (1.0 * (1 + 2 * SAME_EPSILON_RTOL), 0.6, 0.0)], axis="l")
    apart["axis_value"] = [16.0, 32.0]
    assert solvable_series(apart, "l", "pld-poisson") == ["mixing"]
