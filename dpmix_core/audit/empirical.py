"""Empirical epsilon lower bound of a mixing release (privacy auditing).

Jagielski et al. 2020 ("Auditing differentially private machine learning") and
Nasr et al. 2021: run the mechanism many times on neighbouring datasets D and
D', apply a distinguishing test to each output, and turn its false-positive and
false-negative rates into a lower bound on epsilon that holds with a chosen
confidence. A lower bound above a rigorous accountant's upper bound means the
mechanism (or the accountant) is wrong.

Worst-case-ish neighbours (``audit_dataset``):

* ``"dpmix"`` (without replacement, replace-one, [0,1]^d x one-hot labels):
  n-1 records x = 0, label 0, and a canary x = 1^d, label 1. D' replaces the
  canary by a copy of the others. The feature shift sqrt(d)/l is the full
  [0,1]^d diameter; the label shift is sqrt(2)/l, the unit-box diameter for
  K = 2 (one-hot labels cannot reach sqrt(K) for K > 2, so the audit is weaker
  than the bound there, never invalid).
* ``"poisson"`` (Poisson rate m/n, add/remove-one, Cx = Cy = 1): n-1 records
  x = 0, label 0, and a canary with ||x|| = 1 (every entry 1/sqrt(d)), label 1.
  D' removes the canary; the rate m/n and the divisor m are fixed parameters.

Exact, cheap simulation. In both cases the other records contribute the same
distribution to every released point under D and D', and that contribution is
orthogonal to the canary's (after whitening the features by sigma_x and the
labels by sigma_y). The projection of a released point onto the whitened
canary direction is therefore a sufficient statistic and is distributed exactly
as z = s * b + N(0, 1), where b ~ Bernoulli(p) says whether the canary was
mixed into that point (p = l/n without replacement, m/n Poisson; independent
across the T points, as in ``sample_mixture_indices`` / ``sample_poisson_batches``),
s = ||whitened shift|| / noise_scale, and b = 0 under D'. We simulate z for all
trials x T points at once (numpy, chunked) instead of the full d-dimensional
release; ``tests/test_audit_empirical.py`` checks this against the real
``dpmix`` / ``poisson_mix`` outputs.

Test: the Neyman-Pearson log-likelihood ratio of the T points,
sum_t log(1 - p + p exp(s z_t - s^2/2)); "D" is guessed when it exceeds a
threshold. Threshold selection: each hypothesis gets ``trials`` runs, split in
half. The threshold maximising the (Clopper-Pearson) epsilon bound on the first
half is chosen, and the reported bound is computed on the independent second
half only, so no multiple-comparison correction is needed for the threshold.
The two rates get one-sided Clopper-Pearson upper bounds at level
1 - (1 - confidence)/2 each (union bound), so the reported bound holds with
probability >= ``confidence``:

    eps_lb = max(log((1 - delta - FNR_ub) / FPR_ub), log((1 - delta - FPR_ub) / FNR_ub), 0).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpmix_core.privacy.release import MixingRelease
from dpmix_core.privacy.statement import bound_text
from dpmix_core.resources.limits import audit_cost, check_cost, limits_from_env

if TYPE_CHECKING:  # scipy and the accountants (dp_accounting) load where used: the CLI parser stays cheap
    from dpmix_core.privacy.accountants.base import EpsilonResult

__all__ = [
    "MECHANISMS",
    "audit_mechanism",
    "AuditConfig",
    "AuditResult",
    "audit_dataset",
    "canary_shift",
    "simulated_shift",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "run_audit",
]

MECHANISMS = ("dpmix", "poisson")


def audit_mechanism(release_mechanism: str | None) -> str | None:
    """The audit's mechanism for a release another page made: "dpmix" for DPMix and local perturbation (DPMix with
    l = 1), "poisson" for Poisson mixing; None for those the audit does not simulate (class-centric, DP-CDA's)."""
    return {"dpmix": "dpmix", "local": "dpmix", "poisson": "poisson"}.get(release_mechanism or "")


TEST_NAME = "log-likelihood ratio of the T points along the whitened canary direction"
VIOLATION_TOLERANCE = 1e-6
_CHUNK_ELEMENTS = 2_000_000  # trials x T normals generated at once
_MAX_THRESHOLDS = 512
SHIFT_MAX = 1e100  # s^2 T / 2 stays finite in the log-likelihood ratio for any T


@dataclass(frozen=True)
class AuditConfig:
    """One audit: the release parameters, the neighbours' shape, and the statistics.

    ``l`` is the mix degree (the expected batch size m for ``"poisson"``).
    ``trials`` runs are made on D and ``trials`` on D' (half to pick the
    threshold, half to bound the rates). ``noise_scale`` multiplies the noise
    the simulated mechanism actually adds (0.1 = a deliberately broken
    mechanism) while the accountants see the nominal sigmas.
    """

    mechanism: str
    n: int
    l: int
    T: int
    sigma_x: float
    sigma_y: float
    d: int = 16
    num_classes: int = 2
    trials: int = 10_000
    delta: float = 1e-5
    confidence: float = 0.95
    seed: int | None = 0
    noise_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}. Found {self.mechanism!r}.")
        for name in ("n", "l", "T", "d", "num_classes", "trials"):
            _check_int(name, getattr(self, name), 1)
        if self.num_classes < 2:
            raise ValueError(
                f"num_classes must be at least 2 (canary and others differ in label). Found {self.num_classes}."
            )
        if self.n < 2:
            raise ValueError(f"n must be at least 2 (a canary and at least one other record). Found {self.n}.")
        if self.l > self.n:
            raise ValueError(f"l must not exceed n. Found l={self.l}, n={self.n}.")
        if self.trials < 20:
            raise ValueError(
                f"trials must be at least 20 (half select the threshold, half bound the rates). Found {self.trials}."
            )
        for name in ("sigma_x", "sigma_y", "noise_scale"):
            value = getattr(self, name)
            finite_positive = isinstance(value, numbers.Real) and math.isfinite(value) and float(value) > 0
            if isinstance(value, bool) or not finite_positive:
                raise ValueError(f"{name} must be a positive finite number. Found {value!r}.")
        for name in ("delta", "confidence"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < 1:
                raise ValueError(f"{name} must be in (0, 1). Found {value!r}.")
        if self.seed is not None:
            _check_int("seed", self.seed, 0)

    @property
    def inclusion_probability(self) -> float:
        """p: probability that the canary is mixed into one released point (l/n or m/n)."""
        return self.l / self.n

    def release(self) -> MixingRelease:
        """The release the simulated mechanism makes and the accountants see (nominal sigmas)."""
        if self.mechanism == "dpmix":
            return MixingRelease.dpmix(
                n=self.n, l=self.l, T=self.T, sigma_x=self.sigma_x, sigma_y=self.sigma_y, dx=self.d, dy=self.num_classes
            )
        return MixingRelease.poisson(n=self.n, m=self.l, T=self.T, sigma_x=self.sigma_x, sigma_y=self.sigma_y)


@dataclass(frozen=True)
class AuditResult:
    """The empirical lower bound next to every applicable accountant's epsilon."""

    config: AuditConfig
    release: MixingRelease
    epsilon_lower_bound: float
    confidence: float
    trials: int  # runs per hypothesis (selection + evaluation)
    evaluation_trials: int  # runs per hypothesis used for the reported bound
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    threshold: float
    test: str
    shift: float  # s: whitened canary shift actually simulated (includes noise_scale)
    accountant_epsilons: dict[str, float]
    accountant_results: tuple[EpsilonResult, ...] = field(default=())
    seconds: float = 0.0

    @property
    def rigorous_epsilons(self) -> dict[str, float]:
        return {r.accountant: r.epsilon for r in self.accountant_results if r.upper_bound}

    @property
    def smallest_upper_bound(self) -> float:
        """Smallest rigorous accountant epsilon (inf when none applies)."""
        return min(self.rigorous_epsilons.values(), default=math.inf)

    @property
    def violation(self) -> bool:
        """The lower bound exceeds a rigorous upper bound: mechanism or accountant is wrong."""
        return self.epsilon_lower_bound > self.smallest_upper_bound + VIOLATION_TOLERANCE

    @property
    def reading(self) -> str:
        """One plain paragraph: what the lower bound proves, next to the guarantee (a zero bound is no evidence)."""
        conf = f"{self.confidence:.0%} confidence"
        upper = self.smallest_upper_bound
        if self.violation:
            return (
                f"VIOLATION: the attack proves ε ≥ {self.epsilon_lower_bound:.3g} ({conf}), above the guaranteed "
                f"ε ≤ {bound_text(upper)}: the release leaks more than its accountant claims. With the noise actually "
                "added below the nominal σ this is the expected catch of a buggy mechanism; otherwise the "
                "mechanism or the accountant is wrong."
            )
        if self.epsilon_lower_bound <= 0:
            return (
                f"Consistent, but the test could not tell the two datasets apart at {conf} with "
                f"{self.evaluation_trials:,} evaluation runs each: a lower bound of 0 is no evidence either way. "
                "More trials, less noise, a larger T or a smaller n give the attack more to see."
            )
        guarantee = (
            f"the guarantee says ε ≤ {bound_text(upper)}" if math.isfinite(upper) else "no rigorous guarantee applies"
        )
        return (
            f"Consistent: the attack proves ε ≥ {self.epsilon_lower_bound:.3g} ({conf}) for this worst-case "
            f"canary, and {guarantee}. The true ε of the release lies in between; the gap is how loose the "
            "accountants are here (or that more trials are needed)."
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict; infinite numbers become "inf"."""
        cfg = self.config
        return {
            "mechanism": cfg.mechanism,
            "n": cfg.n,
            "l": cfg.l,
            "T": cfg.T,
            "sigma_x": cfg.sigma_x,
            "sigma_y": cfg.sigma_y,
            "d": cfg.d,
            "num_classes": cfg.num_classes,
            "noise_scale": cfg.noise_scale,
            "seed": cfg.seed,
            "delta": cfg.delta,
            "release": self.release.describe(),
            "epsilon_lower_bound": _json_number(self.epsilon_lower_bound),
            "confidence": self.confidence,
            "trials": self.trials,
            "evaluation_trials": self.evaluation_trials,
            "fpr": self.fpr,
            "fnr": self.fnr,
            "fpr_upper": self.fpr_upper,
            "fnr_upper": self.fnr_upper,
            "threshold": _json_number(self.threshold),
            "test": self.test,
            "shift": _json_number(self.shift),
            "accountant_epsilons": {k: _json_number(v) for k, v in self.accountant_epsilons.items()},
            "rigorous_accountants": sorted(self.rigorous_epsilons),
            "smallest_upper_bound": _json_number(self.smallest_upper_bound),
            "violation": self.violation,
            "reading": self.reading,
            "seconds": self.seconds,
        }


# --------------------------------------------------------------------------- statistics


def clopper_pearson_upper(successes: int | np.ndarray, n: int, alpha: float) -> float | np.ndarray:
    """One-sided Clopper-Pearson upper bound: P(rate <= bound) >= 1 - alpha. 1 when successes == n."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1). Found {alpha}.")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer. Found {n!r}.")
    k = np.asarray(successes, dtype=float)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError(f"successes must lie in [0, {n}].")
    from scipy import stats

    with np.errstate(invalid="ignore"):
        upper = np.where(k >= n, 1.0, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)))
    return float(upper) if upper.ndim == 0 else upper


