"""Random-mixing mechanisms: DPMix, local perturbation, class-centric mixing (DP-CDA), Poisson mixing (DPFMix).

Each mechanism runs one :class:`~dpmix_core.privacy.release.MixingRelease`, the
single description of what is released (built before any data is touched, e.g.
``MixingRelease.dpmix(...)``, so sigma can be calibrated on it), checks that it
fits the data (n, dimensions, class sizes), and returns :class:`SyntheticData`
carrying that same object: the accountants see exactly what was done.

Inputs: X (n, d) flattened features, uint8 pixels 0..255 or numbers; y (n,)
integer labels in 0..K-1. Outputs are float32. The heavy lifting (exact index
sampling, gather-and-sum, noise) is in :mod:`.engine` / :mod:`.sampling`;
``index_sampling`` ("auto", "host", "device") says where the indices are drawn
(on a GPU "auto" draws them there with :mod:`.device_sampling`).
"""

from __future__ import annotations

import math

import numpy as np

from dpmix_core.mechanisms._checks import (
    FeatureRange,
    check_features,
    check_labels,
    check_positive_int,
    describe_feature_range,
    feature_range_vectors,
)
from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch, sample_poisson_batches_torch
from dpmix_core.mechanisms.engine import (
    Segment,
    chunk_rows_for,
    mix_and_perturb,
    resolve_device,
    seed_sequence,
)
from dpmix_core.mechanisms.outputs import SyntheticData
from dpmix_core.mechanisms.sampling import index_dtype, sample_mixture_indices, sample_poisson_batches
from dpmix_core.privacy.release import CLASS_CENTRIC_PREPROCESSING, DataBounds, Mechanism, MixingRelease

__all__ = [
    "PREPROCESSING",
    "dpmix",
    "local_perturbation",
    "class_centric_mix",
    "hard_label_agreement",
    "poisson_mix",
    "check_zscore_vectors",
    "zscore_clip",
    "clip_rows",
    "row_norms",
    "column_mean",
    "column_std",
    "check_unit_bounds",
    "clipped_features",
    "unit_features",
]

# "unit": [0,1] features (thesis §4.2); "zscore": z-score with *public* mean/std, then clip (DP-CDA);
# "zscore-private": z-score with the private data's own statistics -- an explicit opt-in no accountant covers;
# "clip" (DPMix only): records clipped to ||x|| <= Cx, ||y|| <= Cy, DPFMix's DPMix (App. E.3).
PREPROCESSING = (*CLASS_CENTRIC_PREPROCESSING, "clip")
_EXACT_UINT8_SUM = 2**24 // 255  # l uint8 values sum exactly in float32 while 255*l <= 2^24


# --------------------------------------------------------------------------- mechanisms


