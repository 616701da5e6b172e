"""Empirical epsilon lower bounds (privacy auditing): statistics, soundness, power, CLI helpers."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
from scipy import stats

from dpmix_core.audit import (
    AuditConfig,
    audit_dataset,
    canary_shift,
    clopper_pearson_upper,
    epsilon_lower_bound,
    run_audit,
)
from dpmix_core.cli.audit import add_audit_arguments, cli_audit
from dpmix_core.mechanisms.mixing import dpmix, poisson_mix
from dpmix_core.privacy.release import MixingRelease

# --------------------------------------------------------------------------- statistics


def test_clopper_pearson_matches_scipy_and_known_values():
    # zero successes: closed form 1 - alpha^(1/n)
    assert clopper_pearson_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)
    assert clopper_pearson_upper(10, 10, 0.05) == 1.0
    # scipy's exact binomial test gives the same one-sided interval
    ci = stats.binomtest(7, 50).proportion_ci(confidence_level=0.95, method="exact")
    two_sided_upper = ci.high
    assert clopper_pearson_upper(7, 50, 0.025) == pytest.approx(two_sided_upper, rel=1e-9)
    arr = clopper_pearson_upper(np.array([0, 5, 50]), 50, 0.05)
    assert arr.shape == (3,) and np.all(np.diff(arr) > 0) and arr[-1] == 1.0
    # covers the point estimate
    assert clopper_pearson_upper(30, 100, 0.05) > 0.3


def test_epsilon_lower_bound_formula_and_monotonicity():
    assert epsilon_lower_bound(0.01, 0.5, 0.0) == pytest.approx(math.log(0.5 / 0.01))
    assert epsilon_lower_bound(0.5, 0.01, 0.0) == pytest.approx(math.log(0.5 / 0.01))  # symmetric
    assert epsilon_lower_bound(0.5, 0.5, 1e-5) == 0.0  # coin flip: nothing learnt
    assert epsilon_lower_bound(0.0, 0.5, 0.0) == math.inf
    assert epsilon_lower_bound(1.0, 1.0, 0.0) == 0.0
    fprs = np.linspace(0.001, 0.4, 50)
    eps = epsilon_lower_bound(fprs, 0.3, 1e-5)
    assert np.all(np.diff(eps) <= 0)  # more false positives, weaker bound
    assert epsilon_lower_bound(0.01, 0.3, 0.1) < epsilon_lower_bound(0.01, 0.3, 1e-5)  # delta absorbs mass


# --------------------------------------------------------------------------- the simulation is the mechanism


def _projection(config: AuditConfig, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Released points projected onto the whitened canary direction (unit noise, shift s when included)."""
    sx, sy, l = config.sigma_x, config.sigma_y, config.l
    k = config.num_classes
    if config.mechanism == "dpmix":
        wx = np.ones(config.d) / l
        wy = (np.eye(k)[1] - np.eye(k)[0]) / l
        y = y - np.eye(k)[0]  # the others' constant label
    else:
        wx = np.ones(config.d) / math.sqrt(config.d) / l
        wy = np.eye(k)[1] / l  # the others' label e_0 is orthogonal
    s = canary_shift(config)
    return (x.astype(float) @ wx / sx**2 + y.astype(float) @ wy / sy**2) / s


@pytest.mark.parametrize("mechanism", ["dpmix", "poisson"])
def test_simulated_statistic_matches_real_mechanism(mechanism):
    config = AuditConfig(mechanism=mechanism, n=8, l=2, T=20_000, sigma_x=1.0, sigma_y=0.8, d=4, trials=20)
    X, y, Xp, yp = audit_dataset(config)
    p, s = config.inclusion_probability, canary_shift(config)
    cases = [((X, y), p * s, 1 + p * (1 - p) * s * s)]
    if mechanism == "dpmix":  # poisson_mix takes its rate from len(X); D' (n-1 rows) is the N(0, 1) null anyway
        cases.append(((Xp, yp), 0.0, 1.0))
    for data, mean, var in cases:
        if mechanism == "dpmix":
            rows, dim = data[0].shape
            release = MixingRelease.dpmix(n=rows, l=2, T=config.T, sigma_x=1.0, sigma_y=0.8, dx=dim, dy=2)
            out = dpmix(*data, num_classes=2, release=release, seed=1)
        else:
            release = MixingRelease.poisson(n=len(data[0]), m=2, T=config.T, sigma_x=1.0, sigma_y=0.8)
            out = poisson_mix(*data, num_classes=2, release=release, seed=1)
        proj = _projection(config, out.x, out.y)
        se = math.sqrt(var / config.T)
        assert abs(proj.mean() - mean) < 5 * se
        assert proj.var() == pytest.approx(var, rel=0.05)
        assert out.release.sensitivities() == config.release().sensitivities()


