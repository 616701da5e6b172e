"""Re-identification view: the training records nearest to released points.

For a handful of released points we find the k training records closest in
L2 distance, *in the feature space the mechanism released* (the training
records pass through :func:`dpmix_core.training.data.release_feature_map`):
pixels/255 for DPMix, local perturbation and class-centric "unit"; z-score +
clip to ||x|| <= c for class-centric "zscore"; scale + clip to ||x|| <= Cx
for Poisson mixing. Small l and little noise leave each released point next to
(one of) its source records; large l and noise leave blurred averages far from
every record.

Leakage score: each point's nearest distance divided by the *typical* nearest
neighbour distance between training records (the median over a random sample
of records of the distance to their closest other record). A ratio well below
1 means the point sits much closer to one record than records sit to one
another: that record is recognisable. ``leaked_fraction`` counts ratios below
``LEAK_RATIO``. This is an illustration, not a privacy guarantee or proof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dpmix_core.data import Dataset
from dpmix_core.synthesis.pipeline import SynthesisConfig, resolve_sigma

__all__ = ["LEAK_RATIO", "ReidResult", "nearest_records", "pairwise_sq_distances"]

LEAK_RATIO = 0.5  # nearest distance below half the typical record-to-record distance counts as a leak
REFERENCE_SAMPLE = 500  # training records used for the typical nearest-neighbour distance


@dataclass(frozen=True)
class ReidResult:
    """Released points and their nearest training records, all in the release's feature space."""

    released: np.ndarray  # (P, *record_shape) float32, the released points reshaped
    released_labels: np.ndarray  # (P,) argmax of the released label vectors
    neighbours: np.ndarray  # (P, k, *record_shape) float32, nearest training records (feature space)
    neighbour_indices: np.ndarray  # (P, k) indices into dataset.x_train
    neighbour_labels: np.ndarray  # (P, k) their true labels
    distances: np.ndarray  # (P, k) L2 distances, ascending per row
    reference_distance: float  # median nearest-neighbour distance between training records
    ratios: np.ndarray  # (P,) distances[:, 0] / reference_distance
    leaked_fraction: float  # fraction of points with ratio < LEAK_RATIO
    separation: np.ndarray  # (P,) nearest / second-nearest distance: near 0 = one record stands out
    space: str  # the feature space, in words
    synthesis: SynthesisConfig  # with the sigmas actually used (T as configured)
    epsilon: dict[str, float]  # the configured release's epsilons (its T), from the applicable accountants
    notes: tuple[str, ...] = ()

    @property
    def mean_ratio(self) -> float:
        return float(np.mean(self.ratios))

    @property
    def images(self) -> bool:
        """Image records (shown as pictures) or rows of numbers (shown as a table, :meth:`rows`)."""
        return self.released.ndim >= 3

    def rows(self, feature_names: tuple[str, ...] = (), label_names: tuple[str, ...] = ()) -> list[dict]:
        """Rows of numbers as a table: each released point, then its nearest training records, with their class,
        distance, distance over the typical one (``ratio``) and features in the release's space (named by
        ``feature_names`` where given, else x1, x2, ...; classes by ``label_names``)."""
        d = int(np.prod(self.released.shape[1:]))
        names = list(feature_names) if len(feature_names) == d else [f"x{j + 1}" for j in range(d)]
        label = lambda c: label_names[int(c)] if int(c) < len(label_names) else str(int(c))  # noqa: E731
        out: list[dict] = []
        for i in range(len(self.released)):
            point = {"point": i + 1, "row": "released", "class": label(self.released_labels[i])}
            out.append(
                {
                    **point,
                    "distance": None,
                    "ratio": None,
                    **dict(zip(names, map(float, self.released[i].ravel()), strict=True)),
                }
            )
            for j in range(self.neighbours.shape[1]):
                out.append(
                    {
                        "point": i + 1,
                        "row": f"record #{int(self.neighbour_indices[i, j])}",
                        "class": label(self.neighbour_labels[i, j]),
                        "distance": float(self.distances[i, j]),
                        "ratio": float(self.distances[i, j] / self.reference_distance)
                        if self.reference_distance > 0
                        else None,
                        **dict(zip(names, map(float, self.neighbours[i, j].ravel()), strict=True)),
                    }
                )
        return out


def pairwise_sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(p, q) squared L2 distances between rows of a (p, d) and b (q, d), via one matrix product (float64)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    np.maximum(sq, 0.0, out=sq)
    return sq


def _space(config: SynthesisConfig) -> str:
    if config.unit_scaled:
        return "features scaled to [0,1] (pixels/255 or the public feature_range), as released"
    if config.mechanism == "class-centric":
        src = "the training set's own statistics" if config.preprocessing == "zscore-private" else "public constants"
        return (
            f"z-scored with {src}, each row clipped to ||x|| <= {config.clip:g} (DP-CDA), as released; "
            "images are shown in that space"
        )
    return f"features scaled to [0,1], each row clipped to ||x|| <= {config.clip_x:g} (Poisson mixing), as released"


