"""One call from "dataset + mechanism name + knobs" to released data and its privacy card."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dpmix_core.datasets import Dataset
from dpmix_core.mechanisms import (
    ClassCentricParams,
    DPMixParams,
    PoissonMixParams,
    SyntheticData,
    class_centric_mix,
    dpmix,
    laplace_label_release,
    local_perturbation,
    poisson_mix,
)
from dpmix_core.mechanisms.mixing import ZSCORE_CAVEAT
from dpmix_core.release import MixingRelease

__all__ = ["MECHANISMS", "SynthesisConfig", "Synthesis", "synthesize", "planned_release", "resolve_sigma"]

MECHANISMS = ("dpmix", "class-centric", "poisson", "local", "label-laplace")


@dataclass(frozen=True)
class SynthesisConfig:
    """Everything that determines a synthetic release (with the dataset and seed: reproducible)."""

    mechanism: str
    l: int = 256
    T: int = 10000
    sigma_x: float | None = None
    sigma_y: float | None = None
    sigma_ratio: float = 1.0
    target_epsilon: float | None = None  # calibrate sigma to this with `accountant`
    accountant: str | None = None
    delta: float = 1e-5
    preprocessing: str = "zscore"  # class-centric: "zscore" (DP-CDA) or "unit" (thesis)
    clip: float = 1.0  # class-centric c
    zscore_constants: tuple[float, float] | None = None  # public (mean, std) for every feature; None: from the data
    clip_x: float = 1.0  # Poisson Cx
    clip_y: float = 1.0  # Poisson Cy
    hard_labels: bool = False
    clamp_negative: bool = False
    label_epsilon: float = 1.0  # label-laplace
    label_task: str = "classification"
    feature_range: tuple[float, float] | None = None  # public bounds of float features (uint8 images: 0..255)
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"Unknown mechanism {self.mechanism!r}. Choose one of: {', '.join(MECHANISMS)}.")
        if self.mechanism == "label-laplace":
            return
        if self.target_epsilon is None:
            if self.sigma_x is None:
                raise ValueError("Give sigma_x (and sigma_y), or a target epsilon with an accountant.")
        elif self.accountant is None:
            raise ValueError("A target epsilon needs an accountant to calibrate with (e.g. rdp-wor, pld-poisson).")
        if self.zscore_constants is not None and not self.zscore_constants[1] > 0:
            raise ValueError(f"z-score std must be positive. Found {self.zscore_constants[1]}.")
        if not (math.isfinite(self.sigma_ratio) and self.sigma_ratio > 0):
            raise ValueError(f"sigma ratio lambda must be positive. Found {self.sigma_ratio}.")


@dataclass(frozen=True)
class Synthesis:
    data: SyntheticData
    config: SynthesisConfig  # with the sigmas actually used
    dataset_name: str
    dataset_source: str
    n: int


def _sigmas(config: SynthesisConfig) -> tuple[float, float]:
    sx = 1.0 if config.sigma_x is None else config.sigma_x
    sy = config.sigma_ratio * sx if config.sigma_y is None else config.sigma_y
    return sx, sy


def _params(config: SynthesisConfig, sigma_x: float, sigma_y: float):
    if config.mechanism in ("dpmix", "local"):
        l = 1 if config.mechanism == "local" else config.l
        return DPMixParams(mix_degree=l, num_points=config.T, sigma_x=sigma_x, sigma_y=sigma_y,
                           clamp_negative=config.clamp_negative)
    if config.mechanism == "class-centric":
        return ClassCentricParams(mix_degree=config.l, num_points=config.T, sigma_x=sigma_x, sigma_y=sigma_y,
                                  preprocessing=config.preprocessing, clip=config.clip, hard_labels=config.hard_labels)
    return PoissonMixParams(mix_degree=config.l, num_points=config.T, sigma_x=sigma_x, sigma_y=sigma_y,
                            clip_x=config.clip_x, clip_y=config.clip_y)


def planned_release(config: SynthesisConfig, dataset: Dataset) -> MixingRelease:
    """The release the mechanism will make on this dataset (before any data is touched)."""
    sx, sy = _sigmas(config)
    params = _params(config, sx, sy)
    d, k = dataset.feature_dim, dataset.num_classes
    if isinstance(params, ClassCentricParams):
        counts = tuple(int(c) for c in dataset.class_counts())
        release = params.release(class_sizes=counts, dx=d, dy=k)
        if params.preprocessing == "zscore" and config.zscore_constants is None:
            release = replace(release, notes=release.notes + (ZSCORE_CAVEAT,))
        return release
    if isinstance(params, PoissonMixParams):
        return params.release(n=dataset.n_train)
    return params.release(n=dataset.n_train, dx=d, dy=k)


def resolve_sigma(config: SynthesisConfig, dataset: Dataset) -> SynthesisConfig:
    """The config with explicit sigmas: a target epsilon is calibrated on the exact release for this dataset."""
    if config.mechanism == "label-laplace":
        return config
    if config.target_epsilon is not None:
        from dpmix_core.accountants import get_accountant  # lazy: dp_accounting and scipy cost ~1 s to import
        from dpmix_core.calibration import calibrate_sigma

        cal = calibrate_sigma(get_accountant(config.accountant), planned_release(config, dataset),
                              target_epsilon=config.target_epsilon, delta=config.delta, sigma_ratio=config.sigma_ratio)
        return replace(config, sigma_x=cal.sigma_x, sigma_y=cal.sigma_y, target_epsilon=None)
    sx, sy = _sigmas(config)
    return replace(config, sigma_x=sx, sigma_y=sy)


def synthesize(config: SynthesisConfig, dataset: Dataset) -> Synthesis:
    """Run the configured mechanism on the training split (calibrating sigma first if asked)."""
    X = dataset.x_train.reshape(dataset.n_train, -1)
    y = dataset.y_train
    k = dataset.num_classes
    if config.mechanism == "label-laplace":
        data = laplace_label_release(X, y, num_classes=k, epsilon=config.label_epsilon, task=config.label_task,
                                     postprocess=True, seed=config.seed)
        return Synthesis(data, config, dataset.name, dataset.source, dataset.n_train)
    config = resolve_sigma(config, dataset)
    sx, sy = config.sigma_x, config.sigma_y
    params = _params(config, sx, sy)
    common = dict(num_classes=k, params=params, seed=config.seed, device=config.device,
                  feature_range=config.feature_range)
    if config.mechanism == "local":
        data = local_perturbation(X, y, num_classes=k, num_points=config.T, sigma_x=sx, sigma_y=sy,
                                  clamp_negative=config.clamp_negative, seed=config.seed, device=config.device,
                                  feature_range=config.feature_range)
    elif isinstance(params, ClassCentricParams):
        if config.zscore_constants is not None:
            mean, std = config.zscore_constants
            common.update(mean=np.full(X.shape[1], mean), std=np.full(X.shape[1], std))
        data = class_centric_mix(X, y, **common)
    elif isinstance(params, PoissonMixParams):
        data = poisson_mix(X, y, **common)
    else:
        data = dpmix(X, y, **common)
    return Synthesis(data, config, dataset.name, dataset.source, dataset.n_train)