def test_audit_dataset_respects_the_release_bounds():
    for mechanism in ("dpmix", "poisson"):
        config = AuditConfig(mechanism=mechanism, n=10, l=2, T=1, sigma_x=1.0, sigma_y=1.0, d=9, trials=20)
        X, y, Xp, yp = audit_dataset(config)
        bounds = config.release().bounds
        if mechanism == "dpmix":
            assert X.dtype == np.uint8 and Xp.shape == X.shape
            diff = (X[-1].astype(float) - Xp[-1]) / 255
            assert np.linalg.norm(diff) <= bounds.x.diameter + 1e-12
        else:
            assert Xp.shape[0] == X.shape[0] - 1
            assert np.linalg.norm(X, axis=1).max() <= bounds.x.radius + 1e-12
        assert y[-1] == 1 and np.all(y[:-1] == 0)


# --------------------------------------------------------------------------- soundness and power


@pytest.mark.parametrize(
    "mechanism,n,l,T,sigma",
    [
        ("dpmix", 20, 1, 1, 1.0),
        ("dpmix", 50, 2, 3, 1.5),
        ("dpmix", 100, 4, 5, 1.0),
        ("poisson", 20, 1, 1, 1.0),
        ("poisson", 50, 2, 3, 0.5),
    ],
)
def test_correct_mechanism_never_exceeds_any_rigorous_accountant(mechanism, n, l, T, sigma):
    config = AuditConfig(mechanism=mechanism, n=n, l=l, T=T, sigma_x=sigma, sigma_y=sigma, trials=10_000, seed=3)
    result = run_audit(config)
    assert result.rigorous_epsilons, "an applicable rigorous accountant is needed for the comparison"
    for name, eps in result.rigorous_epsilons.items():
        assert result.epsilon_lower_bound <= eps, f"lower bound {result.epsilon_lower_bound} above {name} {eps}"
    assert not result.violation
    assert math.isfinite(result.epsilon_lower_bound)


def test_audit_is_informative_on_the_correct_mechanism():
    result = run_audit(AuditConfig(mechanism="dpmix", n=20, l=1, T=1, sigma_x=1.0, sigma_y=1.0, trials=10_000))
    assert result.epsilon_lower_bound > 1.0  # a real, non-trivial lower bound


@pytest.mark.parametrize(
    "mechanism,n,l,T,sigma",
    [("dpmix", 20, 1, 1, 4.0), ("dpmix", 50, 2, 3, 3.0), ("poisson", 20, 1, 1, 1.0)],
)
def test_broken_mechanism_is_flagged(mechanism, n, l, T, sigma):
    kw = dict(mechanism=mechanism, n=n, l=l, T=T, sigma_x=sigma, sigma_y=sigma, trials=10_000, seed=0)
    good = run_audit(AuditConfig(**kw))
    broken = run_audit(AuditConfig(**kw, noise_scale=0.1))
    assert not good.violation
    assert broken.violation
    assert broken.epsilon_lower_bound > broken.smallest_upper_bound
    assert broken.accountant_epsilons == good.accountant_epsilons  # the claim uses the nominal sigma


def test_deterministic_under_seed():
    cfg = dict(mechanism="dpmix", n=20, l=1, T=2, sigma_x=1.0, sigma_y=1.0, trials=2_000)
    a = run_audit(AuditConfig(**cfg, seed=7)).to_json()
    b = run_audit(AuditConfig(**cfg, seed=7)).to_json()
    c = run_audit(AuditConfig(**cfg, seed=8)).to_json()
    for out in (a, b, c):
        out.pop("seconds")
    assert a == b
    assert (a["fpr"], a["fnr"]) != (c["fpr"], c["fnr"])


@pytest.mark.parametrize(
    "mechanism, sigma_x, sigma_y, scale",
    [
        ("poisson", 1e300, 1e300, 1.0),  # sigma**2 raised OverflowError
        ("dpmix", 0.0711, 1e300, 1.0),
        ("poisson", 1e-300, 1e-300, 1.0),  # 1e-300**2 = 0: ZeroDivisionError
        ("dpmix", 1.0, 1.0, 1e-300),
        ("dpmix", 1e-200, 1.0, 1e-200),  # shift above the largest double: inf
        ("dpmix", 1.0, 1.0, 1e300),
    ],
)
def test_canary_shift_at_extreme_noise_matches_mpmath(mechanism, sigma_x, sigma_y, scale):
    import mpmath

    config = AuditConfig(mechanism, n=5, l=2, T=3, sigma_x=sigma_x, sigma_y=sigma_y, noise_scale=scale, trials=20)
    fx, fy = (16, 2) if mechanism == "dpmix" else (1, 1)
    with mpmath.workdps(50):
        sx, sy = mpmath.mpf(sigma_x) * scale, mpmath.mpf(sigma_y) * scale
        exact = mpmath.sqrt(fx / sx**2 + fy / sy**2) / 2
    s = canary_shift(config)
    assert (math.isinf(s) and exact > 1.8e308) or s == pytest.approx(float(exact), rel=1e-12)