def _check(dataset: Dataset, config: SynthesisConfig, points: int, k: int) -> None:
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset must be a dpmix_core Dataset. Found {type(dataset).__name__}.")
    if not isinstance(config, SynthesisConfig):
        raise ValueError(f"synthesis_config must be a SynthesisConfig. Found {type(config).__name__}.")
    if config.mechanism == "label-laplace":
        raise ValueError(
            "label-laplace releases the real features unchanged (every point IS a training record): "
            "re-identification is trivial; choose a mixing mechanism."
        )
    for name, v, hi in (("points", points, 1000), ("k", k, dataset.n_train)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= hi:
            raise ValueError(f"{name} must be an integer in 1..{hi}. Found {v!r}.")


def nearest_records(
    dataset: Dataset,
    synthesis_config: SynthesisConfig,
    *,
    points: int = 8,
    k: int = 3,
    seed: int = 0,
) -> ReidResult:
    """``points`` released points and, for each, its ``k`` nearest training records (L2, release feature space).

    Only a few points are drawn: the mechanism runs with the configured l and sigmas (a target
    epsilon is calibrated for the configured T first) but with T just large enough for ``points``
    (released points are drawn independently, so these look like any ``points`` of the full
    release). The epsilon reported is the configured release's. ``seed`` seeds the release and
    the reference sample; the same inputs give the same result.

    Args:
        dataset: the private dataset; neighbours are searched among its training records.
        synthesis_config: the release's configuration (a mixing mechanism; not label-laplace).
        points: P, the number of released points shown, 1..1000.
        k: the number of nearest training records per point, 1..n_train.

    Returns:
        A :class:`ReidResult`: the P released points and their k nearest training records (reshaped to the
        record shape, in the release's feature space), their indices, labels and L2 distances (P, k), the
        reference distance, the leakage ratios (P,) and leaked fraction, the separation (P,) and the
        configured release's epsilons by accountant.

    Raises:
        ValueError: a dataset or configuration of the wrong type, a label-laplace configuration, ``points``
            or ``k`` out of range, or a configuration that cannot be calibrated or run on this dataset
            (including :class:`~dpmix_core.resources.limits.LimitExceeded` over the interactive limits).
    """
    _check(dataset, synthesis_config, points, k)
    from dpmix_core.privacy.accountants import applicable_accountants
    from dpmix_core.privacy.release import MixingRelease
    from dpmix_core.synthesis.pipeline import planned_release, synthesize
    from dpmix_core.training.data import release_feature_map

    points, k = int(points), int(k)
    seeds = np.random.SeedSequence(int(seed)).generate_state(3)  # release, point choice, reference sample
    config = resolve_sigma(synthesis_config, dataset)
    release_full = planned_release(config, dataset)
    epsilon: dict[str, float] = {}
    if isinstance(release_full, MixingRelease):
        epsilon = {
            acc.name: float(acc.epsilon(release_full, config.delta).epsilon)
            for acc in applicable_accountants(release_full)
        }
    K = dataset.num_classes
    t_small = K * math.ceil(points / K) if config.mechanism == "class-centric" else points  # floor(T/K) per class
    syn = synthesize(replace(config, T=t_small, seed=int(seeds[0])), dataset)
    x_rel, y_rel = syn.data.x, syn.data.y
    if x_rel.shape[0] < points:
        raise ValueError(f"the mechanism released {x_rel.shape[0]} points, fewer than points={points}.")
    pick = np.sort(np.random.default_rng(int(seeds[1])).choice(x_rel.shape[0], size=points, replace=False))
    x_rel, y_rel = x_rel[pick], y_rel[pick]

    feats = release_feature_map(syn.config, dataset.x_train)(dataset.x_train)  # (n, d) float32
    n = feats.shape[0]
    dist = np.sqrt(pairwise_sq_distances(x_rel, feats))  # (P, n)
    idx = np.argsort(dist, axis=1, kind="stable")[:, :k]
    d_k = np.take_along_axis(dist, idx, axis=1)
    two = np.sort(np.partition(dist, 1, axis=1)[:, :2], axis=1) if n >= 2 else np.ones((points, 2))
    separation = two[:, 0] / np.where(two[:, 1] > 0, two[:, 1], 1.0)

    ref_rows = np.random.default_rng(int(seeds[2])).choice(n, size=min(REFERENCE_SAMPLE, n), replace=False)
    ref = pairwise_sq_distances(feats[ref_rows], feats)
    ref[np.arange(len(ref_rows)), ref_rows] = np.inf  # not its own neighbour
    nn_ref = np.sqrt(ref.min(axis=1))
    nn_ref = nn_ref[np.isfinite(nn_ref)]
    reference = float(np.median(nn_ref)) if nn_ref.size else math.nan
    if not reference > 0:  # duplicates everywhere, or n == 1
        reference = float(np.median(np.sqrt(ref[np.isfinite(ref)]))) if np.isfinite(ref).any() else math.nan
    ratios = d_k[:, 0] / reference if reference > 0 else np.full(points, math.nan)

    shape = tuple(dataset.x_train.shape[1:])
    notes = [
        f"{points} points drawn from {syn.config.mechanism} with l={syn.config.l}, sigma_x={syn.config.sigma_x:.4g} "
        f"(T={t_small} for this view; epsilon is for the configured T={synthesis_config.T})",
        f"distances: L2 in the release's feature space ({_space(syn.config)})",
        f"reference: median distance from {len(ref_rows)} random training records to their nearest other record",
        f"leaked: nearest distance < {LEAK_RATIO:g} x reference",
    ]
    return ReidResult(
        released=x_rel.reshape(points, *shape).astype(np.float32, copy=False),
        released_labels=y_rel.argmax(axis=1),
        neighbours=feats[idx].reshape(points, k, *shape),
        neighbour_indices=idx,
        neighbour_labels=np.asarray(dataset.y_train)[idx],
        distances=d_k,
        reference_distance=reference,
        ratios=ratios,
        leaked_fraction=float(np.mean(ratios < LEAK_RATIO)),
        separation=separation,
        space=_space(syn.config),
        synthesis=replace(syn.config, T=synthesis_config.T, seed=synthesis_config.seed),
        epsilon=epsilon,
        notes=tuple(notes),
    )
