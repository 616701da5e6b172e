"""DP events: what the generic accountants see of a release.

dp_accounting's idea: a release is data (a ``DpEvent``) and accountants consume it. Every
generic accountant here (rdp-poisson, pld-poisson, rdp-wor, gdp-clt) depends on a release
only through T steps of a subsampled Gaussian with noise multiplier z and sampling rate q
(l/n without replacement, m/n Poisson). :class:`MixingRelease` is such a release once its
sensitivities are whitened into z (DPFMix Lemma 2.2); DP-SGD (Abadi et al. 2016) is one
directly, with q = B/n, z the noise multiplier and T the number of steps. This module is
that common view: :class:`SampledGaussianSteps` is built from its parameters or parsed
from a ``dp_accounting`` event (:func:`SampledGaussianSteps.from_dp_event`), so a
mechanism that is not a mixing release never has to pose as one.

The papers' closed forms (lee2019, dpcda) are stated for mixing releases and accept only
:class:`MixingRelease`; ``Accountant.epsilon`` says so when given an event.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from dpmix_core.privacy.checks import check_positive_int
from dpmix_core.privacy.release import Adjacency, Protects, Sampling

if TYPE_CHECKING:  # dp_accounting (and scipy) load in the methods that need them: ~1 s of import time
    import dp_accounting

__all__ = ["AccountedRelease", "SampledGaussianSteps", "UnsupportedEventError"]


class UnsupportedEventError(ValueError):
    """A dp_accounting event that is not T steps of one subsampled Gaussian."""


class AccountedRelease(Protocol):
    """What an accountant reads of a release: a :class:`MixingRelease` or a :class:`SampledGaussianSteps`."""

    @property
    def sampling(self) -> Sampling: ...
    @property
    def adjacency(self) -> Adjacency: ...
    @property
    def sampling_rate(self) -> float: ...
    @property
    def num_points(self) -> int: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def protects(self) -> Protects: ...
    @property
    def not_covered(self) -> str | None: ...
    @property
    def covered(self) -> bool: ...
    def noise_multiplier(self) -> float: ...
    def gaussian_rdp_coefficient(self) -> float: ...
    def dp_event(self) -> dp_accounting.DpEvent: ...
    def describe(self) -> str: ...


@dataclass(frozen=True)
class SampledGaussianSteps:
    """T = ``steps`` compositions of a subsampled Gaussian with noise multiplier z (sensitivity 1).

    Poisson sampling (add/remove-one, as DP-SGD and Opacus account): rate ``q``.
    Without replacement (replace-one, WBK 2019): ``l`` of ``n`` records, rate l/n.
    ``mechanism`` names what this is (e.g. "DP-SGD, batch 256 of n = 60000") for every label.
    """

    sampling: Sampling
    steps: int
    z: float
    q: float | None = None
    n: int | None = None
    l: int | None = None
    mechanism: str = "subsampled Gaussian"

    def __post_init__(self) -> None:
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"Unknown sampling scheme {self.sampling!r}.")
        check_positive_int("steps", self.steps)
        if isinstance(self.z, bool) or not isinstance(self.z, numbers.Real) or math.isnan(self.z) or self.z < 0:
            raise ValueError(f"noise multiplier z must be >= 0. Found {self.z!r}.")
        if self.sampling is Sampling.POISSON:
            q = self.q
            if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 < q <= 1:
                raise ValueError(f"Poisson sampling needs a rate 0 < q <= 1. Found {q!r}.")
            if self.n is not None or self.l is not None:
                raise ValueError("Poisson sampling is described by its rate q alone; leave n and l unset.")
        else:
            if self.n is None or self.l is None:
                raise ValueError("Sampling without replacement needs the pool size n and the sample size l.")
            check_positive_int("n", self.n)
            check_positive_int("l", self.l)
            if self.l > self.n:
                raise ValueError(f"l must not exceed n. Found l={self.l}, n={self.n}.")
            if self.q is not None:
                raise ValueError("Sampling without replacement has rate l/n; leave q unset.")
        if not (isinstance(self.mechanism, str) and self.mechanism.strip()):
            raise ValueError(f"mechanism must name what was released. Found {self.mechanism!r}.")

    @classmethod
    def poisson(cls, *, q: float, z: float, steps: int, mechanism: str = "Poisson-subsampled Gaussian"):
        """T steps of the Poisson-subsampled Gaussian (DP-SGD's event: Abadi et al. 2016)."""
        return cls(Sampling.POISSON, steps, z, q=q, mechanism=mechanism)

    @classmethod
    def dpsgd(
        cls, *, n: int, batch_size: int, steps: int, noise_multiplier: float, mechanism: str | None = None
    ) -> SampledGaussianSteps:
        """DP-SGD's event (Abadi et al. 2016): ``steps`` Poisson-sampled Gaussian steps at q = B/n.

        The clipping norm does not enter (z is noise std over clipping norm). ValueError for B > n or a
        non-positive n, B or step count.
        """
        check_positive_int("n", n)
        check_positive_int("batch size B", batch_size)
        if batch_size > n:
            raise ValueError(f"DP-SGD batch size must not exceed n. Found B={batch_size}, n={n}.")
        name = mechanism or f"DP-SGD (batch {batch_size} of n = {n}, per-sample clipping)"
        return cls.poisson(q=batch_size / n, z=noise_multiplier, steps=steps, mechanism=name)

    @classmethod
    def from_dp_event(cls, event: dp_accounting.DpEvent, mechanism: str | None = None) -> SampledGaussianSteps:
        """Parse SelfComposed(PoissonSampled(q, Gaussian(z)), T) or its without-replacement twin.

        A bare sampled event counts as T = 1. Any other event (a composition of
        different mechanisms, Laplace, ...) is an :class:`UnsupportedEventError`:
        the generic accountants here analyse one subsampled Gaussian.
        """
        import dp_accounting

        steps, inner = 1, event
        if isinstance(inner, dp_accounting.SelfComposedDpEvent):
            steps, inner = int(inner.count), inner.event
        q: float | None = None
        n: int | None = None
        l: int | None = None
        if isinstance(inner, dp_accounting.PoissonSampledDpEvent):
            base, q, sampling = inner.event, float(inner.sampling_probability), Sampling.POISSON
        elif isinstance(inner, dp_accounting.SampledWithoutReplacementDpEvent):
            base, sampling = inner.event, Sampling.WITHOUT_REPLACEMENT
            n, l = int(inner.source_dataset_size), int(inner.sample_size)
        else:
            raise UnsupportedEventError(
                f"expected T steps of a subsampled Gaussian; found {type(inner).__name__} "
                "(compose different releases with dpmix_core.privacy.budget instead)"
            )
        if isinstance(base, dp_accounting.GaussianDpEvent):
            z = float(base.noise_multiplier)
        elif isinstance(base, dp_accounting.NonPrivateDpEvent):
            z = 0.0
        else:
            raise UnsupportedEventError(f"expected a Gaussian inside the sampling; found {type(base).__name__}.")
        name = mechanism or f"{sampling.value}-subsampled Gaussian"
        return cls(sampling, steps, z, q=q, n=n, l=l, mechanism=name)

    # ---- the AccountedRelease view ------------------------------------------------------------
    @property
    def adjacency(self) -> Adjacency:
        """Poisson: add/remove-one (the relation its accountants bound); without replacement: replace-one."""
        return Adjacency.ADD_REMOVE_ONE if self.sampling is Sampling.POISSON else Adjacency.REPLACE_ONE

    @property
    def sampling_rate(self) -> float:
        if self.sampling is Sampling.POISSON:
            assert self.q is not None  # checked in __post_init__
            return self.q
        assert self.n is not None and self.l is not None
        return self.l / self.n

    @property
    def num_points(self) -> int:
        """The number of composed steps (T)."""
        return self.steps

    @property
    def notes(self) -> tuple[str, ...]:
        return ()

    @property
    def protects(self) -> Protects:
        """A neighbour changes one whole record (features and label)."""
        return Protects.FEATURES_AND_LABELS

    @property
    def not_covered(self) -> str | None:
        """Nothing outside the accountants' assumptions: the event is exactly what they analyse."""
        return None

    @property
    def covered(self) -> bool:
        return True

    def noise_multiplier(self) -> float:
        return float(self.z)

    def gaussian_rdp_coefficient(self) -> float:
        """r with base Gaussian RDP eps(alpha) = alpha * r = alpha / (2 z^2); inf without noise."""
        return math.inf if self.z == 0 else 0.5 / (float(self.z) * float(self.z))

    def with_noise_multiplier(self, z: float) -> SampledGaussianSteps:
        return replace(self, z=z)

    def dp_event(self) -> dp_accounting.DpEvent:
        import dp_accounting

        base: dp_accounting.DpEvent = (
            dp_accounting.GaussianDpEvent(self.z) if self.z > 0 else dp_accounting.NonPrivateDpEvent()
        )
        if self.sampling is Sampling.POISSON:
            sampled = dp_accounting.PoissonSampledDpEvent(self.sampling_rate, base)
        else:
            assert self.n is not None and self.l is not None
            sampled = dp_accounting.SampledWithoutReplacementDpEvent(self.n, self.l, base)
        return dp_accounting.SelfComposedDpEvent(sampled, self.steps)

    def describe(self) -> str:
        rate = (
            f"Poisson sampling (rate q={self.sampling_rate:.4g})"
            if self.sampling is Sampling.POISSON
            else f"without-replacement sampling (l={self.l} of n={self.n})"
        )
        return (
            f"{self.mechanism}: {rate}, {self.adjacency.value} adjacency protecting the whole record, "
            f"noise multiplier z={self.z:.4g}, T={self.steps} steps"
        )