def dpmix(
    X: np.ndarray,
    y: np.ndarray,
    *,
    num_classes: int,
    release: MixingRelease,
    feature_range: FeatureRange | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    device: str = "cpu",
    index_sampling: str = "auto",
) -> SyntheticData:
    """DPMix (Lee et al. 2019, Alg. 1): x_t = mean of l distinct records in [0,1]^d + N(0, sigma_x^2 I), y_t likewise on one-hot labels.

    Args:
        X: (n, d) features, flattened: uint8 pixels 0..255 (divided by 255), or any integers or floats with
            ``feature_range``.
        y: (n,) integer class labels in 0..K-1 (whole-number floats accepted).
        num_classes: K, the length of the one-hot label vectors.
        release: the DPMix release to make (``MixingRelease.dpmix``): n = len(X), l, T, sigma_x and sigma_y
            (noise standard deviations on each released *average*, in [0,1] feature units and one-hot label
            units), [0,1]^d x [0,1]^K bounds and ``clamp_negative``; or, with preprocessing "clip"
            (``MixingRelease.dpmix(clip=(Cx, Cy))``), records scaled as :func:`poisson_mix` scales them and
            clipped to ||x|| <= Cx, labels to ||y|| <= Cy (DPFMix App. E.3's DPMix).
        feature_range: public (low, high) bounds of X, or one pair per feature, min-max scaled to [0,1] (values
            outside are clipped);
            None for uint8 X. It must not be computed from the private data.
        seed: int >= 0, numpy Generator, SeedSequence, or None (fresh entropy).
        device: where the sums and noise are computed: "cpu", "cuda", "cuda:N", "mps" or "auto".
        index_sampling: where the indices are drawn: "auto", "host" or "device" (module docstring).

    Returns:
        :class:`SyntheticData`: x float32 (T, d) and soft labels y float32 (T, K), the
        without-replacement, replace-one :class:`MixingRelease` for the accountants, and notes.

    Raises:
        ValueError: X not a finite (n, d) integer or float array; y not (n,) integer labels in 0..K-1;
            ``release`` not a DPMix :class:`MixingRelease` or not fitting X (n, d, K); non-uint8 X without ``feature_range``; a bad
            ``feature_range``, seed, device or ``index_sampling``.
    """
    X, y, n, d, k = _check_data(X, y, num_classes)
    clipped = isinstance(release, MixingRelease) and release.preprocessing == "clip"
    if clipped:
        _check_release(release, Mechanism.DPMIX, n=n)
        clip_x, clip_y = release.bounds.x.radius, release.bounds.y.radius
        feats, feat_note = clipped_features(X, feature_range, clip_x)
        scale, label_value = 1.0, min(1.0, clip_y)
        feat_note += f"; each row clipped to ||x|| <= Cx={clip_x:g}"
        label_note = f"labels: one-hot scaled to ||y|| <= Cy={clip_y:g}, released as soft labels"
    else:
        _check_release(release, Mechanism.DPMIX, n=n, bounds=DataBounds.unit_box(d, k))
        feats, scale, feat_note = unit_features(X, feature_range)
        label_value, label_note = 1.0, f"labels: one-hot over K={k} classes, released as soft labels"
    dev = resolve_device(device)
    seed_seq = seed_sequence(seed)
    l = release.mix_degree

    def draw(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, None]:
        return sample_mixture_indices(n=n, mix_degree=l, num_points=rows, rng=rng), None

    def draw_device(gen, rows: int):
        return sample_mixture_indices_torch(n=n, mix_degree=l, num_points=rows, generator=gen), None

    seg = Segment(0, release.num_points, 0, draw, draw_device=draw_device)
    x_out, y_out = mix_and_perturb(
        features=feats,
        labels=y,
        label_value=label_value,
        dtype=_table_dtype(feats, l),
        dx=d,
        dy=k,
        segments=[seg],
        num_points=release.num_points,
        denom_x=scale * l,
        denom_y=float(l),
        sigma_x=release.sigma_x,
        sigma_y=release.sigma_y,
        seed_seq=seed_seq,
        chunk_rows=chunk_rows_for(l),
        device=dev,
        index_sampling=index_sampling,
    )
    notes = [
        f"DPMix (Lee et al. 2019): each of T={release.num_points} points averages l={l} distinct records drawn "
        f"uniformly without replacement from n={n}, plus N(0, {release.sigma_x:g}^2 I) on features and "
        f"N(0, {release.sigma_y:g}^2 I) on labels",
        feat_note,
        label_note,
    ]
    _clamp_negatives(x_out, y_out, release, notes)
    return SyntheticData(x_out, y_out, release, tuple(notes))


