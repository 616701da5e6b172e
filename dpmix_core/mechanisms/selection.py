"""Private selection: the exponential mechanism as Gumbel noisy max, and its one-shot top-k.

A choice among candidates scored on private records (e.g. how many held-out records each candidate's model
classifies correctly) reveals those records unless the choice is randomised. The exponential mechanism
(McSherry & Talwar 2007) picks candidate r with probability proportional to exp(epsilon u(r) / (2 Delta)), where
Delta bounds how much one record changes any score u(r); it is epsilon-DP (Dwork & Roth 2014, Thm 3.10).
Adding independent Gumbel noise of scale 2 Delta / epsilon to every score and taking the largest draws from
exactly that distribution (the Gumbel-max trick); keeping the k largest of one such draw is distributed as k
rounds of the exponential mechanism, each removing its pick (Durfee & Rogers 2019, "Practical differentially
private top-k selection with pay-what-you-get composition", NeurIPS: the one-shot Gumbel top-k), so it is
(k epsilon)-DP by basic composition (Dwork & Roth 2014, Thm 3.16). Only the chosen indices are released: the noisy scores are not
(publishing them is not covered by this epsilon).

Randomness as in every mechanism of this package (see :mod:`dpmix_core.mechanisms`): seeded for reproducible
research runs, not hardened against floating-point side channels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpmix_core.mechanisms.engine import seed_sequence

__all__ = ["SelectionRelease", "gumbel_top_k", "selection_probabilities"]


@dataclass(frozen=True)
class SelectionRelease:
    """What a private selection released: ``k`` of ``candidates`` indices, each round an exponential mechanism at
    ``epsilon`` on scores of sensitivity ``sensitivity``. Pure DP: ``total_epsilon`` = k epsilon, delta 0."""

    candidates: int
    k: int
    epsilon: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        for name in ("candidates", "k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
        if self.k > self.candidates:
            raise ValueError(f"cannot select {self.k} of {self.candidates} candidates.")
        for name in ("epsilon", "sensitivity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"the selection's {name} must be a positive finite number. Found {value!r}.")
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "sensitivity", float(self.sensitivity))

    @property
    def total_epsilon(self) -> float:
        """k rounds of the exponential mechanism at ``epsilon`` each (basic composition; delta 0)."""
        return self.k * self.epsilon

    def describe(self) -> str:
        return (
            f"{'top-' + str(self.k) if self.k > 1 else 'the best'} of {self.candidates} by Gumbel noisy max "
            f"(exponential mechanism, epsilon {self.epsilon:.4g} a pick, sensitivity {self.sensitivity:g}): "
            f"epsilon {self.total_epsilon:.4g}, delta 0"
        )


def _scores(utilities: Sequence[float]) -> np.ndarray:
    u = np.asarray(utilities, dtype=np.float64)
    if u.ndim != 1 or not len(u):
        raise ValueError("private selection needs one score per candidate, at least one candidate.")
    if not np.all(np.isfinite(u)):
        raise ValueError("private selection needs finite scores.")
    return u


def gumbel_top_k(utilities: Sequence[float], release: SelectionRelease, seed: object = None) -> tuple[int, ...]:
    """The indices of the ``release.k`` largest of ``utilities`` + Gumbel(2 Delta / epsilon) noise, best first.

    Distributed as ``k`` peeling rounds of the exponential mechanism at ``release.epsilon`` (module docstring), so
    ``release.total_epsilon``-DP when one record changes every utility by at most ``release.sensitivity``.
    ``seed``: as the mechanisms take it (None: fresh OS entropy).
    """
    u = _scores(utilities)
    if len(u) != release.candidates:
        raise ValueError(f"{len(u)} scores for a selection among {release.candidates} candidates.")
    rng = np.random.default_rng(seed_sequence(seed))
    noisy = u + rng.gumbel(scale=2.0 * release.sensitivity / release.epsilon, size=len(u))
    return tuple(int(i) for i in np.argsort(-noisy, kind="stable")[: release.k])


def selection_probabilities(utilities: Sequence[float], epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Each candidate's probability of being picked by one round of the exponential mechanism,
    softmax(epsilon u / (2 Delta)), computed in log-space (no overflow for large scores)."""
    u = _scores(utilities)
    SelectionRelease(len(u), 1, epsilon, sensitivity)  # checks epsilon and sensitivity
    logits = epsilon * u / (2.0 * sensitivity)
    logits -= logits.max()
    weights = np.exp(logits)
    return weights / weights.sum()
