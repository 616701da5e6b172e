"""Noise-corrected least squares: a linear model fitted in closed form to a release, knowing its feature noise.

Model ``corrected-lsq``. A mixing release adds Gaussian noise of a *published* scale ``sigma_x`` to every
coordinate of every released point (the privacy card states it). Least squares on the noisy points solves

    (X^T X) W = X^T Y,   with  E[X^T X] = S + n sigma_x^2 I   (S: the Gram of the noise-free mixtures),

so the noise acts as a ridge penalty of strength ``n sigma_x^2`` — at epsilon = 1 on MNIST features far above most
of S's eigenvalues, which drowns the directions that tell the classes apart (gradient training on the noisy points
inherits the same penalty: input noise is Tikhonov regularisation, Bishop 1995). The method-of-moments
("corrected") estimator of the measurement-error literature (Fuller 1987, *Measurement Error Models*: known error
variance) removes it: ``S_hat = X^T X - n sigma_x^2 I``. ``S_hat`` is not positive definite (the noise's
Marchenko–Pastur spread puts many of its eigenvalues below zero), so its eigenvalues are floored:

    W = V diag(1 / max(lambda_i - n sigma_x^2, tau n sigma_x^2)) V^T X^T Y,     (X, Y centred; b from the means)

with the floor ``tau`` chosen on the release's own held-out points by the *noise-corrected* squared error

    R(W) = mean ||y_val - W^T x_val - b||^2 - sigma_x^2 ||W||_F^2,

which is unbiased for the squared error on noise-free inputs (the held-out noise is independent of W), while
the plain held-out error (or accuracy on the noisy held-out points) rewards models that tolerate input noise
rather than models that are right on clean records. Labels' noise needs no correction: it enters X^T Y linearly.

Unbiased is not precise: for a small floor ||W|| is large, R is the difference of two large numbers, and its
estimate can land far below any possible value (seen: -1265 for a fit whose test accuracy was 17 %, while the
largest floor scored 6.2 and 74 %). The largest floor (the most regular fit) is always a candidate; any other floor is *eligible* only when

* its estimate is plausible: minus ``PLAUSIBLE_SES`` standard errors it is still at least the labels' own noise,
  k sigma_y^2 (no fit's squared error on the released labels can be below it), and
* the held-out points tell it from the most regular fit: its per-point corrected errors minus those of the
  largest floor, on the same points, have a mean more than ``DETERMINED_SES`` standard errors from zero (a
  paired comparison: the noise the two share cancels).

The floor chosen is the candidate with the least R.

Why a linear map of mixtures serves single records: mixing averages records and their labels with the same
weights, so if y ~ W^T x + b for records, then y_bar ~ W^T x_bar + b for their mixtures (Poisson mixing divides
by the expected m: the intercept then scales with |batch| / m, whose mean is 1, and is fitted on centred data).

Privacy: a function of the release and of its published ``sigma_x`` and ``sigma_y`` only, i.e. post-processing:
no epsilon is spent, held-out points included. With ``sigma_x = 0`` (real records, a noise-free release) it is
least squares with the same eigenvalue floor (a ridge-like regulariser, scale ``trace(X^T X) / d``) chosen on the
held-out split by the plain squared error.

Cost: O(n d^2) for the Gram (in row blocks, float64) and O(d^3) for one eigendecomposition, shared by every
floor: ``MAX_FEATURES`` bounds d (the Gram alone is 8 d^2 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dpmix_core.mechanisms import check_features
from dpmix_core.privacy.checks import check_positive, check_sigma

__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_FLOORS",
    "MAX_FEATURES",
    "LinearFit",
    "corrected_least_squares",
    "corrected_risk",
    "floor_scale",
    "gram_statistics",
]

DEFAULT_FLOORS = (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)  # tau: eigenvalue floors (floor_scale units)
PLAUSIBLE_SES = 2.0  # a floor's risk estimate must stay above the label noise k sigma_y^2 by this many standard errors
DETERMINED_SES = 2.0  # ... and differ from the largest floor's (paired) by more than this many standard errors
DEFAULT_FLOOR = 0.1  # tau without held-out points to choose on (the middle of the grid; not tuned on test data)
MAX_FEATURES = 8192  # d above this: the d x d Gram (8 d^2 bytes) and its O(d^3) eigendecomposition are refused
_BLOCK_ROWS = 4096  # rows converted to float64 at a time while the Gram is summed


@dataclass(frozen=True)
class LinearFit:
    """A fitted linear map ``x -> x @ weight + bias`` and how its floor was chosen.

    ``weight`` (d, k) and ``bias`` (k,) as float64; ``floor`` is the chosen tau; ``scores`` maps every tau
    tried to its held-out corrected risk (empty when no held-out split was given: ``floor`` is then the only
    floor given, or DEFAULT_FLOOR), ``score_errors`` their standard errors and ``ineligible`` the floors not
    eligible for the choice (implausibly low, or not told from the largest floor: module docstring);
    ``sigma_x`` the noise scale corrected for; ``train_mse`` the plain mean squared error on the (noisy) points
    fitted, >= 0 (in-sample, the corrected risk would be biased low: the fit has seen those points' noise).
    """

    weight: np.ndarray
    bias: np.ndarray
    floor: float
    sigma_x: float
    train_mse: float
    scores: dict[float, float] = field(default_factory=dict)
    score_errors: dict[float, float] = field(default_factory=dict)
    ineligible: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.weight.ndim != 2 or self.bias.shape != (self.weight.shape[1],):
            raise ValueError(f"weight must be (d, k) and bias (k,). Found {self.weight.shape} and {self.bias.shape}.")

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs (n, k) for rows x (n, d)."""
        return np.asarray(x, dtype=np.float64) @ self.weight + self.bias


def gram_statistics(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Centred moments of the fitted points: (mean x (d,), mean y (k,), X_c^T X_c (d, d), X_c^T Y_c (d, k)), float64.

    Summed over row blocks, so a float32 release is never copied whole into float64.
    """
    x, y = check_features(x, name="x"), check_features(y, name="y")
    if len(x) != len(y):
        raise ValueError(f"x and y need the same number of rows. Found {len(x)} and {len(y)}.")
    n, d = x.shape
    mx = x.mean(axis=0, dtype=np.float64)
    my = y.mean(axis=0, dtype=np.float64)
    gram = np.zeros((d, d))
    cross = np.zeros((d, y.shape[1]))
    for start in range(0, n, _BLOCK_ROWS):
        xb = x[start : start + _BLOCK_ROWS].astype(np.float64) - mx
        gram += xb.T @ xb
        cross += xb.T @ (y[start : start + _BLOCK_ROWS].astype(np.float64) - my)
    return mx, my, gram, cross


def floor_scale(n: int, sigma_x: float, gram: np.ndarray) -> float:
    """The unit of the eigenvalue floor: n sigma_x^2 (the noise's ridge), or trace(gram)/d without noise."""
    if sigma_x > 0:
        return float(n) * float(sigma_x) ** 2
    return max(float(np.trace(gram)) / gram.shape[0], np.finfo(float).tiny)


def corrected_risk(pred: np.ndarray, y: np.ndarray, weight: np.ndarray, sigma_x: float) -> float:
    """Mean squared error of ``pred`` against ``y`` minus sigma_x^2 ||weight||_F^2: unbiased for noise-free inputs."""
    return float(np.mean(_corrected_errors(pred, y, weight, sigma_x)))


def _corrected_errors(pred: np.ndarray, y: np.ndarray, weight: np.ndarray, sigma_x: float) -> np.ndarray:
    """Per row: squared error minus sigma_x^2 ||weight||_F^2 (their mean is :func:`corrected_risk`)."""
    err = np.asarray(pred, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    return np.sum(err**2, axis=1) - float(sigma_x) ** 2 * float(np.sum(weight**2))


def _standard_error(values: np.ndarray) -> float:
    """Sample standard deviation / sqrt(rows); 0 for one row."""
    return float(np.std(values, ddof=1)) / np.sqrt(len(values)) if len(values) > 1 else 0.0


def corrected_least_squares(
    x: np.ndarray,
    y: np.ndarray,
    *,
    sigma_x: float,
    sigma_y: float = 0.0,
    floors: Sequence[float] = DEFAULT_FLOORS,
    x_val: np.ndarray | None = None,
    y_val: np.ndarray | None = None,
) -> LinearFit:
    """Fit ``y ~ x @ W + b`` by least squares with the Gram corrected for feature noise sigma_x (module docstring).

    Args:
        x, y: the fitted points (n, d) and their targets (n, k) (noisy soft labels of a release, one-hot labels
            of real records, or a numeric target as one column).
        sigma_x: the published standard deviation of the Gaussian noise on every coordinate of x (0: none).
        sigma_y: the same for y (0: none, or not Gaussian, e.g. argmax labels); the least possible risk is
            k sigma_y^2.
        floors: the eigenvalue floors tau to try (units of :func:`floor_scale`), each > 0.
        x_val, y_val: held-out points of the same release; the eligible floor with the least
            :func:`corrected_risk` on them is kept (module docstring). Without them: the floor when ``floors``
            has one, else DEFAULT_FLOOR.

    Raises:
        ValueError: shapes that do not match, non-finite values, a negative or non-finite sigma, a floor <= 0,
            or more than MAX_FEATURES columns.
    """
    sigma_x, sigma_y = check_sigma("sigma_x", sigma_x), check_sigma("sigma_y", sigma_y)
    if not floors:
        raise ValueError("floors must be one or more positive numbers. Found none.")
    floors = tuple(check_positive("floor", f) for f in floors)
    x = check_features(x, name="x")
    if x.shape[1] > MAX_FEATURES:
        raise ValueError(
            f"corrected least squares needs a {x.shape[1]} x {x.shape[1]} Gram matrix and its eigendecomposition; "
            f"refused above {MAX_FEATURES} features (use a gradient-trained model)."
        )
    validation: tuple[np.ndarray, np.ndarray] | None = None
    if x_val is not None and y_val is not None and len(x_val) > 0:
        xv_rows, yv_rows = check_features(x_val, name="x_val"), check_features(y_val, name="y_val")
        if xv_rows.shape[1] != x.shape[1] or yv_rows.shape[1] != np.shape(y)[1] or len(xv_rows) != len(yv_rows):
            raise ValueError(
                f"held-out points must match the fitted ones: x_val {xv_rows.shape}, y_val {yv_rows.shape} "
                f"for x {x.shape}, y {np.shape(y)}."
            )
        validation = (xv_rows, yv_rows)
    mx, my, gram, cross = gram_statistics(x, y)
    n = len(x)
    eigenvalues, vectors = np.linalg.eigh(gram)
    projected = vectors.T @ cross
    unit = floor_scale(n, sigma_x, gram)
    corrected = eigenvalues - n * sigma_x**2

    def solve(tau: float) -> tuple[np.ndarray, np.ndarray]:
        weight = vectors @ (projected / np.maximum(corrected, tau * unit)[:, None])
        return weight, my - mx @ weight

    scores: dict[float, float] = {}
    errors: dict[float, float] = {}
    ineligible: tuple[float, ...] = ()
    if validation is not None:
        xv, yv = np.asarray(validation[0], dtype=np.float64), validation[1]
        per_row = {}
        for tau in floors:
            weight, bias = solve(tau)
            per_row[tau] = _corrected_errors(xv @ weight + bias, yv, weight, sigma_x)
            scores[tau], errors[tau] = float(np.mean(per_row[tau])), _standard_error(per_row[tau])
        regular = max(floors)
        least = np.shape(y)[1] * sigma_y**2  # the labels' own noise: no fit's risk is below it

        def eligible(t: float) -> bool:
            if t == regular:  # the most regular fit: the yardstick, always a candidate
                return True
            plausible = scores[t] - PLAUSIBLE_SES * errors[t] >= least
            paired = _standard_error(per_row[t] - per_row[regular])  # same points: their common noise cancels
            return plausible and abs(scores[t] - scores[regular]) > DETERMINED_SES * paired

        ineligible = tuple(t for t in floors if not eligible(t))
        best = min((t for t in floors if t not in ineligible), key=lambda t: (scores[t], -t))
    else:
        best = floors[0] if len(floors) == 1 else DEFAULT_FLOOR
    weight, bias = solve(best)
    train_pred = np.concatenate(
        [x[s : s + _BLOCK_ROWS].astype(np.float64) @ weight + bias for s in range(0, n, _BLOCK_ROWS)]
    )
    train_mse = float(np.mean(np.sum((train_pred - np.asarray(y, dtype=np.float64)) ** 2, axis=1)))
    return LinearFit(weight, bias, best, sigma_x, train_mse, scores, errors, ineligible)
