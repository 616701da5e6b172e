"""Teaching helpers for the "DP foundations" page: sensitivity, Laplace vs Gaussian, Analyze-Gauss DP-PCA.

Small pure functions over numpy arrays that call the mechanisms in
:mod:`dpmix_core.mechanisms` and return plain dataclasses / DataFrames, plus the
plotly figures that show them. No Streamlit imports here.

Conventions (those of the mechanisms, see ``mechanisms/stats.py`` and ``mechanisms/pca.py``):

* DP mean / histogram: replace-one adjacency (n public, one record swapped for
  another), pixels read as values in [0, 1];
* label-only Laplace: neighbours differ in one person's label, features public;
* Analyze-Gauss PCA: rows clipped to ||x|| <= 1, replace-one, Delta_2 = sqrt(2)/n;
* Gaussian calibration: "classic" (Dwork & Roth Thm. A.1) only certifies eps < 1,
  "analytic" (Balle & Wang 2018) is exact for every eps; "auto" picks classic
  below 1 and analytic from 1 on.

Seeds: every function takes ``seed`` (an int >= 0, or None for fresh entropy);
independent streams are spawned from it for each noisy draw, so one seed
reproduces a whole demo.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpmix_core.mechanisms import (
    GaussianRelease,
    LaplaceLabelRelease,
    LaplaceRelease,
    analyze_gauss_pca,
    dp_histogram,
    dp_mean,
    laplace_label_release,
)
from dpmix_core.mechanisms._checks import check_delta, check_epsilon, check_positive_int
from dpmix_core.mechanisms.label_dp import label_sensitivity as mechanism_label_sensitivity
from dpmix_core.mechanisms.outputs import DPStatistic
from dpmix_core.mechanisms.pca import clip_rows_to_unit_ball

try:  # a dependency of scikit-learn; optional here
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

__all__ = [
    "LABEL_ENCODINGS",
    "GAUSSIAN_CALIBRATIONS",
    "REPLACE_ONE",
    "REPLACE_ONE_LONG",
    "LABEL_ADJACENCY",
    "LabelChangeExample",
    "MeanImageComparison",
    "HistogramComparison",
    "PCAComparison",
    "ReleaseRow",
    "label_sensitivity",
    "label_change_example",
    "label_noise_scale",
    "label_noise_scales",
    "label_release_accuracy",
    "gaussian_method_for",
    "noise_std",
    "guarantee_text",
    "release_table",
    "dp_mean_images",
    "dp_histograms",
    "subsample_indices",
    "pca_preprocess",
    "nonprivate_pca",
    "orient_components",
    "pca_comparison",
    "label_scale_figure",
    "label_accuracy_figure",
    "mean_images_figure",
    "histogram_figure",
    "pca_grid_figure",
    "image_mosaic",
]

Release = Union[LaplaceRelease, GaussianRelease, LaplaceLabelRelease]

LABEL_ENCODINGS = ("one-hot", "regression")
_TASKS = {"one-hot": "classification", "regression": "regression"}
GAUSSIAN_CALIBRATIONS = ("auto", "classic", "analytic")
REPLACE_ONE = "replace-one (n public)"
REPLACE_ONE_LONG = (
    "replace-one: n is public and neighbouring datasets differ by swapping one person's record for another"
)
LABEL_ADJACENCY = "one person's label changes (n and features public)"

_FONT = {"size": 15}
_COLORS = {
    "true": "#444444",
    "one-hot": "#1f77b4",
    "regression": "#d62728",
    "Laplace": "#ff7f0e",
    "Gaussian": "#2ca02c",
}


# --------------------------------------------------------------------------- checks and seeds


def _check_seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or None. Found {seed!r}.")
    return int(seed)


def _streams(seed: int | None, count: int) -> list[np.random.Generator]:
    """``count`` independent generators spawned from one seed (None: fresh entropy)."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(_check_seed(seed)).spawn(count)]


def _check_encoding(encoding: str) -> str:
    if encoding not in LABEL_ENCODINGS:
        raise ValueError(f"encoding must be one of {LABEL_ENCODINGS}. Found {encoding!r}.")
    return encoding


def _check_labels_1d(y: object, num_classes: int) -> np.ndarray:
    if not isinstance(y, np.ndarray) or y.ndim != 1 or y.shape[0] < 1:
        raise ValueError(f"y must be a numpy array of shape (n,) with n >= 1. Found {getattr(y, 'shape', type(y))}.")
    if y.dtype.kind not in "iu":
        raise ValueError(f"y must hold integer class labels. Found dtype {y.dtype}.")
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"y must lie in 0..{num_classes - 1}. Found {y.min()}..{y.max()}.")
    return y