def local_perturbation(
    X: np.ndarray,
    y: np.ndarray,
    *,
    num_classes: int,
    num_points: int,
    sigma_x: float,
    sigma_y: float,
    clamp_negative: bool = False,
    feature_range: FeatureRange | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    device: str = "cpu",
) -> SyntheticData:
    """No-mixing baseline (Lee et al. 2019 with l = 1): x_t = one uniformly drawn record + N(0, sigma_x^2 I).

    :func:`dpmix` with ``MixingRelease.dpmix(l=1, ...)`` and ``index_sampling="auto"``; each of the T points
    draws its record independently (records may repeat across points).

    Args:
        X: (n, d) features: uint8 pixels 0..255, or any integers or floats with ``feature_range``.
        y: (n,) integer class labels in 0..K-1.
        num_classes: K, the length of the one-hot label vectors.
        num_points: T, the number of released points.
        sigma_x: noise standard deviation on each released feature vector (in [0,1] feature units), >= 0.
        sigma_y: noise standard deviation on each released one-hot label, >= 0.
        clamp_negative: set negative outputs to 0 (post-processing).
        feature_range: public (low, high) bounds of X (or one pair per feature) for min-max scaling to [0,1]; None
            for uint8 X.
        seed: int >= 0, numpy Generator, SeedSequence, or None (fresh entropy).
        device: "cpu", "cuda", "cuda:N", "mps" or "auto".

    Returns:
        :class:`SyntheticData` as :func:`dpmix` (x float32 (T, d), y float32 (T, K)), its notes led by the
        baseline's.

    Raises:
        ValueError: as :func:`dpmix`, and for T < 1 or a negative or non-finite sigma.
    """
    X, y, n, d, k = _check_data(X, y, num_classes)
    release = MixingRelease.dpmix(
        n=n, l=1, T=num_points, sigma_x=sigma_x, sigma_y=sigma_y, dx=d, dy=k, clamp_negative=clamp_negative
    )
    out = dpmix(X, y, num_classes=k, release=release, feature_range=feature_range, seed=seed, device=device)
    note = "local perturbation baseline: l=1 (no mixing), each point is one uniformly drawn record plus noise"
    return SyntheticData(out.x, out.y, out.release, (note,) + out.notes)