def epsilon_lower_bound(fpr: float | np.ndarray, fnr: float | np.ndarray, delta: float) -> float | np.ndarray:
    """max(log((1-delta-FNR)/FPR), log((1-delta-FPR)/FNR), 0) (Kairouz et al. 2015; Jagielski et al. 2020).

    Pass upper confidence bounds of the rates for a high-confidence bound.
    A zero rate with a positive numerator gives inf.
    """
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = _safe_log_ratio(1.0 - delta - fnr, fpr)
        b = _safe_log_ratio(1.0 - delta - fpr, fnr)
    out = np.maximum(np.maximum(a, b), 0.0)
    return float(out) if out.ndim == 0 else out


def _safe_log_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.broadcast_arrays(num, den)
    out = np.full(num.shape, -np.inf)
    pos = num > 0
    out[pos & (den <= 0)] = np.inf
    ok = pos & (den > 0)
    out[ok] = np.log(num[ok] / den[ok])
    return out


# --------------------------------------------------------------------------- neighbours and simulation


def audit_dataset(config: AuditConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_D, y_D, X_D', y_D'): the neighbouring datasets the simulation stands for; the canary is row n-1.

    dpmix: uint8 features (0 or 255, i.e. the corners of [0,1]^d). poisson:
    float features, canary with ||x|| = 1 = Cx; D' has n-1 rows.
    """
    n, d = config.n, config.d
    y = np.zeros(n, dtype=np.int64)
    y[-1] = 1
    if config.mechanism == "dpmix":
        X = np.zeros((n, d), dtype=np.uint8)
        X[-1] = 255
        return X, y, np.zeros_like(X), np.zeros_like(y)
    X = np.zeros((n, d), dtype=np.float64)
    X[-1] = 1.0 / math.sqrt(d)
    return X, y, X[:-1].copy(), y[:-1].copy()


def canary_shift(config: AuditConfig) -> float:
    """s: norm of the canary's effect on one released point after whitening by the *actual* noise.

    dpmix: ||(1^d/l / sigma_x, (e_1 - e_0)/l / sigma_y)||; poisson: ||(x_c/m / sigma_x, e_1/m / sigma_y)||.
    """
    if config.mechanism == "dpmix":
        fx, fy = float(config.d), 2.0
    else:
        fx, fy = 1.0, 1.0
    # per block, divided step by step and joined by hypot: sigma**2 overflowed (OverflowError at sigma = 1e300) or
    # underflowed to 0 (ZeroDivisionError at sigma * noise_scale = 1e-300); inf where the shift exceeds a double
    x = math.sqrt(fx) / config.sigma_x / config.noise_scale / config.l
    y = math.sqrt(fy) / config.sigma_y / config.noise_scale / config.l
    return math.hypot(x, y)


def simulated_shift(shift: float) -> float:
    """The shift the simulation uses: s, or SHIFT_MAX above it (an infinite s made every statistic NaN).

    Capping keeps the lower bound valid: x -> (s'/s) x + N(0, 1 - (s'/s)^2) maps N(0, 1) to itself and N(s, 1) to
    N(s', 1) point by point, so the capped release is a post-processing of the real one and any epsilon it proves
    holds for the real one too; at s = 1e100 the canary is found whenever it is mixed in, as at any larger s.
    """
    return min(shift, SHIFT_MAX)


def _llr_statistics(rng: np.random.Generator, trials: int, T: int, p: float, s: float, canary: bool) -> np.ndarray:
    """Sum over T points of log(1 - p + p exp(s z - s^2/2)) for ``trials`` runs (chunked)."""
    out = np.empty(trials)
    log_keep = math.log1p(-p) if p < 1 else -math.inf
    log_p = math.log(p)
    rows = max(1, _CHUNK_ELEMENTS // T)
    for start in range(0, trials, rows):
        k = min(rows, trials - start)
        z = rng.standard_normal((k, T))
        if canary:
            z += s * (rng.random((k, T)) < p)
        np.sum(np.logaddexp(log_keep, log_p + s * z - 0.5 * s * s), axis=1, out=out[start : start + k])
    return out


def _rates(stat_d: np.ndarray, stat_dp: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of false positives (D' runs with stat > tau) and false negatives (D runs with stat <= tau)."""
    fp = stat_dp.size - np.searchsorted(np.sort(stat_dp), thresholds, side="right")
    fn = np.searchsorted(np.sort(stat_d), thresholds, side="right")
    return fp, fn


def run_audit(config: AuditConfig) -> AuditResult:
    """Simulate, pick the threshold on half the runs, bound epsilon on the other half, and ask the accountants.

    Args:
        config: the audit (mechanism, n, l, T, sigmas, trials, delta, confidence, seed, noise_scale); it is
            validated when built.

    Returns:
        An :class:`AuditResult`: the empirical epsilon lower bound (holding with probability >= ``confidence``)
        with the evaluation half's false-positive and false-negative rates (fractions) and their
        Clopper-Pearson upper bounds, the chosen threshold, the simulated whitened shift s, and every
        applicable accountant's epsilon at ``config.delta`` for the nominal release; ``violation`` says
        whether the lower bound exceeds the smallest rigorous upper bound.

    Raises:
        LimitExceeded: (a ValueError) the estimated time of the 2 * trials * T simulated terms is over
            ``DPMIX_MAX_SECONDS`` (or the memory estimate over ``DPMIX_MAX_MEMORY``); lower the trials or T.
        ValueError: a malformed limit in the environment.
    """
    import time

    start = time.perf_counter()
    check_cost(
        audit_cost(trials=config.trials, T=config.T, chunk_values=_CHUNK_ELEMENTS),
        limits_from_env(),
        change="the trials or T",
    )
    release = config.release()
    rng = np.random.default_rng(config.seed)
    p, s, T = config.inclusion_probability, simulated_shift(canary_shift(config)), config.T
    half = config.trials // 2
    rest = config.trials - half
    stat_d = _llr_statistics(rng, config.trials, T, p, s, canary=True)
    stat_dp = _llr_statistics(rng, config.trials, T, p, s, canary=False)
    sel_d, eval_d = stat_d[:half], stat_d[half:]
    sel_dp, eval_dp = stat_dp[:half], stat_dp[half:]
    alpha = (1.0 - config.confidence) / 2.0  # union bound over the two rates

    candidates = np.unique(np.concatenate([sel_d, sel_dp]))
    if candidates.size > _MAX_THRESHOLDS:
        candidates = np.unique(np.quantile(candidates, np.linspace(0, 1, _MAX_THRESHOLDS)))
    candidates = np.concatenate([[-np.inf], candidates])
    fp, fn = _rates(sel_d, sel_dp, candidates)
    sel_eps = epsilon_lower_bound(
        clopper_pearson_upper(fp, half, alpha), clopper_pearson_upper(fn, half, alpha), config.delta
    )
    # ties (e.g. all zero): prefer the threshold with the larger point-estimate separation
    best = int(np.lexsort((-(np.abs(fp - fn)), -np.asarray(sel_eps)))[0])
    threshold = float(candidates[best])

    fp_e, fn_e = _rates(eval_d, eval_dp, np.array([threshold]))
    fpr_ub = float(clopper_pearson_upper(int(fp_e[0]), rest, alpha))
    fnr_ub = float(clopper_pearson_upper(int(fn_e[0]), rest, alpha))
    eps_lb = float(epsilon_lower_bound(fpr_ub, fnr_ub, config.delta))

    from dpmix_core.privacy.accountants import applicable_accountants

    results = tuple(acc.epsilon(release, config.delta) for acc in applicable_accountants(release))
    return AuditResult(
        config=config,
        release=release,
        epsilon_lower_bound=eps_lb,
        confidence=config.confidence,
        trials=config.trials,
        evaluation_trials=rest,
        fpr=int(fp_e[0]) / rest,
        fnr=int(fn_e[0]) / rest,
        fpr_upper=fpr_ub,
        fnr_upper=fnr_ub,
        threshold=threshold,
        test=TEST_NAME,
        shift=s,
        accountant_epsilons={r.accountant: r.epsilon for r in results},
        accountant_results=results,
        seconds=time.perf_counter() - start,
    )


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")


def _json_number(x: float) -> float | str:
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x