def _check_images(x: object, y: np.ndarray | None = None) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.ndim < 2 or x.shape[0] < 1:
        raise ValueError(f"x must be a numpy array of images (n, H, W) or rows (n, d). Found {getattr(x, 'shape', x)}.")
    if y is not None and len(y) != len(x):
        raise ValueError(f"x and y must have the same length. Found {len(x)} and {len(y)}.")
    return x


def _image_shape(x: np.ndarray) -> tuple[int, ...]:
    return tuple(x.shape[1:]) if x.ndim >= 3 else (x.shape[1],)


@contextmanager
def _one_blas_thread():
    """Run BLAS/LAPACK on one thread (the PCA's eigh on 784 x 784 matrices).

    OpenBLAS's worker threads busy-wait: on a small shared machine (2 cores, a
    browser or a second session competing) a two-thread eigh that takes 0.05 s
    alone can take 1-6 s, while one thread stays at ~0.07 s. The limit is
    process-wide while it lasts and changes no result beyond rounding.
    """
    if threadpool_limits is None:  # pragma: no cover
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------- 1. sensitivity of labels


def label_sensitivity(encoding: str, num_classes: int = 10) -> float:
    """Delta_f (L1) of one person's label: 2 for one-hot vectors, K-1 for the label as a number 0..K-1.

    One-hot: changing label a to b (a != b) turns a 1 into 0 and a 0 into 1, so the
    L1 distance is 2 whatever a and b are. A number: |a - b| <= K - 1 (0 <-> 9 for digits).
    """
    task = "classification" if _check_encoding(encoding) == "one-hot" else "regression"
    return mechanism_label_sensitivity(task, num_classes)


@dataclass(frozen=True)
class LabelChangeExample:
    """One person's label changes from ``old_label`` to ``new_label``: how far each encoding moves."""

    old_label: int
    new_label: int
    num_classes: int
    one_hot_old: np.ndarray  # (K,)
    one_hot_new: np.ndarray  # (K,)
    one_hot_distance: float  # always 2
    number_distance: float  # |old - new|
    one_hot_sensitivity: float  # 2
    number_sensitivity: float  # K - 1

    def table(self) -> pd.DataFrame:
        """Rows: one-hot and number encodings; before, after, L1 distance, worst case over all label pairs."""

        def vec(v: np.ndarray) -> str:
            return "[" + " ".join(str(int(a)) for a in v) + "]"

        return pd.DataFrame(
            [
                {
                    "encoding": "one-hot",
                    "before": vec(self.one_hot_old),
                    "after": vec(self.one_hot_new),
                    "L1 distance": self.one_hot_distance,
                    "worst case Δf": self.one_hot_sensitivity,
                },
                {
                    "encoding": f"number 0…{self.num_classes - 1}",
                    "before": str(self.old_label),
                    "after": str(self.new_label),
                    "L1 distance": self.number_distance,
                    "worst case Δf": self.number_sensitivity,
                },
            ]
        )