def class_centric_mix(
    X: np.ndarray,
    y: np.ndarray,
    *,
    num_classes: int,
    release: MixingRelease,
    mean: np.ndarray | None = None,
    std: np.ndarray | None = None,
    feature_range: FeatureRange | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    device: str = "cpu",
    index_sampling: str = "auto",
) -> SyntheticData:
    """Class-centric mixing (DP-CDA Alg. 1; thesis §4.2): per class k, floor(T/K) means of l distinct class-k records + N(0, sigma^2 I).

    ``preprocessing="unit"`` (default): [0,1] scaling as in DPMix (``feature_range``
    for non-uint8 X). ``"zscore"``: x <- (x - mean) / std feature-wise with the
    *public* ``mean``/``std`` passed in (units of X), then each row clipped to
    ||x|| <= c. ``"zscore-private"``: the same with mean/std computed from X, an
    explicit opt-in: one record then moves every released point (other classes
    too), so the release is marked not covered and no epsilon is an upper bound.
    Noise-free labels are exactly e_k; ``hard_labels`` releases one-hot(argmax(e_k + noise)).

    Args:
        X: (n, d) features: uint8 pixels or numbers (see ``preprocessing`` above).
        y: (n,) integer class labels in 0..K-1; every class needs at least l records.
        num_classes: K; each class releases floor(T/K) points.
        release: the class-centric release to make (``MixingRelease.class_centric``): class sizes equal to
            the counts of y, l, T, sigma_x and sigma_y (noise standard deviations on each released *average*,
            in the units of the preprocessed features and of the one-hot labels), preprocessing, clip c (the
            bound on ||x||), ``hard_labels`` and what is protected.
        mean: (d,) public feature means, in the units of X; only with ``preprocessing="zscore"``.
        std: (d,) public feature standard deviations (>= 0; 0 only centres), in the units of X; only with
            ``preprocessing="zscore"``.
        feature_range: public (low, high) bounds of X (or one pair per feature) for ``preprocessing="unit"`` (None
            for uint8 X).
        seed: int >= 0, numpy Generator, SeedSequence, or None (fresh entropy).
        device: "cpu", "cuda", "cuda:N", "mps" or "auto".
        index_sampling: "auto", "host" or "device" (module docstring).

    Returns:
        :class:`SyntheticData`: x float32 (K*floor(T/K), d) and y float32 (K*floor(T/K), K) with rows grouped
        by class (class 0 first), the class-centric :class:`MixingRelease` (:func:`class_centric_release`;
        ``not_covered`` set for "zscore-private"), and notes.

    Raises:
        ValueError: bad X or y (as :func:`dpmix`); ``release`` not a class-centric :class:`MixingRelease` or
            its class sizes or dimensions not those of the data; ``mean``/``std`` missing
            for "zscore", given for "unit" or "zscore-private", of the wrong shape, not finite, or std < 0;
            ``feature_range`` with z-scoring; non-uint8 X without ``feature_range`` for "unit"; a bad seed,
            device or ``index_sampling``.
    """
    X, y, n, d, k = _check_data(X, y, num_classes)
    counts = np.bincount(y, minlength=k)
    bounds = DataBounds.unit_box(d, k) if release.preprocessing == "unit" else None
    _check_release(release, Mechanism.CLASS_CENTRIC, n=n, bounds=bounds, class_sizes=tuple(int(c) for c in counts))
    dev = resolve_device(device)
    seed_seq = seed_sequence(seed)
    l = release.mix_degree
    feats, scale, notes = _class_centric_features(X, release, mean=mean, std=std, feature_range=feature_range)
    per_class = release.num_points // k
    segments = _class_segments(y, counts, mix_degree=l, per_class=per_class)
    x_out, y_out = mix_and_perturb(
        features=feats,
        labels=None,
        label_value=1.0,
        dtype=_table_dtype(feats, l),
        dx=d,
        dy=k,
        segments=segments,
        num_points=per_class * k,
        denom_x=scale * l,
        denom_y=1.0,
        sigma_x=release.sigma_x,
        sigma_y=release.sigma_y,
        seed_seq=seed_seq,
        chunk_rows=chunk_rows_for(l),
        device=dev,
        index_sampling=index_sampling,
    )
    notes.insert(
        0,
        f"class-centric mixing (DP-CDA Alg. 1): per class, floor(T/K)={per_class} points, each the mean of l={l} "
        f"distinct records of that class, plus N(0, {release.sigma_x:g}^2 I) on features and "
        f"N(0, {release.sigma_y:g}^2 I) on the one-hot label; rows grouped by class",
    )
    notes.append(f"class sizes {tuple(int(c) for c in counts)} are treated as public")
    if per_class * k != release.num_points:
        notes.append(
            f"released K*floor(T/K)={per_class * k} points (T={release.num_points} is not a multiple of K={k})"
        )
    if release.hard_labels:
        y_out = np.eye(k, dtype=np.float32)[np.argmax(y_out, axis=1)]
        notes.append(
            "hard labels: one-hot of the argmax of the noisy label (DP-CDA Eq. 1; post-processing); at "
            f"sigma_y={release.sigma_y:g} about {100 * hard_label_agreement(release.sigma_y, k):.0f} % of them are "
            "the true class"
        )
    else:
        notes.append("soft labels: one-hot class label plus noise")
    _clamp_negatives(x_out, y_out, release, notes)  # after the argmax: hard labels read the unclamped noisy label
    return SyntheticData(x_out, y_out, release, tuple(notes))


