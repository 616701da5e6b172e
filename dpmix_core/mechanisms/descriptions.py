"""What a non-mixing mechanism released: Laplace and Gaussian releases described as data.

Mixing mechanisms are described by :class:`dpmix_core.privacy.release.MixingRelease`;
the classical mechanisms here (label-only Laplace, DP statistics, Analyze-Gauss
PCA) carry their own guarantee, so their description *is* the epsilon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpmix_core.mechanisms._checks import check_delta, check_epsilon, check_positive, check_positive_int

if TYPE_CHECKING:  # scipy and dp_accounting are imported where used: importing the mechanisms stays cheap
    import dp_accounting

__all__ = [
    "GAUSSIAN_METHODS",
    "LABEL_TASKS",
    "GaussianRelease",
    "LaplaceLabelRelease",
    "LaplaceRelease",
    "gaussian_sigma",
    "gaussian_delta",
]

GAUSSIAN_METHODS = ("classic", "analytic")
LABEL_TASKS = ("classification", "regression")


def gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float, method: str = "classic") -> float:
    """Noise std for (eps, delta)-DP: classic = Delta*sqrt(2 ln(1.25/delta))/eps (Dwork & Roth 2014, Thm. A.1; eps < 1); analytic = Balle & Wang 2018, Thm. 8.

    Args:
        epsilon: positive and finite; below 1 for "classic".
        delta: in (0, 1).
        sensitivity: Delta_2, the L2 sensitivity of the statistic (positive, finite), in its units.
        method: "classic" or "analytic" (the smallest sigma whose exact delta(eps) is <= delta, found by root
            finding to a relative 1e-12 and never below; floored at 1e-12 * Delta).

    Returns:
        sigma, the standard deviation of the Gaussian noise per coordinate, in the statistic's units.

    Raises:
        ValueError: epsilon, delta or sensitivity out of range; epsilon >= 1 with "classic"; an unknown method.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive("sensitivity", sensitivity)
    if method == "classic":
        if epsilon >= 1:
            raise ValueError(
                f"The classic Gaussian mechanism bound (Dwork & Roth Thm. A.1) holds only for epsilon < 1. "
                f"Found epsilon={epsilon}; use method='analytic' (Balle & Wang 2018), exact for every epsilon."
            )
        return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    if method == "analytic":
        if gaussian_delta(epsilon=epsilon, sigma=sensitivity * 1e-12, sensitivity=sensitivity) <= delta:
            return sensitivity * 1e-12
        hi = sensitivity
        while gaussian_delta(epsilon=epsilon, sigma=hi, sensitivity=sensitivity) > delta:
            hi *= 2.0
        lo = hi / 2.0
        while lo > sensitivity * 1e-12 and gaussian_delta(epsilon=epsilon, sigma=lo, sensitivity=sensitivity) <= delta:
            lo /= 2.0
        from scipy.optimize import brentq

        root = brentq(
            lambda s: gaussian_delta(epsilon=epsilon, sigma=s, sensitivity=sensitivity) - delta,
            lo,
            hi,
            xtol=1e-12 * hi,
            rtol=1e-12,
        )
        # brentq may land a hair below the root; step up until the guarantee holds
        while gaussian_delta(epsilon=epsilon, sigma=root, sensitivity=sensitivity) > delta:
            root *= 1 + 1e-12
        return float(root)
    raise ValueError(f"method must be one of {GAUSSIAN_METHODS}. Found {method!r}.")


def gaussian_delta(*, epsilon: float, sigma: float, sensitivity: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism: Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) (Balle & Wang 2018, Thm. 8)."""
    from scipy.special import log_ndtr

    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return max(0.0, math.exp(log_ndtr(a - b)) - math.exp(epsilon + log_ndtr(-a - b)))


class _LaplaceNoise:
    """What every Laplace release shares: scale Delta/eps, delta = 0, the dp_accounting event."""

    epsilon: float
    sensitivity: float

    @property
    def scale(self) -> float:
        """Laplace scale b = Delta_1 / eps (std = sqrt(2) b)."""
        return self.sensitivity / self.epsilon

    @property
    def delta(self) -> float:
        return 0.0

    @property
    def accountant(self) -> str:
        """The analysis that certifies epsilon, as a privacy card names it: the Laplace mechanism's own."""
        return "laplace"

    @property
    def guarantee(self) -> str:
        """What epsilon is, in the words of a privacy card's guarantee column."""
        return "rigorous upper bound: pure epsilon-DP by construction (Laplace mechanism)"

    def dp_event(self) -> dp_accounting.DpEvent:
        import dp_accounting

        return dp_accounting.LaplaceDpEvent(self.scale / self.sensitivity)