def label_change_example(old_label: int, new_label: int, num_classes: int = 10) -> LabelChangeExample:
    """The worked example: L1 distance of the one-hot vectors (2) and of the numbers (|old - new|)."""
    k = check_positive_int("num_classes (K)", num_classes)
    for name, value in (("old_label", old_label), ("new_label", new_label)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < k:
            raise ValueError(f"{name} must be a class in 0..{k - 1}. Found {value!r}.")
    if old_label == new_label:
        raise ValueError(
            f"Neighbouring datasets differ in this person's label: pick two different labels. Found {old_label} twice."
        )
    eye = np.eye(k)
    a, b = eye[old_label], eye[new_label]
    return LabelChangeExample(
        int(old_label),
        int(new_label),
        k,
        a,
        b,
        float(np.abs(a - b).sum()),
        float(abs(int(old_label) - int(new_label))),
        label_sensitivity("one-hot", k),
        label_sensitivity("regression", k),
    )


def _label_release(epsilon: float, encoding: str, num_classes: int, n: int = 1) -> LaplaceLabelRelease:
    k = check_positive_int("num_classes (K)", num_classes)
    return LaplaceLabelRelease(
        epsilon=check_epsilon(epsilon),
        sensitivity=label_sensitivity(encoding, k),
        n=n,
        task=_TASKS[encoding],
    )


def label_noise_scale(epsilon: float, encoding: str, num_classes: int = 10) -> float:
    """Laplace scale b = Delta_f / eps of label-only Laplace (the mechanism's own description computes it)."""
    return _label_release(epsilon, encoding, num_classes).scale


def label_noise_scales(epsilons: Iterable[float], num_classes: int = 10) -> pd.DataFrame:
    """Long table: epsilon, encoding, sensitivity, scale b = Delta_f/eps and noise std sqrt(2) b, for both encodings."""
    rows = []
    for eps in epsilons:
        for enc in LABEL_ENCODINGS:
            rel = _label_release(eps, enc, num_classes)
            rows.append(
                {
                    "epsilon": float(eps),
                    "encoding": enc,
                    "sensitivity": rel.sensitivity,
                    "scale": rel.scale,
                    "std": math.sqrt(2.0) * rel.scale,
                }
            )
    if not rows:
        raise ValueError("epsilons must hold at least one value.")
    return pd.DataFrame(rows)


def label_release_accuracy(
    y: np.ndarray, *, num_classes: int, epsilons: Iterable[float], seed: int | None = None
) -> pd.DataFrame:
    """Fraction of labels that survive label-only Laplace, per epsilon and encoding.

    One-hot: argmax of the noisy vector (post-processing). Regression: the noisy
    number clamped to [0, K-1] and rounded (post-processing). Runs
    :func:`~dpmix_core.mechanisms.laplace_label_release` on the labels; the
    features do not touch the label noise, so a one-column placeholder stands in
    for them (cheap even for 60,000 images).
    """
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    eps_list = [check_epsilon(e) for e in epsilons]
    if not eps_list:
        raise ValueError("epsilons must hold at least one value.")
    placeholder = np.zeros((len(y), 1), dtype=np.uint8)
    streams = _streams(seed, 2 * len(eps_list))
    rows = []
    for i, eps in enumerate(eps_list):
        for j, enc in enumerate(LABEL_ENCODINGS):
            out = laplace_label_release(
                placeholder,
                y,
                num_classes=k,
                epsilon=eps,
                task=_TASKS[enc],
                postprocess=enc == "regression",
                seed=streams[2 * i + j],
            )
            guess = out.hard_labels() if enc == "one-hot" else out.y[:, 0].astype(np.int64)
            rows.append(
                {
                    "epsilon": eps,
                    "encoding": enc,
                    "accuracy": float(np.mean(guess == y)),
                    "scale": out.release.scale,
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- 2. Laplace vs Gaussian


def gaussian_method_for(epsilon: float, calibration: str = "auto") -> str:
    """Which Gaussian analysis certifies sigma: "auto" = classic for eps < 1, analytic (Balle & Wang 2018) from 1 on."""
    epsilon = check_epsilon(epsilon)
    if calibration not in GAUSSIAN_CALIBRATIONS:
        raise ValueError(f"calibration must be one of {GAUSSIAN_CALIBRATIONS}. Found {calibration!r}.")
    if calibration == "auto":
        return "classic" if epsilon < 1 else "analytic"
    if calibration == "classic" and epsilon >= 1:
        raise ValueError(
            f"The classic Gaussian calibration (Dwork & Roth Thm. A.1) holds only for ε < 1; found ε = {epsilon:g}. "
            "Use the analytic calibration (Balle & Wang 2018), which is exact for every ε."
        )
    return calibration


def noise_std(release: Release) -> float:
    """Standard deviation of the noise per coordinate: sqrt(2) b for Laplace, sigma for Gaussian."""
    if isinstance(release, GaussianRelease):
        return float(release.sigma)
    return math.sqrt(2.0) * float(release.scale)


def guarantee_text(release: Release) -> str:
    """"pure ε-DP (δ = 0)" for Laplace, "(ε, δ)-DP" with the calibration for Gaussian."""
    if isinstance(release, GaussianRelease):
        return f"({release.epsilon:g}, {release.delta:.0e})-DP, {release.method} calibration"
    return f"pure {release.epsilon:g}-DP (δ = 0)"


@dataclass(frozen=True)
class ReleaseRow:
    """One released statistic with the adjacency and sensitivity formula it was calibrated for."""

    statistic: str
    release: Release
    adjacency: str
    sensitivity_formula: str = ""


def release_table(rows: Sequence[ReleaseRow]) -> pd.DataFrame:
    """One line per release: mechanism, ε, δ, guarantee, sensitivity, noise, adjacency, description."""
    out = []
    for row in rows:
        rel = row.release
        gaussian = isinstance(rel, GaussianRelease)
        norm = "L2 Δ₂" if gaussian else "L1 Δ₁"
        formula = f" = {row.sensitivity_formula}" if row.sensitivity_formula else ""
        out.append(
            {
                "statistic": row.statistic,
                "mechanism": "Gaussian" if gaussian else "Laplace",
                "ε": rel.epsilon,
                "δ": f"{rel.delta:.0e}" if gaussian else "0",
                "guarantee (by construction)": guarantee_text(rel),
                "sensitivity": f"{norm}{formula} = {rel.sensitivity:.4g}",
                "noise": f"σ = {rel.sigma:.4g}" if gaussian else f"b = Δ₁/ε = {rel.scale:.4g}",
                "noise std per coordinate": noise_std(rel),
                "adjacency": row.adjacency,
                "description": rel.describe(),
            }
        )
    return pd.DataFrame(out)


@dataclass(frozen=True)
class MeanImageComparison:
    """True mean image of one class next to its Laplace and Gaussian DP versions (noisy pixels clamped to [0, 1])."""

    label: int
    n: int  # images of this class (treated as public)
    image_shape: tuple[int, ...]
    true: np.ndarray  # flat (d,), in [0, 1]
    laplace: DPStatistic
    gaussian: DPStatistic

    def image(self, which: str) -> np.ndarray:
        """"true", "laplace" or "gaussian", reshaped to the image shape."""
        values = {"true": self.true, "laplace": self.laplace.value, "gaussian": self.gaussian.value}
        if which not in values:
            raise ValueError(f"which must be one of {tuple(values)}. Found {which!r}.")
        return np.asarray(values[which]).reshape(self.image_shape)

    @property
    def dim(self) -> int:
        """Numbers released: pixels per image."""
        return int(np.prod(self.image_shape))

    @property
    def laplace_rmse(self) -> float:
        """Root-mean-square error per pixel of the released Laplace image."""
        return float(np.sqrt(np.mean((self.laplace.value - self.true) ** 2)))

    @property
    def gaussian_rmse(self) -> float:
        """Root-mean-square error per pixel of the released Gaussian image."""
        return float(np.sqrt(np.mean((self.gaussian.value - self.true) ** 2)))

    def rows(self) -> list[ReleaseRow]:
        d = self.dim
        what = f"mean image (class {self.label})"
        adj = f"replace-one in class {self.label} (n = {self.n} public)"
        return [
            ReleaseRow(what, self.laplace.release, adj, f"d·w/n = {d}·1/{self.n}"),
            ReleaseRow(what, self.gaussian.release, adj, f"√d·w/n = √{d}·1/{self.n}"),
        ]


def dp_mean_images(
    x: np.ndarray,
    y: np.ndarray,
    *,
    label: int,
    epsilon: float,
    delta: float,
    calibration: str = "auto",
    num_classes: int = 10,
    seed: int | None = None,
) -> MeanImageComparison:
    """DP mean image of class ``label`` by Laplace (pure eps-DP) and by Gaussian ((eps, delta)-DP), same eps.

    x: uint8 images (n, H, W) or (n, d) (pixels/255) or floats in [0, 1]; y: int labels.
    Sensitivities (replace-one, pixels in [0, 1]): L1 d/n_c, L2 sqrt(d)/n_c.
    """
    x = _check_images(x, y)
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    if isinstance(label, bool) or not isinstance(label, numbers.Integral) or not 0 <= label < k:
        raise ValueError(f"Unknown class {label!r}: choose a class in 0..{k - 1}.")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    method = gaussian_method_for(epsilon, calibration)
    mask = y == label
    if not mask.any():
        raise ValueError(f"Unknown class {label!r}: no image has this label.")
    rows = x[mask].reshape(int(mask.sum()), -1)
    bounds = None if rows.dtype == np.uint8 else (0.0, 1.0)
    true = rows.astype(np.float64).mean(axis=0) / 255.0 if bounds is None else np.clip(rows, 0, 1).mean(axis=0)
    lap_rng, gau_rng = _streams(seed, 2)
    lap = dp_mean(rows, epsilon=epsilon, mechanism="laplace", bounds=bounds, clamp=True, seed=lap_rng)
    gau = dp_mean(
        rows, epsilon=epsilon, delta=delta, mechanism="gaussian", method=method, bounds=bounds, clamp=True, seed=gau_rng
    )
    return MeanImageComparison(int(label), len(rows), _image_shape(x), true, lap, gau)


@dataclass(frozen=True)
class HistogramComparison:
    """True class counts next to their Laplace and Gaussian DP versions."""

    true: np.ndarray  # (K,) int
    laplace: DPStatistic
    gaussian: DPStatistic

    def frame(self, label_names: Sequence[str] | None = None) -> pd.DataFrame:
        """Long table: class, release ("true", "Laplace", "Gaussian"), count."""
        k = len(self.true)
        names = list(label_names) if label_names is not None else [str(i) for i in range(k)]
        if len(names) != k:
            raise ValueError(f"label_names must name {k} classes. Found {len(names)}.")
        parts = {"true": self.true.astype(np.float64), "Laplace": self.laplace.value, "Gaussian": self.gaussian.value}
        return pd.DataFrame(
            [{"class": names[i], "release": r, "count": float(v[i])} for r, v in parts.items() for i in range(k)]
        )

    def rows(self) -> list[ReleaseRow]:
        return [
            ReleaseRow("class histogram", self.laplace.release, REPLACE_ONE, "|−1| + |+1|"),
            ReleaseRow("class histogram", self.gaussian.release, REPLACE_ONE, "√((−1)² + 1²)"),
        ]


def dp_histograms(
    y: np.ndarray,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    calibration: str = "auto",
    seed: int | None = None,
) -> HistogramComparison:
    """DP class histogram by Laplace (L1 sensitivity 2) and Gaussian (L2 sensitivity sqrt 2), replace-one, same eps."""
    k = check_positive_int("num_classes (K)", num_classes)
    y = _check_labels_1d(y, k)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    method = gaussian_method_for(epsilon, calibration)
    lap_rng, gau_rng = _streams(seed, 2)
    lap = dp_histogram(y, num_classes=k, epsilon=epsilon, mechanism="laplace", seed=lap_rng)
    gau = dp_histogram(
        y, num_classes=k, epsilon=epsilon, delta=delta, mechanism="gaussian", method=method, seed=gau_rng
    )
    return HistogramComparison(np.bincount(y, minlength=k), lap, gau)


# --------------------------------------------------------------------------- 3. Analyze-Gauss DP-PCA


def subsample_indices(n: int, max_samples: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of a uniform subsample of min(n, max_samples) records (all of them when n <= max_samples)."""
    n = check_positive_int("n", n)
    m = check_positive_int("max_samples", max_samples)
    if n <= m:
        return np.arange(n)
    return np.sort(np.random.default_rng(_check_seed(seed)).choice(n, size=m, replace=False))


def pca_preprocess(x: np.ndarray) -> np.ndarray:
    """What Analyze-Gauss sees: rows flattened, uint8 read as pixels/255, each row clipped to ||x|| <= 1 (float64)."""
    x = _check_images(x)
    rows = x.reshape(len(x), -1)
    rows = rows.astype(np.float64) / 255.0 if rows.dtype == np.uint8 else rows.astype(np.float64)
    return clip_rows_to_unit_ball(rows)


def nonprivate_pca(x: np.ndarray, num_components: int) -> tuple[np.ndarray, np.ndarray]:
    """(components (k, d), eigenvalues (k,)): top eigenvectors of X^T X / n after :func:`pca_preprocess`, no noise.

    The same (uncentred, row-clipped) second-moment matrix Analyze-Gauss perturbs,
    so the rows of the DP grid are comparable with this one.
    """
    Xf = pca_preprocess(x)
    k = check_positive_int("num_components (k)", num_components)
    if k > Xf.shape[1]:
        raise ValueError(f"num_components (k) must not exceed the dimension d={Xf.shape[1]}. Found k={k}.")
    with _one_blas_thread():
        return _top_eigen(Xf.T @ Xf / len(Xf), k)


def _top_eigen(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(A)
    top = np.argsort(values)[::-1][:k]
    return vectors[:, top].T.copy(), values[top].copy()


def orient_components(components: np.ndarray) -> np.ndarray:
    """Fix each row's arbitrary sign so that its entry of largest magnitude is positive (post-processing)."""
    C = np.asarray(components, dtype=np.float64)
    idx = np.argmax(np.abs(C), axis=1)
    signs = np.sign(C[np.arange(len(C)), idx])
    signs[signs == 0] = 1.0
    return C * signs[:, None]


@dataclass(frozen=True)
class PCAComparison:
    """Top-k components per row: non-private first, then Analyze-Gauss at each epsilon (rows of the poster's grid)."""

    epsilons: tuple[float | None, ...]  # None = non-private
    components: np.ndarray  # (rows, k, d), each row's components orthonormal, signs oriented
    releases: tuple[GaussianRelease | None, ...]
    captured: tuple[float, ...]  # variance captured / non-private top-k variance (1.0 for the non-private row)
    n_used: int
    n_total: int
    image_shape: tuple[int, ...]
    delta: float
    exact_eigenvalues: np.ndarray  # (k,) top eigenvalues of the exact X^T X / n

    def images(self) -> np.ndarray:
        """(rows, k, *image_shape)."""
        return self.components.reshape(*self.components.shape[:2], *self.image_shape)

    def noise_spectral_norm(self, row: int) -> float:
        """Typical spectral norm 2 sigma sqrt(d) of this row's symmetric Gaussian noise matrix (Wigner; 0 if exact)."""
        rel = self.releases[row]
        return 0.0 if rel is None else 2.0 * rel.sigma * math.sqrt(self.components.shape[2])

    def row_labels(self) -> list[str]:
        return [
            "non-private" if rel is None else f"ε = {rel.epsilon:g} ({rel.method})"
            for rel in self.releases
        ]

    def table(self) -> pd.DataFrame:
        """One line per row: ε, δ, calibration, sensitivity, σ and the share of the non-private variance captured."""
        out = []
        for label, rel, cap in zip(self.row_labels(), self.releases, self.captured):
            out.append(
                {
                    "row": label,
                    "ε": "∞" if rel is None else f"{rel.epsilon:g}",
                    "δ": "—" if rel is None else f"{rel.delta:.0e}",
                    "guarantee (by construction)": "none (exact PCA)" if rel is None else guarantee_text(rel),
                    "L2 sensitivity √2/n": "—" if rel is None else f"{rel.sensitivity:.3g}",
                    "noise σ per matrix entry": "0" if rel is None else f"{rel.sigma:.3g}",
                    "variance captured vs exact top-k": f"{100 * cap:.1f} %",
                }
            )
        return pd.DataFrame(out)


def pca_comparison(
    x: np.ndarray,
    *,
    epsilons: Sequence[float] = (10.0, 2.0, 0.1),
    num_components: int = 10,
    delta: float = 1e-5,
    max_samples: int = 5000,
    calibration: str = "auto",
    seed: int | None = None,
    subsample_seed: int = 0,
) -> PCAComparison:
    """Analyze-Gauss DP-PCA (Dwork et al. 2014) at each epsilon next to exact PCA of the same matrix.

    At most ``max_samples`` images are used (a fixed uniform subsample drawn with
    ``subsample_seed``, so a new ``seed`` changes only the noise). The guarantee
    is for that subsample, n_used public; no amplification by subsampling is claimed.
    """
    x = _check_images(x)
    eps_list = [check_epsilon(e) for e in epsilons]
    if not eps_list:
        raise ValueError("epsilons must hold at least one value.")
    delta = check_delta(delta)
    methods = [gaussian_method_for(e, calibration) for e in eps_list]
    k = check_positive_int("num_components (k)", num_components)
    idx = subsample_indices(len(x), max_samples, subsample_seed)
    Xf = pca_preprocess(np.ascontiguousarray(x[idx]))
    if k > Xf.shape[1]:
        raise ValueError(f"num_components (k) must not exceed the dimension d={Xf.shape[1]}. Found k={k}.")
    with _one_blas_thread():
        A = Xf.T @ Xf / len(Xf)
        exact, exact_values = _top_eigen(A, k)
        total = float(exact_values.sum())
        comps, releases, captured = [orient_components(exact)], [None], [1.0]
        for eps, method, rng in zip(eps_list, methods, _streams(seed, len(eps_list))):
            res = analyze_gauss_pca(Xf, num_components=k, epsilon=eps, delta=delta, method=method, seed=rng)
            comps.append(orient_components(res.components))
            releases.append(res.release)
            cap = float(np.trace(res.components @ A @ res.components.T)) / total if total > 0 else float("nan")
            captured.append(cap)
    return PCAComparison(
        (None, *eps_list),
        np.stack(comps),
        tuple(releases),
        tuple(captured),
        len(idx),
        len(x),
        _image_shape(x),
        delta,
        exact_values,
    )


# --------------------------------------------------------------------------- figures


def _layout(fig: go.Figure, title: str, height: int, *, top: int = 60) -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 18}, "x": 0.0, "xanchor": "left"},
        font=_FONT,
        height=height,
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
    )
    return fig


def _log_ticks(values) -> list[float]:
    """Powers of ten spanning ``values`` (clean log-axis ticks: 0.1, 1, 10, …)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[v > 0]
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    return [10.0**e for e in range(lo, hi + 1)]


def _mark_epsilon(fig: go.Figure, current: float) -> None:
    """Dotted vertical line at the chosen ε on a log x-axis, labelled at the top (log axes place text in log10 units)."""
    fig.add_vline(x=current, line={"color": "grey", "dash": "dot"})
    fig.add_annotation(
        x=math.log10(current),
        y=1.0,
        yref="paper",
        text=f"ε = {current:g}",
        showarrow=False,
        xanchor="left",
        yanchor="top",
        xshift=4,
        font={"color": "#555"},
    )


def label_scale_figure(scales: pd.DataFrame, *, current: float | None = None) -> go.Figure:
    """Laplace scale b = Δf/ε vs ε (log-log), one line per label encoding."""
    fig = go.Figure()
    for enc, part in scales.groupby("encoding", sort=False):
        s = part["sensitivity"].iloc[0]
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"],
                y=part["scale"],
                mode="lines+markers",
                name=f"{enc} (Δf = {s:g})",
                line={"color": _COLORS.get(enc), "width": 3},
                hovertemplate="ε = %{x:g}<br>b = %{y:.3g}<extra></extra>",
            )
        )
    if current is not None:
        _mark_epsilon(fig, current)
    fig.update_xaxes(title="ε (privacy budget, log scale)", type="log", tickvals=_log_ticks(scales["epsilon"]))
    fig.update_yaxes(title="Laplace scale b = Δf/ε", type="log", tickvals=_log_ticks(scales["scale"]))
    return _layout(fig, "Laplace noise scale per label coordinate", 460)


def label_accuracy_figure(acc: pd.DataFrame, *, current: float | None = None, n: int | None = None) -> go.Figure:
    """Share of labels recovered after label-only Laplace vs ε, one line per encoding."""
    fig = go.Figure()
    for enc, part in acc.groupby("encoding", sort=False):
        how = "argmax of noisy one-hot" if enc == "one-hot" else "noisy number, rounded"
        fig.add_trace(
            go.Scatter(
                x=part["epsilon"],
                y=100 * part["accuracy"],
                mode="lines+markers",
                name=f"{enc}: {how}",
                line={"color": _COLORS.get(enc), "width": 3},
                hovertemplate="ε = %{x:g}<br>%{y:.1f} % correct<extra></extra>",
            )
        )
    if current is not None:
        _mark_epsilon(fig, current)
    fig.update_xaxes(title="ε (privacy budget, log scale)", type="log", tickvals=_log_ticks(acc["epsilon"]))
    fig.update_yaxes(title="labels still correct (%)", range=[0, 103])
    where = f" (n = {n:,})" if n else ""
    return _layout(fig, f"Released labels still correct{where}", 460)


def _gray_heatmap(img: np.ndarray, *, zmin: float, zmax: float, colorscale="gray", showscale=False, **kw) -> go.Heatmap:
    return go.Heatmap(
        z=np.asarray(img),
        zmin=zmin,
        zmax=zmax,
        colorscale=colorscale,
        showscale=showscale,
        hovertemplate="row %{y}, col %{x}: %{z:.3f}<extra></extra>",
        **kw,
    )


def _image_axes(fig: go.Figure, rows: int, cols: int) -> None:
    for i in range(rows * cols):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"xaxis{suffix}"].update(
            showticklabels=False, ticks="", showgrid=False, zeroline=False, constrain="domain"
        )
        fig.layout[f"yaxis{suffix}"].update(
            showticklabels=False,
            ticks="",
            showgrid=False,
            zeroline=False,
            autorange="reversed",
            scaleanchor=f"x{suffix}",
            constrain="domain",
        )


def mean_images_figure(cmp: MeanImageComparison, *, label_name: str | None = None) -> go.Figure:
    """Three grayscale images: true mean, Laplace DP mean, Gaussian DP mean (pixel intensity 0–1)."""
    if len(cmp.image_shape) != 2:
        raise ValueError(f"mean_images_figure needs 2-D images. Found image shape {cmp.image_shape}.")
    lap, gau = cmp.laplace.release, cmp.gaussian.release
    titles = [
        f"True mean (n = {cmp.n:,})",
        f"Laplace, ε = {lap.epsilon:g}<br>RMSE {cmp.laplace_rmse:.3f}",
        f"Gaussian ({gau.method}), ε = {gau.epsilon:g}, δ = {gau.delta:.0e}<br>RMSE {cmp.gaussian_rmse:.3f}",
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=0.04)
    for col, which in enumerate(("true", "laplace", "gaussian"), start=1):
        fig.add_trace(
            _gray_heatmap(
                cmp.image(which),
                zmin=0.0,
                zmax=1.0,
                showscale=col == 3,
                colorbar={"title": {"text": "pixel<br>intensity"}, "len": 0.9},
            ),
            row=1,
            col=col,
        )
    _image_axes(fig, 1, 3)
    name = label_name if label_name is not None else str(cmp.label)
    fig.update_annotations(font={"size": 15})
    return _layout(fig, f"Mean image of digit {name}: exact vs DP (noisy pixels clamped to [0, 1])", 470, top=110)


def histogram_figure(cmp: HistogramComparison, *, label_names: Sequence[str] | None = None) -> go.Figure:
    """Top: grouped bars of true, Laplace and Gaussian counts per class. Bottom: the noise each added (DP − true)."""
    frame = cmp.frame(label_names)
    lap, gau = cmp.laplace.release, cmp.gaussian.release
    names = {
        "true": "true counts",
        "Laplace": f"Laplace (ε = {lap.epsilon:g}, b = {lap.scale:.3g})",
        "Gaussian": f"Gaussian (ε = {gau.epsilon:g}, δ = {gau.delta:.0e}, σ = {gau.sigma:.3g})",
    }
    colors = {"true": _COLORS["true"], "Laplace": _COLORS["Laplace"], "Gaussian": _COLORS["Gaussian"]}
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.6, 0.4],
        vertical_spacing=0.1,
        subplot_titles=["counts", "noise added (DP count − true count)"],
    )
    true = frame[frame["release"] == "true"]["count"].to_numpy()
    for rel, part in frame.groupby("release", sort=False):
        fig.add_trace(
            go.Bar(
                x=part["class"],
                y=part["count"],
                name=names[rel],
                marker_color=colors[rel],
                legendgroup=rel,
                hovertemplate="class %{x}: %{y:.1f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        if rel != "true":
            fig.add_trace(
                go.Bar(
                    x=part["class"],
                    y=part["count"].to_numpy() - true,
                    name=names[rel],
                    marker_color=colors[rel],
                    legendgroup=rel,
                    showlegend=False,
                    hovertemplate="class %{x}: %{y:+.2f}<extra></extra>",
                ),
                row=2,
                col=1,
            )
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    fig.update_xaxes(title="class (digit)", row=2, col=1)
    fig.update_yaxes(title="images", row=1, col=1)
    fig.update_yaxes(title="noise", zeroline=True, zerolinecolor="#888", row=2, col=1)
    fig.update_annotations(font={"size": 15})
    fig = _layout(fig, f"Class histogram of {int(cmp.true.sum()):,} labels: exact vs DP", 600, top=70)
    fig.update_layout(legend={"y": -0.14})
    return fig


def image_mosaic(images: np.ndarray, *, gap: int = 3) -> np.ndarray:
    """Tile (rows, cols, H, W) images into one (rows·(H+gap)−gap, cols·(W+gap)−gap) array, NaN in the gaps.

    Each tile is divided by its own largest |value|, so every image spans [−1, 1]
    (eigenvectors have no common scale). One array = one heatmap trace, which the
    browser draws far faster than one subplot per image.
    """
    imgs = np.asarray(images, dtype=np.float64)
    if imgs.ndim != 4:
        raise ValueError(f"images must have shape (rows, cols, H, W). Found {imgs.shape}.")
    rows, cols, h, w = imgs.shape
    scale = np.max(np.abs(imgs), axis=(2, 3), keepdims=True)
    imgs = imgs / np.where(scale > 0, scale, 1.0)
    out = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), np.nan)
    for r in range(rows):
        for c in range(cols):
            out[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = imgs[r, c]
    return out


def pca_grid_figure(pca: PCAComparison) -> go.Figure:
    """Grid of component images: rows = non-private and each ε, columns = PC 1..k (each image on its own ± scale)."""
    if len(pca.image_shape) != 2:
        raise ValueError(f"pca_grid_figure needs 2-D images. Found image shape {pca.image_shape}.")
    imgs = pca.images()
    rows, k, h, w = imgs.shape
    gap = 3
    fig = go.Figure(
        go.Heatmap(
            z=image_mosaic(imgs, gap=gap).astype(np.float32),  # float32: half the payload, same picture
            zmin=-1.0,
            zmax=1.0,
            colorscale="gray",
            showscale=False,
            hoverongaps=False,
            hovertemplate="%{z:.2f} (scaled)<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickvals=[c * (w + gap) + (w - 1) / 2 for c in range(k)],
        ticktext=[f"PC {c + 1}" for c in range(k)],
        side="top",
        tickfont={"size": 14},
        showgrid=False,
        zeroline=False,
        ticks="",
        constrain="domain",
    )
    fig.update_yaxes(
        tickvals=[r * (h + gap) + (h - 1) / 2 for r in range(rows)],
        ticktext=[label.replace(" (", "<br>(") for label in pca.row_labels()],
        autorange="reversed",
        scaleanchor="x",
        tickfont={"size": 14},
        showgrid=False,
        zeroline=False,
        ticks="",
        constrain="domain",
        constraintoward="top",  # narrow containers: keep the grid under its title
    )
    fig.update_layout(plot_bgcolor="white")
    title = f"Top-{k} principal components: exact vs Analyze-Gauss (δ = {pca.delta:.0e}, n = {pca.n_used:,})"
    return _layout(fig, title, 100 + 125 * rows, top=80)
