"""The accountant interface: a release goes in, an honest epsilon comes out."""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from dpmix_core.privacy.checks import check_delta
from dpmix_core.privacy.events import AccountedRelease, SampledGaussianSteps, UnsupportedEventError
from dpmix_core.privacy.release import (
    PRIVATE_NORMALISATION,
    Adjacency,
    DataBounds,
    Mechanism,
    MixingRelease,
    Protects,
    Sampling,
)

if TYPE_CHECKING:
    import dp_accounting

__all__ = [
    "Accountant",
    "EpsilonResult",
    "MixingSetting",
    "UnsupportedReleaseError",
    "ENORMOUS_EPSILON",
    "equal_class_sizes",
]

ENORMOUS_EPSILON = 1e6  # above this an epsilon protects nothing; it is flagged, not hidden


class UnsupportedReleaseError(ValueError):
    """The accountant's assumptions do not cover this release."""


@dataclass(frozen=True)
class MixingSetting:
    """What a user types: sizes, noise, and the data-bound options of every paper.

    Each accountant turns this into the release its paper analyses
    (:meth:`Accountant.release_for`). For Poisson accountants ``l`` is the
    expected batch size m. ``class_sizes`` switches the without-replacement
    accountants to class-centric accounting (see ``class_centric_release``);
    ``protect_labels`` (default True: replace-one, labels included) chooses its
    neighbouring relation, False is DP-CDA's same-class swap (features only).
    ``not_covered`` names what puts the release outside every accountant's
    assumptions (e.g. normalisation from the private data); its epsilons are
    then never labelled upper bounds. ``clip_records`` describes uniform mixing
    of records clipped to ||x|| <= clip_x and ||y|| <= clip_y instead of [0,1]
    data (DPFMix App. E.3's DPMix, preprocessing "clip"); rdp-wor analyses it.
    ``feature_transform`` says what was mixed ("pixels", or a public per-record
    map such as DPFMix's ScatterNet features); it changes no epsilon, only the
    release's description.
    """

    n: int
    l: int
    T: int
    sigma_x: float
    sigma_y: float
    dx: int = 784
    dy: int = 10
    clip: float | None = None  # DP-CDA c; when set, rdp-wor uses the clipped setting
    clip_x: float = 1.0
    clip_y: float = 1.0
    class_sizes: tuple[int, ...] | None = None
    protect_labels: bool = True
    not_covered: str | None = None
    clip_records: bool = False  # without replacement on records clipped to ||x|| <= clip_x, ||y|| <= clip_y
    feature_transform: str = "pixels"

    def __post_init__(self) -> None:
        for name in ("n", "l", "T", "dx", "dy"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
        if self.l > self.n:
            raise ValueError(f"l must not exceed n. Found l={self.l}, n={self.n}.")
        for name in ("sigma_x", "sigma_y"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or math.isnan(value) or float(value) < 0 or math.isinf(value):
                raise ValueError(f"{name} must be a finite number >= 0. Found {value}.")
        for name in ("clip", "clip_x", "clip_y"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, numbers.Real) and math.isfinite(value) and float(value) > 0
            ):
                raise ValueError(f"{name} must be a positive finite number. Found {value}.")
        if self.class_sizes is not None and sum(self.class_sizes) != self.n:
            raise ValueError(f"class sizes sum to {sum(self.class_sizes)}, not n={self.n}.")
        if not isinstance(self.protect_labels, bool):
            raise ValueError(f"protect_labels must be True or False. Found {self.protect_labels!r}.")
        if not isinstance(self.clip_records, bool):
            raise ValueError(f"clip_records must be True or False. Found {self.clip_records!r}.")
        if not (isinstance(self.feature_transform, str) and self.feature_transform.strip()):
            raise ValueError(f"feature_transform must describe what was mixed. Found {self.feature_transform!r}.")
        if self.clip_records and self.clip is not None:
            raise ValueError(
                "clip c (DP-CDA: z-scored features clipped, one-hot labels) and clipped records (||x|| <= Cx, "
                "||y|| <= Cy) describe two different releases; give one."
            )
        if self.clip_records and self.class_sizes is not None:
            raise ValueError(
                "clipped records (||x|| <= Cx, ||y|| <= Cy) describe uniform mixing; class-centric mixing clips "
                "z-scored features with DP-CDA's clip c."
            )
        if not self.protect_labels and self.class_sizes is None:
            raise ValueError(
                "Leaving labels unprotected (a same-class swap) only applies to class-centric mixing: give class sizes."
            )


def equal_class_sizes(n: int, classes: int) -> tuple[int, ...]:
    """K equal class sizes summing to n (class-centric mixing over K balanced classes); ValueError otherwise."""
    if isinstance(classes, bool) or not isinstance(classes, numbers.Integral) or classes < 1:
        raise ValueError(f"the number of classes K must be a positive integer. Found {classes!r}.")
    if n % classes:
        raise ValueError(f"n = {n} does not split into K = {classes} equal classes.")
    return (n // classes,) * classes


@dataclass(frozen=True)
class EpsilonResult:
    """An epsilon with everything needed to read it honestly."""

    accountant: str
    epsilon: float
    delta: float
    upper_bound: bool
    sampling: str
    adjacency: str
    assumptions: str
    reference: str
    order: float | None = None
    reason: str | None = None
    details: tuple[tuple[str, float], ...] = field(default=())
    protects: str = Protects.FEATURES_AND_LABELS.value
    not_covered: str | None = None

    @property
    def guarantee(self) -> str:
        """How to read the number: a rigorous bound (and of what), an approximation, or not covered at all."""
        if self.not_covered is not None:
            return f"not covered: {self.not_covered}"
        if not self.upper_bound:
            return "approximation (not an upper bound)"
        if self.protects != Protects.FEATURES_AND_LABELS.value:
            return f"rigorous upper bound ({self.protects})"
        return "rigorous upper bound"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict; infinite numbers become the string "inf"."""
        out = asdict(self)
        out["details"] = {k: _json_number(v) for k, v in self.details}
        out["epsilon"] = _json_number(self.epsilon)
        out["guarantee"] = self.guarantee
        return out


def _json_number(x: float) -> float | str:
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


class Accountant(ABC):
    """One accounting method (Opacus style: a small class per method, same interface)."""

    name: ClassVar[str]
    title: ClassVar[str]
    reference: ClassVar[str]
    rigorous: ClassVar[bool]
    sampling: ClassVar[Sampling]
    adjacency: ClassVar[Adjacency]
    formula: ClassVar[str]  # LaTeX shown on the page
    explanation: ClassVar[str]  # plain language, for non-experts
    # Generic accountants analyse any T-fold subsampled Gaussian (a dp_accounting event); the papers'
    # closed forms (lee2019, dpcda) are stated for mixing releases and set this to False.
    accepts_events: ClassVar[bool] = True

    @abstractmethod
    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        """The data bounds this method's paper assumes."""

    def release_for(self, setting: MixingSetting) -> MixingRelease:
        """The release this method's paper analyses, built from a what-if: the setting's sizes and noise under the
        paper's sampling, neighbouring relation and data bounds (class-centric where class sizes are given)."""
        bounds = self.bounds_for(setting)
        if self.sampling is Sampling.POISSON:
            mechanism, preprocessing = Mechanism.POISSON, "clip"
        else:
            unit = bounds == DataBounds.unit_box(setting.dx, setting.dy)
            private = setting.not_covered == PRIVATE_NORMALISATION
            clipped = setting.clip_records and bounds == DataBounds.clipped(setting.clip_x, setting.clip_y)
            preprocessing = "unit" if unit else "clip" if clipped else ("zscore-private" if private else "zscore")
            mechanism = Mechanism.DPMIX if setting.class_sizes is None else Mechanism.CLASS_CENTRIC
        class_centric = mechanism is Mechanism.CLASS_CENTRIC
        return MixingRelease.made_by(
            mechanism,
            setting.n,
            setting.l,
            setting.T,
            setting.sigma_x,
            setting.sigma_y,
            bounds,
            not_covered=setting.not_covered,
            protects=Protects.FEATURES_ONLY
            if class_centric and not setting.protect_labels
            else Protects.FEATURES_AND_LABELS,
            class_sizes=setting.class_sizes if class_centric else None,
            preprocessing=preprocessing,
            feature_transform=setting.feature_transform,
        )

    def supports(self, release: AccountedRelease) -> bool:
        """True when this method's sampling and adjacency are the release's (papers' closed forms: mixing only)."""
        if not (self.accepts_events or isinstance(release, MixingRelease)):
            return False
        return release.sampling is self.sampling and release.adjacency is self.adjacency

    def epsilon_of_event(
        self, event: dp_accounting.DpEvent, delta: float, mechanism: str | None = None
    ) -> EpsilonResult:
        """epsilon of a ``dp_accounting`` event: T steps of one subsampled Gaussian (e.g. DP-SGD's).

        Args:
            event: SelfComposed(PoissonSampled(q, Gaussian(z)), T), or its without-replacement twin.
            delta: the target delta.
            mechanism: what the event is, for the result's labels (default: the event's own shape).

        Returns:
            The same :class:`EpsilonResult` as :meth:`epsilon`; UnsupportedReleaseError for another event
            shape, for an accountant whose sampling or adjacency differs, or for a paper's closed form.
        """
        try:
            steps = SampledGaussianSteps.from_dp_event(event, mechanism)
        except UnsupportedEventError as exc:
            raise UnsupportedReleaseError(f"{self.name}: {exc}") from exc
        return self.epsilon(steps, delta)

    def epsilon(self, release: AccountedRelease, delta: float) -> EpsilonResult:
        """epsilon at the given delta for this release (or DP event view); inf (with a reason) when unbounded.

        A :class:`MixingRelease` is accounted through its :meth:`~MixingRelease.accounting_view` (class-centric
        mixing: the smallest class pool and its step count).
        """
        if isinstance(release, MixingRelease):
            release = release.accounting_view()
        if not (self.accepts_events or isinstance(release, MixingRelease)):
            raise UnsupportedReleaseError(
                f"{self.name} is a closed form stated for mixing releases; {release.describe()} "
                "is not one (use rdp-wor or rdp-poisson, which analyse any subsampled Gaussian)."
            )
        if not self.supports(release):
            raise UnsupportedReleaseError(
                f"{self.name} assumes {self.sampling.value} sampling with {self.adjacency.value} adjacency; "
                f"this release uses {release.sampling.value} sampling with {release.adjacency.value} adjacency."
            )
        check_delta(delta)
        if release.noise_multiplier() == 0:
            return self._result(release, delta, math.inf, reason="no noise (sigma = 0): nothing is private")
        epsilon, order, details, reason = self._compute(release, delta)
        if math.isnan(epsilon):
            epsilon, reason = math.inf, reason or "numerical failure; reported pessimistically as inf"
        if math.isfinite(epsilon) and epsilon > ENORMOUS_EPSILON:  # said first, whatever else the accountant says
            enormous = f"epsilon > {ENORMOUS_EPSILON:g}: no meaningful protection"
            reason = enormous if reason is None else f"{enormous}; {reason}"
        if math.isinf(epsilon) and reason is None:
            reason = "the bound diverges for these parameters (noise too small)"
        return self._result(release, delta, epsilon, order=order, details=details, reason=reason)

    @abstractmethod
    def _compute(
        self, release: AccountedRelease, delta: float
    ) -> tuple[float, float | None, tuple[tuple[str, float], ...], str | None]:
        """(epsilon, optimal order or None, extra numbers, reason or None)."""

    def _result(self, release: AccountedRelease, delta: float, epsilon: float, **kw: Any) -> EpsilonResult:
        assumptions = release.describe()
        if release.notes:
            assumptions += "; " + "; ".join(release.notes)
        return EpsilonResult(
            accountant=self.name,
            epsilon=float(epsilon),
            delta=delta,
            upper_bound=self.rigorous and release.covered,
            sampling=release.sampling.value,
            adjacency=release.adjacency.value,
            assumptions=assumptions,
            reference=self.reference,
            order=kw.get("order"),
            reason=kw.get("reason"),
            details=kw.get("details", ()),
            protects=release.protects.value,
            not_covered=release.not_covered,
        )