def test_audit_at_vanishing_and_huge_noise_answers():
    """sigma = 1e300 (Poisson) raised OverflowError and sigma * noise_scale = 1e-300 ZeroDivisionError, both as a
    traceback from the CLI; sigma = 1e-160 gave s = inf and NaN statistics (a lower bound of 0.67 where sigma = 1e-100
    proves 2.99). The simulated shift is capped at SHIFT_MAX (a post-processing of the real release)."""
    from dpmix_core.audit.empirical import SHIFT_MAX

    cfg = dict(mechanism="dpmix", n=5, l=2, T=3, trials=200)
    huge = run_audit(AuditConfig("poisson", n=5, l=2, T=3, sigma_x=1e300, sigma_y=1e300, trials=200))
    assert huge.epsilon_lower_bound == 0.0 and huge.shift < 1e-299
    tiny = run_audit(AuditConfig(**cfg, sigma_x=1.0, sigma_y=1.0, noise_scale=1e-300))
    vanishing = run_audit(AuditConfig(**cfg, sigma_x=1e-160, sigma_y=1e-160))
    small = run_audit(AuditConfig(**cfg, sigma_x=1e-100, sigma_y=1e-100))
    assert tiny.shift == vanishing.shift == small.shift == SHIFT_MAX
    assert tiny.epsilon_lower_bound == vanishing.epsilon_lower_bound == small.epsilon_lower_bound > 2.5


# --------------------------------------------------------------------------- inputs and output


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(mechanism="laplace"), "mechanism must be one of"),
        (dict(l=30), "l must not exceed n"),
        (dict(n=1, l=1), "n must be at least 2"),
        (dict(trials=10), "trials must be at least 20"),
        (dict(sigma_x=0.0), "sigma_x must be a positive finite number"),
        (dict(sigma_y=float("inf")), "sigma_y must be a positive finite number"),
        (dict(noise_scale=-1.0), "noise_scale must be a positive finite number"),
        (dict(delta=0.0), "delta must be in"),
        (dict(confidence=1.0), "confidence must be in"),
        (dict(T=0), "T must be an integer"),
        (dict(num_classes=1), "num_classes must be at least 2"),
        (dict(l=1.5), "l must be an integer"),
    ],
)
def test_invalid_inputs_raise_clear_value_errors(kw, message):
    base = dict(mechanism="dpmix", n=20, l=2, T=1, sigma_x=1.0, sigma_y=1.0, trials=100)
    base.update(kw)
    with pytest.raises(ValueError, match=message):
        AuditConfig(**base)


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_audit_arguments(parser)
    return parser.parse_args(argv)


def test_cli_json_output(capsys):
    args = _parse(
        [
            "--mechanism",
            "poisson",
            "--n",
            "20",
            "--l",
            "1",
            "--T",
            "2",
            "--sigma-x",
            "1",
            "--sigma-y",
            "1",
            "--trials",
            "2000",
            "--seed",
            "1",
            "--json",
        ]
    )
    assert cli_audit(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"epsilon_lower_bound", "confidence", "accountant_epsilons", "violation"} <= set(out)
    assert out["confidence"] == 0.95
    assert set(out["accountant_epsilons"]) == {"gdp-clt", "rdp-poisson", "pld-poisson"}
    assert out["violation"] is False


def test_cli_text_output_and_bad_input(capsys):
    args = _parse(
        [
            "--mechanism",
            "dpmix",
            "--n",
            "20",
            "--l",
            "1",
            "--T",
            "1",
            "--sigma-x",
            "4",
            "--sigma-y",
            "4",
            "--trials",
            "10000",
            "--noise-scale",
            "0.1",
        ]
    )
    assert cli_audit(args) == 0
    text = capsys.readouterr().out
    assert "empirical epsilon lower bound" in text and "rdp-wor" in text and "VIOLATION" in text
    bad = _parse(["--mechanism", "dpmix", "--n", "5", "--l", "6", "--T", "1", "--sigma-x", "1", "--sigma-y", "1"])
    with pytest.raises(ValueError, match="l must not exceed n"):
        cli_audit(bad)


def test_to_json_writes_inf_as_string():
    result = run_audit(AuditConfig(mechanism="dpmix", n=20, l=1, T=1, sigma_x=1e-3, sigma_y=1e-3, trials=100))
    out = result.to_json()
    json.dumps(out, allow_nan=False)
    assert isinstance(out["epsilon_lower_bound"], float)


@pytest.mark.parametrize(
    ("n", "sigma", "scale", "opening"),
    [
        (20, 4.0, 1.0, "Consistent, but the test could not tell"),  # p = 0.05, s ≈ 1: nothing detectable
        (5, 4.0, 1.0, "Consistent: the attack proves"),
        (5, 4.0, 0.1, "VIOLATION: the attack proves"),
    ],
)
def test_reading_says_what_the_bound_proves(n, sigma, scale, opening):
    result = run_audit(
        AuditConfig(mechanism="dpmix", n=n, l=1, T=1, sigma_x=sigma, sigma_y=sigma, trials=4000, noise_scale=scale)
    )
    assert result.reading.startswith(opening)
    assert (result.epsilon_lower_bound == 0) == ("no evidence" in result.reading)
    assert result.violation == ("leaks more" in result.reading)
    if result.epsilon_lower_bound > 0:
        assert f"ε ≥ {result.epsilon_lower_bound:.3g}" in result.reading
    assert result.to_json()["reading"] == result.reading