def hard_label_agreement(sigma_y: float, num_classes: int) -> float:
    """P(argmax(e_k + N(0, sigma_y^2 I_K)) = k): the share of hard labels (DP-CDA Eq. 1) that are the true class.

    The true coordinate is 1 + sigma_y Z_0, the others sigma_y Z_j, so the label is right when every Z_j is below
    Z_0 + 1 / sigma_y: the probability is the integral of phi(z) Phi(z + 1 / sigma_y)^(K - 1) over z (log-space
    Phi, so K and 1 / sigma_y of any size stay finite). 1 at sigma_y = 0, falling to 1 / K as sigma_y grows.
    """
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2. Found {num_classes!r}.")
    if not isinstance(sigma_y, int | float) or isinstance(sigma_y, bool) or not math.isfinite(sigma_y) or sigma_y < 0:
        raise ValueError(f"sigma_y must be a finite number >= 0. Found {sigma_y!r}.")
    if sigma_y == 0:
        return 1.0
    from scipy.integrate import quad
    from scipy.special import log_ndtr
    from scipy.stats import norm

    shift = 1.0 / sigma_y
    value, _ = quad(lambda z: math.exp(norm.logpdf(z) + (num_classes - 1) * log_ndtr(z + shift)), -np.inf, np.inf)
    return float(min(1.0, max(1.0 / num_classes, value)))


def _class_centric_features(
    X: np.ndarray,
    release: MixingRelease,
    *,
    mean: np.ndarray | None,
    std: np.ndarray | None,
    feature_range: FeatureRange | None,
) -> tuple[np.ndarray, float, list[str]]:
    """(table, divisor scale, notes): X z-scored by the public (or, opted in, private) mean/std and clipped to the
    release's radius, or [0,1]-scaled (``scale`` is the factor the mixed sum is divided by besides l)."""
    if release.preprocessing == "unit":
        if mean is not None or std is not None:
            raise ValueError("mean and std apply to preprocessing='zscore'; 'unit' scaling uses feature_range.")
        feats, scale, feat_note = unit_features(X, feature_range)
        return feats, scale, [feat_note]
    if feature_range is not None:
        raise ValueError("feature_range applies to preprocessing='unit'; z-scoring uses mean and std.")
    private = release.preprocessing == "zscore-private"
    if private and (mean is not None or std is not None):
        raise ValueError("preprocessing='zscore-private' computes mean and std from X; pass none, or use 'zscore'.")
    if not private and (mean is None or std is None):
        raise ValueError(
            "preprocessing='zscore' needs public mean and std (constants that do not depend on the private "
            "data); use preprocessing='zscore-private' to compute them from X (then no epsilon is covered)."
        )
    feats, z_notes = zscore_clip(X, mean, std, release.bounds.x.radius)
    return feats, 1.0, list(z_notes)


def _class_segments(y: np.ndarray, counts: np.ndarray, *, mix_degree: int, per_class: int) -> list[Segment]:
    """One engine segment per class c: ``per_class`` points, each l distinct records of class c, label e_c."""
    k = len(counts)
    order = np.argsort(y, kind="stable").astype(index_dtype(len(y)))
    starts = np.concatenate(([0], np.cumsum(counts)))
    segments = []
    for c in range(k):
        members = order[starts[c] : starts[c + 1]]
        size = int(counts[c])

        def draw(rng, rows, members=members, size=size):
            local = sample_mixture_indices(n=size, mix_degree=mix_degree, num_points=rows, rng=rng)
            return members[local], None

        def draw_device(gen, rows, members=members, size=size):
            import torch

            local = sample_mixture_indices_torch(n=size, mix_degree=mix_degree, num_points=rows, generator=gen)
            return torch.as_tensor(members, device=gen.device).to(torch.int64)[local], None

        segments.append(Segment(c * per_class, per_class, c, draw, np.eye(k, dtype=np.float32)[c], draw_device))
    return segments


