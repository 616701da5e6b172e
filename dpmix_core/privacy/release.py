"""What was released: a random-mixing release described as data -- the one description.

Keeps "what was released" apart from "how we account for it" (the
``dp_accounting`` DpEvent idea). :class:`MixingRelease` is the single
description of a mixing release: the mechanism (which records are mixed),
sampling and neighbouring relation, what the epsilon protects, the data bounds
and the preprocessing that enforces them, the feature transform (what was
mixed), n, l, T, sigma_x, sigma_y, the class sizes of class-centric mixing and
the post-processing of the output. It is built once (``MixingRelease.dpmix``,
``.class_centric``, ``.poisson``), from a page, the CLI or a recipe
(``synthesis.SynthesisConfig``); the mechanisms run exactly it, the
accountants, privacy cards and presets read it.

How it is accounted for is a view, not another description:
:meth:`MixingRelease.accounting_view` is the release the accountants' theorems
are applied to (for class-centric mixing the smallest class pool and 2*T_k
steps, :func:`class_centric_release`), and :meth:`MixingRelease.dp_event` the
``dp_accounting`` event of that view. Sensitivities follow from the data bounds
and the neighbouring relation; nothing here knows about any accountant.

    user input ──> MixingRelease (what was released) ──> mechanism (runs it)
                        │
                        └─ accounting_view() / dp_event() ──> accountants ──> EpsilonResult ──> card
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported in dp_event(): loading dp_accounting (and scipy) costs ~1 s
    import dp_accounting

from dpmix_core.privacy.checks import check_positive_int

__all__ = [
    "Adjacency",
    "CLAMP_NEEDS_UNIT_BOX",
    "CLASS_CENTRIC_PREPROCESSING",
    "Mechanism",
    "RELEASE_PREPROCESSING",
    "Protects",
    "PRIVATE_NORMALISATION",
    "Sampling",
    "NormBound",
    "DataBounds",
    "MixingRelease",
    "class_centric_release",
    "max_class_centric_l",
]


class Sampling(str, enum.Enum):
    """How the records of one synthetic point are chosen."""

    WITHOUT_REPLACEMENT = "without-replacement"  # exactly l distinct records (DPMix, DP-CDA)
    POISSON = "poisson"  # each record independently with prob. m/n (DPFMix)


class Mechanism(str, enum.Enum):
    """Which records one synthetic point mixes (the sampling and neighbouring relation follow from it)."""

    DPMIX = "dpmix"  # l distinct records of all n, replace-one (Lee et al. 2019; l = 1: local perturbation)
    CLASS_CENTRIC = "class-centric"  # l distinct records of one class, floor(T/K) points per class (DP-CDA Alg. 1)
    POISSON = "poisson"  # each record with probability m/n, the sum divided by m, add/remove-one (DPFMix Alg. 1)

    @property
    def sampling(self) -> Sampling:
        return Sampling.POISSON if self is Mechanism.POISSON else Sampling.WITHOUT_REPLACEMENT

    @property
    def adjacency(self) -> Adjacency:
        return Adjacency.ADD_REMOVE_ONE if self is Mechanism.POISSON else Adjacency.REPLACE_ONE


# How a record is brought within the bounds: "unit" scales features to [0,1] with public bounds (Lee et al.);
# "zscore" z-scores with public constants and clips ||x|| <= c (DP-CDA); "zscore-private" does so with the private
# data's own statistics (never covered); "clip" clips ||x|| <= Cx and scales the one-hot label to Cy (DPFMix).
CLASS_CENTRIC_PREPROCESSING = ("unit", "zscore", "zscore-private")  # the choices of class-centric mixing
RELEASE_PREPROCESSING = (*CLASS_CENTRIC_PREPROCESSING, "clip")

# Setting negative outputs to 0 (post-processing) undoes noise only where the data's lower bound is 0.
CLAMP_NEEDS_UNIT_BOX = (
    "clamp_negative sets negative released values to 0, which suits [0,1]-scaled data only (dpmix, local, or "
    "class-centric with preprocessing 'unit'); after z-scoring or norm clipping, negative values are data"
)


class Adjacency(str, enum.Enum):
    """Neighbouring relation between datasets."""

    REPLACE_ONE = "replace-one"  # n public; one record swapped
    ADD_REMOVE_ONE = "add/remove-one"  # one record added or removed


class Protects(str, enum.Enum):
    """What of a record the neighbouring relation may change, hence what the epsilon protects."""

    FEATURES_AND_LABELS = "features and labels"  # the record may change entirely (label included)
    FEATURES_ONLY = "features only; labels not protected"  # DP-CDA's same-class swap


# Why no accountant covers a release whose normalisation constants were computed from the private data:
# one record then moves every released point (other classes too), not only the points that contain it.
PRIVATE_NORMALISATION = "normalisation constants computed from the private data"


@dataclass(frozen=True)
class NormBound:
    """Bound on one record's feature (or label) vector.

    ``diameter`` bounds ||u - u'|| for two admissible vectors (used under
    replace-one); ``radius`` bounds ||u|| (used under add/remove-one).
    """

    diameter: float
    radius: float
    description: str

    def __post_init__(self) -> None:
        for name in ("diameter", "radius"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number. Found {value}.")

    @classmethod
    def unit_box(cls, dim: int) -> NormBound:
        """Vectors in [0,1]^dim: ||u - u'|| <= sqrt(dim) (Lee et al. 2019)."""
        check_positive_int("dimension", dim)
        return cls(math.sqrt(dim), math.sqrt(dim), f"[0,1]^{dim}")

    @classmethod
    def l2_ball(cls, radius: float) -> NormBound:
        """Vectors clipped to ||u|| <= c: ||u - u'|| <= 2c (DP-CDA, DPFMix)."""
        if not (isinstance(radius, numbers.Real) and math.isfinite(radius) and radius > 0):
            raise ValueError(f"Clipping norm must be a positive finite number. Found {radius}.")
        return cls(2.0 * radius, float(radius), f"||.||_2 <= {radius:g}")

    @classmethod
    def one_hot(cls) -> NormBound:
        """One-hot label vectors: ||e_i - e_j|| = sqrt(2), ||e_i|| = 1 (DP-CDA Thm. 1)."""
        return cls(math.sqrt(2.0), 1.0, "one-hot")


