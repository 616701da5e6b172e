"""What was released: a random-mixing release described as data.

Keeps "what was released" apart from "how we account for it" (the
``dp_accounting`` DpEvent idea): mechanisms build a :class:`MixingRelease`,
accountants consume it. Sensitivities follow from the release's data bounds
and the neighbouring relation; nothing here knows about any accountant.
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported in dp_event(): loading dp_accounting (and scipy) costs ~1 s
    import dp_accounting

from dpmix_core.privacy.checks import check_positive_int

__all__ = [
    "Adjacency",
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

    def __post_init__(self) -> None:
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
        """gamma = l/n (without replacement) or q = m/n (Poisson)."""
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

        z = self.noise_multiplier()
        base: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(z) if z > 0 else dp_accounting.NonPrivateDpEvent()
        if self.sampling is Sampling.POISSON:
            sampled = dp_accounting.PoissonSampledDpEvent(self.sampling_rate, base)
        else:
            sampled = dp_accounting.SampledWithoutReplacementDpEvent(self.n, self.mix_degree, base)
        return dp_accounting.SelfComposedDpEvent(sampled, self.num_points)

    def with_sigma(self, sigma_x: float, sigma_y: float) -> MixingRelease:
        return replace(self, sigma_x=sigma_x, sigma_y=sigma_y)

    def describe(self) -> str:
        """One line a person can read: sampling, adjacency, bounds, sizes, what was mixed."""
        l_name = "m" if self.sampling is Sampling.POISSON else "l"
        n_name = "public n" if self.sampling is Sampling.POISSON else "n"
        text = (
            f"{self.sampling.value} sampling ({l_name}={self.mix_degree} of {n_name}={self.n}), "
            f"{self.adjacency.value} adjacency protecting {self.protects.value}, {self.bounds.describe()}, "
            f"T={self.num_points}, features mixed: {self.feature_transform}"
        )
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
    if not class_sizes:
        raise ValueError("class_sizes must list at least one class.")
    for size in class_sizes:
        check_positive_int("class size", size)
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
    return MixingRelease(
        n=n,
        mix_degree=mix_degree,
        num_points=steps,
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        sampling=Sampling.WITHOUT_REPLACEMENT,
        adjacency=Adjacency.REPLACE_ONE,
        bounds=bounds,
        notes=(note,),
        protects=protects,
        not_covered=not_covered,
    )