def poisson_mix(
    X: np.ndarray,
    y: np.ndarray,
    *,
    num_classes: int,
    release: MixingRelease,
    feature_range: FeatureRange | None = None,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    device: str = "cpu",
    index_sampling: str = "auto",
) -> SyntheticData:
    """Poisson mixing (DPFMix Alg. 1): x_t = (sum of clipped x_i over a Poisson(m/n) batch) / m + N(0, sigma_x^2 I); y_t likewise.

    Features: uint8 / 255, or min-max with the public ``feature_range``, else as
    given; then each row clipped to ||x|| <= Cx. Labels: one-hot clipped to
    ||y|| <= Cy. The sum is divided by m, never by the realised batch size.

    Args:
        X: (n, d) features: uint8 pixels, or numbers (used as given, or min-max scaled with
            ``feature_range``).
        y: (n,) integer class labels in 0..K-1.
        num_classes: K, the length of the label vectors.
        release: the Poisson release to make (``MixingRelease.poisson``): the stated public n that sets the
            rate m/n (under add/remove adjacency the count of X is private), m (expected batch size), T,
            sigma_x and sigma_y (noise standard deviations on each released sum / m, in the units of the
            clipped features and labels) and the clipping bounds Cx, Cy.
        feature_range: public (low, high) bounds of X (or one pair per feature) for min-max scaling to [0,1] before
            clipping.
        seed: int >= 0, numpy Generator, SeedSequence, or None (fresh entropy).
        device: "cpu", "cuda", "cuda:N", "mps" or "auto".
        index_sampling: "auto", "host" or "device" (module docstring).

    Returns:
        :class:`SyntheticData`: x float32 (T, d), y float32 (T, K) (soft labels), the Poisson, add/remove-one
        :class:`MixingRelease` (rate m / public n), and notes.

    Raises:
        ValueError: bad X or y (as :func:`dpmix`); ``release`` not a Poisson :class:`MixingRelease`; a bad ``feature_range``, seed, device or ``index_sampling``.
    """
    X, y, n, d, k = _check_data(X, y, num_classes)
    _check_release(release, Mechanism.POISSON)
    clip_x, clip_y = release.bounds.x.radius, release.bounds.y.radius
    dev = resolve_device(device)
    seed_seq = seed_sequence(seed)
    feats, feat_note = clipped_features(X, feature_range, clip_x)
    m = release.mix_degree
    rate = m / release.n  # the stated public n, never the private count (MixingRelease.poisson)

    def draw(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        return sample_poisson_batches(n=n, rate=rate, num_points=rows, rng=rng)

    def draw_device(gen, rows: int):
        return sample_poisson_batches_torch(n=n, rate=rate, num_points=rows, generator=gen)

    seg = Segment(0, release.num_points, 0, draw, draw_device=draw_device)
    x_out, y_out = mix_and_perturb(
        features=feats,
        labels=y,
        label_value=min(1.0, clip_y),
        dtype=np.float32,
        dx=d,
        dy=k,
        segments=[seg],
        num_points=release.num_points,
        denom_x=float(m),
        denom_y=float(m),
        sigma_x=release.sigma_x,
        sigma_y=release.sigma_y,
        seed_seq=seed_seq,
        chunk_rows=chunk_rows_for(m),
        device=dev,
        index_sampling=index_sampling,
    )
    notes = (
        f"Poisson mixing (DPFMix Alg. 1): each record joins each of T={release.num_points} points independently "
        f"with probability m/n={m}/{release.n} (n stated as public); the batch sum is divided by m={m} (not by the realised batch size), "
        f"plus N(0, {release.sigma_x:g}^2 I) on features and N(0, {release.sigma_y:g}^2 I) on labels",
        feat_note + f"; each row clipped to ||x|| <= Cx={clip_x:g}",
        f"labels: one-hot scaled to ||y|| <= Cy={clip_y:g}, released as soft labels",
    )
    return SyntheticData(x_out, y_out, release, notes)


# --------------------------------------------------------------------------- helpers


def _clamp_negatives(x_out: np.ndarray, y_out: np.ndarray, release: MixingRelease, notes: list[str]) -> None:
    """Set negative released values to 0, in place, when ``release.clamp_negative`` (post-processing).

    Thesis §4.1 ("I set all the negative values in the synthetic feature and label matrices to 0") and its
    appendix B code for §4.2 (``X_synthetic[X_synthetic < 0] = 0``).
    """
    if release.clamp_negative:
        np.maximum(x_out, 0, out=x_out)
        np.maximum(y_out, 0, out=y_out)
        notes.append("negative feature and label values set to 0 (post-processing; privacy unchanged)")


def _table_dtype(feats: np.ndarray, l: int) -> type:
    """float32, or float64 for uint8 sums that float32 would round (255 * l > 2^24, i.e. l > 65793)."""
    return np.float64 if feats.dtype == np.uint8 and l > _EXACT_UINT8_SUM else np.float32


def _check_release(
    release: object,
    mechanism: Mechanism,
    *,
    n: int | None = None,
    bounds: DataBounds | None = None,
    class_sizes: tuple[int, ...] | None = None,
) -> None:
    """The release describes this mechanism on this data: n, the [0,1] dimensions, the class sizes."""
    if not isinstance(release, MixingRelease) or release.mechanism is not mechanism:
        found = type(release).__name__
        if isinstance(release, MixingRelease) and release.mechanism is not None:
            found = f"a {release.mechanism.value} release"
        raise ValueError(
            f"release must be a {mechanism.value} MixingRelease (MixingRelease.{mechanism.name.lower()}). Found {found}."
        )
    if n is not None and release.n != n:
        raise ValueError(f"the release describes n={release.n} records; the data has {n}.")
    if bounds is not None and release.bounds != bounds:
        raise ValueError(
            f"the release's bounds ({release.bounds.describe()}) are not those of the data ({bounds.describe()})."
        )
    if class_sizes is not None and release.class_sizes != class_sizes:
        raise ValueError(f"the release states class sizes {release.class_sizes}; the data's are {class_sizes}.")


def _check_data(X: np.ndarray, y: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    X = check_features(X)
    k = check_positive_int("num_classes (K)", num_classes)
    y = check_labels(y, n=X.shape[0], num_classes=k)
    return X, y, X.shape[0], X.shape[1], k


def clipped_features(X: np.ndarray, feature_range: FeatureRange | None, clip_x: float) -> tuple[np.ndarray, str]:
    """Features for clipped mixing (DPFMix) as (float32 table, note): uint8 / 255, min-max with the public
    ``feature_range``, or as given; then each row clipped to ||x|| <= ``clip_x``."""
    if X.dtype == np.uint8 and feature_range is None:
        feats = X.astype(np.float32)
        feats *= np.float32(1 / 255)
        note = "features: uint8 pixels divided by 255"
    elif feature_range is not None:
        feats, _, note = unit_features(X, feature_range)
    else:
        feats = X.astype(np.float32)
        note = "features: used as given (the clipping bounds their norm)"
    return clip_rows(feats, clip_x), note


def check_unit_bounds(dtype: np.dtype, feature_range: FeatureRange | None) -> None:
    """Refuse (one line) [0,1] scaling of features that are not uint8 pixels without their public bounds."""
    if feature_range is None and dtype != np.uint8:
        raise ValueError(
            f"X has dtype {dtype}, not uint8 pixels: [0,1] scaling needs the features' public bounds, e.g. "
            "feature_range=(0.0, 1.0) (the CLI's --feature-range LO,HI); min-max from the private data would not "
            "be covered by the accountant."
        )


def unit_features(X: np.ndarray, feature_range: FeatureRange | None) -> tuple[np.ndarray, float, str]:
    """Features for [0,1] mixing as (table, scale, note): the table divided by ``scale`` lies in [0,1].

    uint8 without a range: the raw integers (scale 255), so sums of up to 65793
    values are exact in float32 (float64 beyond). Otherwise min-max with public bounds: one pair for every
    feature, or one pair per feature (:func:`~dpmix_core.privacy.checks.feature_range_vectors`); either way a
    record lies in [0,1]^d, the box the accountants assume.
    """
    check_unit_bounds(X.dtype, feature_range)
    if feature_range is None:
        return X, 255.0, "features: uint8 pixels divided by 255 (exact integer sums)"
    lo, hi = feature_range_vectors(feature_range, X.shape[1])
    feats = np.clip(X, lo, hi).astype(np.float32)
    feats -= lo.astype(np.float32)
    feats /= (hi - lo).astype(np.float32)
    np.clip(feats, 0, 1, out=feats)
    return (
        feats,
        1.0,
        (
            f"features: min-max scaled with the public bounds {describe_feature_range(feature_range)}; values outside clipped"
        ),
    )


def zscore_clip(
    X: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None, clip: float
) -> tuple[np.ndarray, list[str]]:
    """DP-CDA preprocessing: feature-wise z-score, then each row clipped to ||x|| <= c."""
    d = X.shape[1]
    feats = X.astype(np.float32)
    notes = []
    private = []
    if mean is None:
        mean = column_mean(feats)
        private.append("mean")
    if std is None:
        std = column_std(feats, mean)
        private.append("std")
    mean, std = check_zscore_vectors(mean, std, d)
    zero = std == 0
    std = np.where(zero, 1.0, std)
    feats -= mean.astype(np.float32)
    feats /= std.astype(np.float32)
    feats = clip_rows(feats, clip)
    if private:
        notes.append(
            f"features z-scored with the {' and '.join(private)} of X itself, the private data "
            "(the release says it is not covered)"
        )
    else:
        notes.append("features z-scored with the public mean and std passed in")
    if zero.any():
        notes.append(f"{int(zero.sum())} feature(s) with std 0 were only centred (divided by 1)")
    notes.append(f"features: each row clipped to L2 norm <= c={clip:g} after z-scoring")
    return feats, notes


def column_mean(feats: np.ndarray, rows: int = 8192) -> np.ndarray:
    """Feature means accumulated in float64, a block of rows at a time (no (n, d) float64 copy)."""
    total = np.zeros(feats.shape[1])
    for a in range(0, len(feats), rows):
        total += feats[a : a + rows].sum(axis=0, dtype=np.float64)
    return total / len(feats)


def column_std(feats: np.ndarray, mean: np.ndarray, rows: int = 8192) -> np.ndarray:
    """Population std per feature around ``mean`` (two-pass, float64, blockwise)."""
    total = np.zeros(feats.shape[1])
    for a in range(0, len(feats), rows):
        dev = feats[a : a + rows] - mean
        total += np.einsum("ij,ij->j", dev, dev)
    return np.sqrt(total / len(feats))


def check_zscore_vectors(mean: object, std: object, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) as float64 vectors of shape (d,), finite, std >= 0 (0 only centres); else one-line ValueError."""
    out = []
    for name, v in (("mean", mean), ("std", std)):
        a = np.asarray(v, dtype=np.float64)
        if a.shape != (d,):
            raise ValueError(f"{name} must have shape ({d},) to match the features. Found shape {a.shape}.")
        if not np.isfinite(a).all():
            j = int(np.argmax(~np.isfinite(a)))
            raise ValueError(f"{name} must be finite. Found {a[j]} at feature {j}.")
        out.append(a)
    if (out[1] < 0).any():
        j = int(np.argmax(out[1] < 0))
        raise ValueError(f"std must be >= 0. Found {out[1][j]} at feature {j}.")
    return out[0], out[1]


def row_norms(feats: np.ndarray) -> np.ndarray:
    """||x|| of each row of (n, d) ``feats``, accumulated in float64 without a squared copy."""
    return np.sqrt(np.einsum("ij,ij->i", feats, feats, dtype=np.float64))


def clip_rows(feats: np.ndarray, radius: float) -> np.ndarray:
    """x <- x * min(1, c / ||x||) row by row (in place on float32)."""
    norms = row_norms(feats)
    factor = np.minimum(1.0, radius / np.maximum(norms, 1e-300))
    feats *= factor[:, None].astype(feats.dtype)
    return feats