@dataclass(frozen=True)
class LaplaceRelease(_LaplaceNoise):
    """A statistic plus Laplace(Delta_1/eps) noise per coordinate: pure eps-DP (Dwork et al. 2006)."""

    epsilon: float
    sensitivity: float  # L1 sensitivity of the statistic under the stated adjacency
    what: str

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_positive("sensitivity", self.sensitivity)
        if not isinstance(self.what, str) or not self.what.strip():
            raise ValueError(f"what must describe the released statistic. Found {self.what!r}.")

    def describe(self) -> str:
        return (
            f"{self.what}: Laplace noise, scale {self.scale:.4g} (L1 sensitivity {self.sensitivity:.4g}), "
            f"{self.epsilon:g}-DP"
        )


@dataclass(frozen=True)
class GaussianRelease:
    """A statistic plus N(0, sigma^2) noise per coordinate: (eps, delta)-DP for L2 sensitivity Delta_2.

    ``method`` says which analysis certifies sigma: "classic" (Dwork & Roth Thm. A.1,
    eps < 1) or "analytic" (Balle & Wang 2018). sigma below the one that analysis
    requires is rejected: the description never claims more than the noise gives.
    """

    epsilon: float
    delta: float
    sensitivity: float  # L2 sensitivity of the statistic under the stated adjacency
    sigma: float
    what: str
    method: str = "classic"

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        check_positive("sensitivity", self.sensitivity)
        check_positive("sigma", self.sigma)
        if not isinstance(self.what, str) or not self.what.strip():
            raise ValueError(f"what must describe the released statistic. Found {self.what!r}.")
        needed = gaussian_sigma(
            epsilon=self.epsilon, delta=self.delta, sensitivity=self.sensitivity, method=self.method
        )
        if self.sigma < needed * (1 - 1e-9):
            raise ValueError(
                f"sigma={self.sigma:.6g} is below the {needed:.6g} that the {self.method} analysis needs for "
                f"({self.epsilon:g}, {self.delta:g})-DP at sensitivity {self.sensitivity:.6g}."
            )

    @classmethod
    def calibrated(
        cls, *, epsilon: float, delta: float, sensitivity: float, what: str, method: str = "classic"
    ) -> GaussianRelease:
        """The release with the smallest sigma the chosen analysis certifies.

        Args:
            epsilon: positive and finite; below 1 for "classic".
            delta: in (0, 1).
            sensitivity: Delta_2, the statistic's L2 sensitivity under the stated adjacency.
            what: a description of the released statistic (non-empty), shown by :meth:`describe`.
            method: "classic" or "analytic" (see :func:`gaussian_sigma`).

        Returns:
            A :class:`GaussianRelease` whose ``sigma`` is :func:`gaussian_sigma` of these arguments.

        Raises:
            ValueError: as :func:`gaussian_sigma`, or an empty ``what``.
        """
        sigma = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity, method=method)
        return cls(epsilon, delta, sensitivity, sigma, what, method)

    @property
    def accountant(self) -> str:
        """The analysis that certifies epsilon, as a privacy card names it: "classic-gaussian" or
        "analytic-gaussian"."""
        return f"{self.method}-gaussian"

    @property
    def guarantee(self) -> str:
        """What epsilon is, in the words of a privacy card's guarantee column."""
        return f"rigorous upper bound: (epsilon, delta)-DP by construction (the {self.method} Gaussian analysis)"

    def dp_event(self) -> dp_accounting.DpEvent:
        import dp_accounting

        return dp_accounting.GaussianDpEvent(self.sigma / self.sensitivity)

    def describe(self) -> str:
        return (
            f"{self.what}: Gaussian noise, sigma {self.sigma:.4g} (L2 sensitivity {self.sensitivity:.4g}), "
            f"({self.epsilon:g}, {self.delta:g})-DP by the {self.method} analysis"
        )


@dataclass(frozen=True)
class LaplaceLabelRelease(_LaplaceNoise):
    """Label-only Laplace (MNIST label-DP project): labels + Laplace(Delta_f/eps); pure eps-DP for the labels only.

    Neighbouring datasets differ in one record's label (n and the features are
    public and released as they are). Classification: one-hot labels, Delta_f = 2
    (L1 distance of two one-hot vectors). Regression: labels 0..K-1 as numbers,
    Delta_f = K - 1 (9 for digits).
    """

    epsilon: float
    sensitivity: float
    n: int
    task: str

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_positive("sensitivity", self.sensitivity)
        check_positive_int("n", self.n)
        if self.task not in LABEL_TASKS:
            raise ValueError(f"task must be one of {LABEL_TASKS}. Found {self.task!r}.")

    @property
    def guarantee(self) -> str:
        """What epsilon is, in the words of a privacy card's guarantee column: the labels' only."""
        return "rigorous upper bound (labels only; features not private): pure epsilon-DP (Laplace mechanism)"

    def describe(self) -> str:
        return (
            f"label-only Laplace ({self.task}), n={self.n}: scale {self.scale:.4g} = {self.sensitivity:g}/eps, "
            f"{self.epsilon:g}-DP for the labels; features are not private"
        )