@dataclass(frozen=True)
class DataBounds:
    """Per-record bounds on features x and labels y that the mechanism enforces."""

    x: NormBound
    y: NormBound

    @classmethod
    def unit_box(cls, dx: int, dy: int) -> DataBounds:
        """Lee et al. 2019: features in [0,1]^dx, labels in [0,1]^dy."""
        return cls(NormBound.unit_box(dx), NormBound.unit_box(dy))

    @classmethod
    def clipped_one_hot(cls, clip: float) -> DataBounds:
        """DP-CDA: z-scored features clipped to ||x|| <= c, one-hot labels."""
        return cls(NormBound.l2_ball(clip), NormBound.one_hot())

    @classmethod
    def clipped(cls, clip_x: float, clip_y: float) -> DataBounds:
        """DPFMix: ||x|| <= Cx and ||y|| <= Cy."""
        return cls(NormBound.l2_ball(clip_x), NormBound.l2_ball(clip_y))

    def describe(self) -> str:
        return f"x: {self.x.description}, y: {self.y.description}"


@dataclass(frozen=True)
class MixingRelease:
    """T synthetic points, each a mean of l records plus N(0, sigma_x^2 I), N(0, sigma_y^2 I).

    For Poisson sampling ``mix_degree`` is the expected batch size m (the sum is
    divided by m, DPFMix Alg. 1) and ``n`` is the *stated, public* n that sets the
    rate m/n (under add/remove adjacency the true n is private, so the mechanism
    must use this stated value too). ``sigma_x``/``sigma_y`` are the noise
    standard deviations on the released averages; 0 means no noise.

    ``protects`` says what the neighbouring relation may change (labels included
    or not). ``not_covered`` is set when something the release did lies outside
    every accountant's assumptions (e.g. z-scoring with statistics of the private
    data): its epsilons are then computed for reference but never labelled an
    upper bound.

    ``feature_transform`` says what was mixed: "pixels", or a public,
    data-independent map of each record applied before clipping and mixing
    (e.g. ScatterNet + per-sample GroupNorm, DPFMix App. E.2). It does not
    change the accounting (the bounds hold for the transformed records) but
    every description of the release names it.

    ``mechanism`` says which records are mixed (None: read from ``sampling``);
    its sampling and adjacency must agree with the fields. Class-centric
    mixing states its public ``class_sizes`` (n is their sum, ``num_points``
    the T asked for) and is accounted through :meth:`accounting_view`.
    ``preprocessing`` is how the records were brought within ``bounds``
    (:data:`RELEASE_PREPROCESSING`; None: "clip" for Poisson, else "unit");
    "zscore-private" always sets ``not_covered``. ``hard_labels`` and
    ``clamp_negative`` are post-processing of the output (privacy unchanged).
    Build one with :meth:`dpmix`, :meth:`class_centric` or :meth:`poisson`.
    """

    n: int
    mix_degree: int
    num_points: int
    sigma_x: float
    sigma_y: float
    sampling: Sampling
    adjacency: Adjacency
    bounds: DataBounds
    notes: tuple[str, ...] = field(default=())
    protects: Protects = Protects.FEATURES_AND_LABELS
    not_covered: str | None = None
    feature_transform: str = "pixels"
    mechanism: Mechanism | None = None
    class_sizes: tuple[int, ...] | None = None
    preprocessing: str | None = None
    hard_labels: bool = False
    clamp_negative: bool = False

    def __post_init__(self) -> None:
        if self.mechanism is None:
            derived = Mechanism.POISSON if self.sampling is Sampling.POISSON else Mechanism.DPMIX
            object.__setattr__(self, "mechanism", derived)
        if self.preprocessing is None:
            object.__setattr__(self, "preprocessing", "clip" if self.mechanism is Mechanism.POISSON else "unit")
        if self.preprocessing == "zscore-private" and self.not_covered is None:
            object.__setattr__(self, "not_covered", PRIVATE_NORMALISATION)
        self._check()

    def _check(self) -> None:
        check_positive_int("n", self.n)
        if not (isinstance(self.feature_transform, str) and self.feature_transform.strip()):
            raise ValueError(f"feature_transform must describe what was mixed. Found {self.feature_transform!r}.")
        check_positive_int("l (mix degree)", self.mix_degree)
        check_positive_int("T (number of synthetic points)", self.num_points)
        if self.mix_degree > self.n:
            raise ValueError(f"l must not exceed n. Found l={self.mix_degree}, n={self.n}.")
        for name in ("sigma_x", "sigma_y"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be >= 0. Found {value}.")
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"Unknown sampling scheme {self.sampling!r}.")
        if not isinstance(self.adjacency, Adjacency):
            raise ValueError(f"Unknown adjacency {self.adjacency!r}.")
        if not isinstance(self.protects, Protects):
            raise ValueError(f"Unknown protection {self.protects!r}.")
        if self.not_covered is not None and not (isinstance(self.not_covered, str) and self.not_covered.strip()):
            raise ValueError(f"not_covered must be None or a reason. Found {self.not_covered!r}.")
        self._check_mechanism()

    def _check_mechanism(self) -> None:
        mechanism = self.mechanism
        if not isinstance(mechanism, Mechanism):
            raise ValueError(
                f"Unknown mechanism {mechanism!r}. Choose one of: {', '.join(m.value for m in Mechanism)}."
            )
        if (self.sampling, self.adjacency) != (mechanism.sampling, mechanism.adjacency):
            raise ValueError(
                f"{mechanism.value} mixing uses {mechanism.sampling.value} sampling with {mechanism.adjacency.value} "
                f"adjacency. Found {self.sampling.value} with {self.adjacency.value}."
            )
        if self.preprocessing not in RELEASE_PREPROCESSING:
            raise ValueError(
                f"preprocessing must be one of {', '.join(RELEASE_PREPROCESSING)}. Found {self.preprocessing!r}."
            )
        for name in ("hard_labels", "clamp_negative"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False. Found {getattr(self, name)!r}.")
        if self.clamp_negative and self.preprocessing != "unit":
            raise ValueError(CLAMP_NEEDS_UNIT_BOX)
        if mechanism is Mechanism.CLASS_CENTRIC:
            if self.class_sizes is None:
                raise ValueError("class-centric mixing states its public class sizes.")
            if sum(self.class_sizes) != self.n:
                raise ValueError(f"class sizes sum to {sum(self.class_sizes)}, not n={self.n}.")
            self.accounting_view()  # validates l against the smallest class and T against K
            return
        if self.class_sizes is not None:
            raise ValueError(f"class sizes describe class-centric mixing, not {mechanism.value}.")
        if self.protects is not Protects.FEATURES_AND_LABELS and self.adjacency is Adjacency.ADD_REMOVE_ONE:
            raise ValueError(
                "add/remove-one adjacency adds or removes a whole record: labels are protected (a features-only "
                "reading, a same-class swap, exists for replace-one mixing such as class-centric only)."
            )

    # ------------------------------------------------------------------ the one way to build each release

    @classmethod
    def dpmix(
        cls,
        *,
        n: int,
        l: int,
        T: int,
        sigma_x: float,
        sigma_y: float,
        dx: int,
        dy: int,
        clamp_negative: bool = False,
        clip: tuple[float, float] | None = None,
    ) -> MixingRelease:
        """DPMix (Lee et al. 2019, Alg. 1): T means of l distinct records of n, features in [0,1]^dx, labels in [0,1]^dy.

        l = 1 is the local-perturbation baseline. ``clamp_negative`` sets negative outputs to 0 (post-processing).
        ``clip`` = (Cx, Cy): the records are clipped to ||x|| <= Cx and ||y|| <= Cy instead (preprocessing "clip"),
        as DPFMix runs DPMix for its uniform-sampling row (App. E.3: "If not specified, we set Cx = Cy = 1").
        """
        if clip is None:
            bounds = DataBounds.unit_box(dx, dy)
            return cls.made_by(Mechanism.DPMIX, n, l, T, sigma_x, sigma_y, bounds, clamp_negative=clamp_negative)
        if clamp_negative:
            raise ValueError(CLAMP_NEEDS_UNIT_BOX)
        bounds = DataBounds.clipped(*clip)
        return cls.made_by(Mechanism.DPMIX, n, l, T, sigma_x, sigma_y, bounds, preprocessing="clip")

    @classmethod
    def class_centric(
        cls,
        *,
        class_sizes: tuple[int, ...],
        l: int,
        T: int,
        sigma_x: float,
        sigma_y: float,
        dx: int,
        dy: int,
        preprocessing: str = "unit",
        clip: float = 1.0,
        hard_labels: bool = False,
        protect_labels: bool = True,
        clamp_negative: bool = False,
    ) -> MixingRelease:
        """Class-centric mixing (thesis §4.2; DP-CDA Alg. 1): per class floor(T/K) means of l distinct class records.

        ``preprocessing`` "unit": [0,1]^dx features (thesis); "zscore": public z-score constants, then
        ||x|| <= ``clip`` with one-hot labels (DP-CDA); "zscore-private": the same with the private data's
        statistics (not covered). ``protect_labels`` False is DP-CDA's same-class swap (features only).
        ``hard_labels``: one-hot of the argmax of the noisy label (DP-CDA Eq. 1; post-processing).
        ``clamp_negative`` ("unit" only): negative outputs set to 0, as the thesis's appendix B code does
        (``X_synthetic[X_synthetic < 0] = 0``; post-processing).
        """
        if preprocessing not in CLASS_CENTRIC_PREPROCESSING:
            raise ValueError(
                f"class-centric preprocessing must be one of {', '.join(CLASS_CENTRIC_PREPROCESSING)}. "
                f"Found {preprocessing!r}."
            )
        if not isinstance(protect_labels, bool):
            raise ValueError(f"protect_labels must be True or False. Found {protect_labels!r}.")
        sizes = _checked_class_sizes(class_sizes, l)
        bounds = DataBounds.unit_box(dx, dy) if preprocessing == "unit" else DataBounds.clipped_one_hot(clip)
        return cls.made_by(
            Mechanism.CLASS_CENTRIC,
            sum(sizes),
            l,
            T,
            sigma_x,
            sigma_y,
            bounds,
            protects=Protects.FEATURES_AND_LABELS if protect_labels else Protects.FEATURES_ONLY,
            class_sizes=sizes,
            preprocessing=preprocessing,
            hard_labels=hard_labels,
            clamp_negative=clamp_negative,
        )

    @classmethod
    def poisson(
        cls, *, n: int, m: int, T: int, sigma_x: float, sigma_y: float, clip_x: float = 1.0, clip_y: float = 1.0
    ) -> MixingRelease:
        """Poisson mixing (DPFMix Alg. 1): rate m/n with n the *stated, public* n, sum / m, ||x|| <= Cx, ||y|| <= Cy."""
        return cls.made_by(Mechanism.POISSON, n, m, T, sigma_x, sigma_y, DataBounds.clipped(clip_x, clip_y))

    @classmethod
    def made_by(
        cls,
        mechanism: Mechanism,
        n: int,
        l: int,
        T: int,
        sigma_x: float,
        sigma_y: float,
        bounds: DataBounds,
        **details: Any,
    ) -> MixingRelease:
        """The release of ``mechanism`` (its sampling and adjacency) with these sizes, noise and bounds; ``details``
        are the remaining fields (protects, class_sizes, preprocessing, not_covered, post-processing)."""
        return cls(
            n=n,
            mix_degree=l,
            num_points=T,
            sigma_x=sigma_x,
            sigma_y=sigma_y,
            sampling=mechanism.sampling,
            adjacency=mechanism.adjacency,
            bounds=bounds,
            mechanism=mechanism,
            **details,
        )

    @property
    def protect_labels(self) -> bool:
        """True when the neighbouring relation may change the label too (every mechanism's default)."""
        return self.protects is Protects.FEATURES_AND_LABELS

    def accounting_view(self) -> MixingRelease:
        """The release the accountants' theorems are applied to: this one, or for class-centric mixing the
        without-replacement release over the smallest class pool of :func:`class_centric_release`."""
        if self.class_sizes is None:
            return self
        return class_centric_release(
            class_sizes=self.class_sizes,
            mix_degree=self.mix_degree,
            num_points=self.num_points,
            sigma_x=self.sigma_x,
            sigma_y=self.sigma_y,
            bounds=self.bounds,
            protect_labels=self.protect_labels,
            not_covered=self.not_covered,
            feature_transform=self.feature_transform,
        )

    @property
    def covered(self) -> bool:
        """True when the accountants' assumptions hold for what was released."""
        return self.not_covered is None

    def caveats(self) -> tuple[str, ...]:
        """Plain-language lines every display of this release's epsilon must carry (empty when none apply)."""
        out = []
        if self.not_covered is not None:
            out.append(f"not covered: {self.not_covered}; no epsilon shown for this release is an upper bound")
        if self.protects is not Protects.FEATURES_AND_LABELS:
            out.append(f"epsilon protects {self.protects.value} (a neighbour swaps a record within its class)")
        return tuple(out)

    @property
    def sampling_rate(self) -> float:
        """gamma = l/n (without replacement) or q = m/n (Poisson); class-centric: that of the accounting view."""
        if self.class_sizes is not None:
            return self.accounting_view().sampling_rate
        return self.mix_degree / self.n

    def sensitivities(self) -> tuple[float, float]:
        """L2 sensitivity (Delta_x, Delta_y) of one released average before noise.

        Replace-one: one of the l averaged records changes, so the mean moves by at
        most diameter/l. Add/remove with Poisson sampling: the sum changes by at most
        the radius and is divided by the fixed m.
        """
        if self.adjacency is Adjacency.REPLACE_ONE:
            return self.bounds.x.diameter / self.mix_degree, self.bounds.y.diameter / self.mix_degree
        return self.bounds.x.radius / self.mix_degree, self.bounds.y.radius / self.mix_degree

    def gaussian_rdp_coefficient(self) -> float:
        """r with base Gaussian RDP eps(alpha) = alpha * r = alpha/2 (Dx^2/sx^2 + Dy^2/sy^2)."""
        dx, dy = self.sensitivities()
        if self.sigma_x == 0 or self.sigma_y == 0:
            return math.inf
        a, b = dx / self.sigma_x, dy / self.sigma_y  # float division gives inf/0 at the extremes, never raises
        return 0.5 * (a * a + b * b)  # x * x overflows to inf where x ** 2 raises OverflowError

    def noise_multiplier(self) -> float:
        """Effective multiplier z = (Dx^2/sx^2 + Dy^2/sy^2)^(-1/2) (DPFMix Lemma 2.2).

        A Gaussian with block noise levels is a single Gaussian after whitening
        each block, so the pair (sx, sy) acts like one multiplier z. 0 = no noise (or
        z below the smallest double); inf = z above the largest double. Never raises.
        """
        if self.sigma_x == 0 or self.sigma_y == 0:
            return 0.0
        r = self.gaussian_rdp_coefficient()
        if 1e-300 < r < math.inf:
            return 1.0 / math.sqrt(2.0 * r)
        # r over- or underflowed: z = lo / hypot(1, lo/hi) with lo <= hi the per-block
        # multipliers sigma/Delta never overflows (inf only when z exceeds the double range).
        dx, dy = self.sensitivities()
        lo, hi = sorted((self.sigma_x / dx, self.sigma_y / dy))
        if lo == 0.0 or math.isinf(lo):
            return lo
        return lo / math.hypot(1.0, lo / hi)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The release as a ``dp_accounting`` event (sampled Gaussian, self-composed T times)."""
        import dp_accounting

        if self.class_sizes is not None:
            return self.accounting_view().dp_event()
        z = self.noise_multiplier()
        base: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(z) if z > 0 else dp_accounting.NonPrivateDpEvent()
        if self.sampling is Sampling.POISSON:
            sampled = dp_accounting.PoissonSampledDpEvent(self.sampling_rate, base)
        else:
            sampled = dp_accounting.SampledWithoutReplacementDpEvent(self.n, self.mix_degree, base)
        return dp_accounting.SelfComposedDpEvent(sampled, self.num_points)

    def to_json(self) -> dict:
        """The description as JSON-ready data (the privacy card's "release" entry)."""
        return {
            "mechanism": self.mechanism.value if self.mechanism is not None else None,
            "sampling": self.sampling.value,
            "adjacency": self.adjacency.value,
            "protects": self.protects.value,
            "bounds": self.bounds.describe(),
            "preprocessing": self.preprocessing,
            "feature_transform": self.feature_transform,
            "n": self.n,
            "l": self.mix_degree,
            "T": self.num_points,
            "sigma_x": self.sigma_x,
            "sigma_y": self.sigma_y,
            "class_sizes": list(self.class_sizes) if self.class_sizes is not None else None,
            "hard_labels": self.hard_labels,
            "clamp_negative": self.clamp_negative,
            "covered": self.covered,
            "not_covered": self.not_covered,
        }

    def with_sigma(self, sigma_x: float, sigma_y: float) -> MixingRelease:
        return replace(self, sigma_x=sigma_x, sigma_y=sigma_y)

    def describe(self) -> str:
        """One line a person can read: sampling, adjacency, bounds, sizes, what was mixed."""
        l_name = "m" if self.sampling is Sampling.POISSON else "l"
        n_name = "public n" if self.sampling is Sampling.POISSON else "n"
        of = f"{n_name}={self.n}"
        if self.class_sizes is not None:
            of = f"one class of K={len(self.class_sizes)}, class sizes {_sizes_text(self.class_sizes)} stated as public"
        text = (
            f"{self.sampling.value} sampling ({l_name}={self.mix_degree} of {of}), "
            f"{self.adjacency.value} adjacency protecting {self.protects.value}, {self.bounds.describe()}, "
            f"T={self.num_points}, features mixed: {self.feature_transform}"
        )
        if self.preprocessing in ("zscore", "zscore-private"):
            source = "the private data's statistics" if self.preprocessing == "zscore-private" else "public constants"
            text += f", z-scored with {source}"
        if self.not_covered is not None:
            text += f"; NOT COVERED by any accountant: {self.not_covered}"
        return text


def max_class_centric_l(class_sizes: tuple[int, ...], protect_labels: bool = True) -> int:
    """The largest l class-centric mixing allows: N_min, or N_min - 1 when labels are protected (the neighbour's
    shrunk class must still hold l records; see :func:`class_centric_release`).

    Args:
        class_sizes: the number of records N_k of each class k (non-empty; stated as public).
        protect_labels: True for replace-one adjacency with the label included, False for DP-CDA's
            same-class swap.

    Returns:
        min(class_sizes) - 1 when ``protect_labels``, else min(class_sizes); it may be 0 (a class with
        one record and labels protected), in which case no l is allowed. The sizes are not validated here.
    """
    return min(class_sizes) - (1 if protect_labels else 0)


def class_centric_release(
    *,
    class_sizes: tuple[int, ...],
    mix_degree: int,
    num_points: int,
    sigma_x: float,
    sigma_y: float,
    bounds: DataBounds,
    protect_labels: bool = True,
    not_covered: str | None = None,
    feature_transform: str = "pixels",
) -> MixingRelease:
    """Accounting view of class-centric mixing (thesis §4.2, DP-CDA Alg. 1).

    Each class k is mixed separately: T_k = floor(T/K) points, each the mean of l
    distinct records from the N_k records of class k; class sizes are treated as
    public. We account for the smallest pool N_min = min_k N_k (largest sampling
    rate l/N_min, hence the largest per-point privacy loss).

    ``protect_labels=True`` (the default): full replace-one adjacency, the
    record's label may change too. Accounted as T' = 2*T_k without-replacement
    releases at pool n' = N_min - 1. Proof: let r (class a) become r' (class b).
    Classes other than a, b are unchanged and their points have the same law.
    Class a's pool loses r: with gamma = l/N_a the output on the larger pool is
    (1-gamma) A + gamma B, where A is the output on the pool without r and B
    mixes r with l-1 others; B is a coupling of replace-one neighbours of A's
    components (shift <= diameter/l). Writing A = (1-gamma) A + gamma A, the pair
    is an instance of the replace-one without-replacement structure of WBK 2019
    (Thm. 9/27: mixtures (1-gamma) M0 + gamma M1 vs (1-gamma) M0 + gamma M1' whose
    components are pairwise neighbours) at rate gamma = l/N_a; class b (gaining
    r') is the same with the roles exchanged, rate l/(N_b + 1). Both rates are at
    most l/(N_min - 1) for every pair in which the stated sizes belong to either
    dataset (the shrunk class has >= N_min - 1 records), the bounds are monotone
    in gamma, and the two classes' points are independent: 2*T_k compositions.
    Tested in tests/test_privacy_defaults.py.

    ``protect_labels=False``: DP-CDA's reading, a neighbour swaps a record for
    another of the same class, so only the class's T_k points move, gamma =
    l/N_min. The record's label is not protected and every epsilon says so.

    Using (n, T) instead, as a naive reading would, understates the sampling
    rate K-fold and is not what the mechanism does.

    Args:
        class_sizes: N_k, the number of records of each of the K classes (positive ints, public).
        mix_degree: l, the number of distinct same-class records averaged into each point.
        num_points: T, the total number of points requested; each class releases floor(T/K).
        sigma_x: standard deviation of the Gaussian noise on each released feature average (0: no noise).
        sigma_y: standard deviation of the Gaussian noise on each released label average (0: no noise).
        bounds: the per-record bounds the mechanism enforces on features and labels.
        protect_labels: True (default) for replace-one adjacency with the label included; False for
            DP-CDA's same-class swap (features only).
        not_covered: None, or why no accountant covers the release (e.g. :data:`PRIVATE_NORMALISATION`).

    Returns:
        The without-replacement, replace-one :class:`MixingRelease` the accountants see: pool n' = N_min - 1 and
        2 * floor(T/K) points when ``protect_labels``, else pool N_min and floor(T/K) points, with a note saying
        so.

    Raises:
        ValueError: empty ``class_sizes``, a size or T that is not a positive int, a non-bool
            ``protect_labels``, T < K, l < 1 or above :func:`max_class_centric_l`, or a negative or NaN sigma.
    """
    class_sizes = _checked_class_sizes(class_sizes, mix_degree)
    if not isinstance(protect_labels, bool):
        raise ValueError(f"protect_labels must be True or False. Found {protect_labels!r}.")
    k = len(class_sizes)
    check_positive_int("T (number of synthetic points)", num_points)
    per_class = num_points // k
    if per_class < 1:
        raise ValueError(f"T={num_points} gives no point per class for K={k} classes.")
    pool = min(class_sizes)
    if mix_degree > max_class_centric_l(class_sizes, protect_labels):
        need = "l <= N_min - 1 when labels are protected" if protect_labels else "l <= N_k"
        raise ValueError(
            f"l={mix_degree} is too large for the smallest class ({pool} records); class-centric mixing needs {need}."
        )
    if protect_labels:  # the record's old and new class both move: 2*T_k steps at the shrunk pool
        n, steps, protects = pool - 1, 2 * per_class, Protects.FEATURES_AND_LABELS
        note = (
            f"class-centric, K={k}: replacing a record (label included) touches the 2*T_k={2 * per_class} "
            f"points of its old and new class; pool N_min-1={pool - 1} (class sizes stated as public)"
        )
    else:  # DP-CDA's same-class swap: only the class's T_k points move
        n, steps, protects = pool, per_class, Protects.FEATURES_ONLY
        note = (
            f"class-centric, K={k}: a same-class swap touches T_k={per_class} points; pool N_min={pool} "
            "(DP-CDA's reading: the record's label is not protected)"
        )
    return MixingRelease.made_by(
        Mechanism.DPMIX,  # l distinct records of one pool: the structure WBK 2019 analyses
        n,
        mix_degree,
        steps,
        sigma_x,
        sigma_y,
        bounds,
        notes=(note,),
        protects=protects,
        not_covered=not_covered,
        feature_transform=feature_transform,
    )


def _checked_class_sizes(class_sizes: tuple[int, ...], mix_degree: int) -> tuple[int, ...]:
    """The stated class sizes as ints; ValueError naming an empty list, a bad size, or a class smaller than l."""
    if not class_sizes:
        raise ValueError("class_sizes must list at least one class.")
    for k, size in enumerate(class_sizes):
        check_positive_int("class size", size)
        if isinstance(mix_degree, int) and size < mix_degree:
            raise ValueError(
                f"class {k} has {size} records, fewer than l={mix_degree}; class-centric mixing needs l <= N_k for "
                "every class."
            )
    return tuple(int(c) for c in class_sizes)


def _sizes_text(sizes: tuple[int, ...]) -> str:
    return str(sizes) if len(sizes) <= 12 else f"{min(sizes)}..{max(sizes)}"
