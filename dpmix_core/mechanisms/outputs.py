"""What a mechanism hands back: the released data plus the description the accountants read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpmix_core.mechanisms.descriptions import GaussianRelease, LaplaceLabelRelease, LaplaceRelease
from dpmix_core.privacy.release import MixingRelease

__all__ = ["Release", "SyntheticData", "DPStatistic", "DPPCAResult"]

Release = MixingRelease | LaplaceLabelRelease | LaplaceRelease | GaussianRelease


@dataclass(frozen=True)
class SyntheticData:
    """Released points: x float32 (T, d), y float32 (T, K) (soft labels, or one-hot hard labels where stated).

    ``release`` is the single source of truth for the privacy guarantee (feed a
    MixingRelease to ``dpmix_core.privacy.accountants``); ``notes`` lists preprocessing,
    post-processing and caveats in plain words.
    """

    x: np.ndarray
    y: np.ndarray
    release: Release
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("x", "y"):
            a = getattr(self, name)
            if not isinstance(a, np.ndarray) or a.ndim != 2 or a.dtype != np.float32:
                raise ValueError(f"{name} must be a 2-D float32 array. Found {getattr(a, 'shape', type(a))}.")
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(
                f"x and y must have the same number of rows. Found {self.x.shape[0]} and {self.y.shape[0]}."
            )
        if not isinstance(self.notes, tuple) or not all(isinstance(s, str) for s in self.notes):
            raise ValueError(f"notes must be a tuple of strings. Found {self.notes!r}.")

    @property
    def num_points(self) -> int:
        return int(self.x.shape[0])

    def hard_labels(self) -> np.ndarray:
        """argmax of each label row (post-processing; DP-CDA Eq. 1)."""
        return np.argmax(self.y, axis=1)


@dataclass(frozen=True)
class DPStatistic:
    """A DP statistic (mean, variance, histogram) and its release description."""

    value: np.ndarray
    release: LaplaceRelease | GaussianRelease
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class DPPCAResult:
    """Analyze-Gauss PCA: top-k eigenvectors (rows of ``components``) of the noisy second-moment matrix."""

    components: np.ndarray  # (k, d), orthonormal rows, largest eigenvalue first
    eigenvalues: np.ndarray  # (k,)
    noisy_second_moment: np.ndarray  # (d, d) symmetric: X^T X / n + E
    release: GaussianRelease
    notes: tuple[str, ...] = field(default=())
