"""Mechanisms for DPMix Studio: random mixing (DPMix, class-centric, Poisson), label-only Laplace, DP statistics, DP-PCA.

Every mechanism returns its output together with a description of what was
released: a :class:`~dpmix_core.privacy.release.MixingRelease` for the mixing
mechanisms (read by ``dpmix_core.privacy.accountants``), a
:class:`LaplaceLabelRelease`, :class:`LaplaceRelease` or
:class:`GaussianRelease` otherwise. One source of truth for epsilon.

Randomness: ``seed`` is an int, a ``numpy.random.Generator``, a
``numpy.random.SeedSequence`` or None (fresh OS entropy). The same seed gives
bit-identical output on the same device type. The generators (PCG64,
torch's CPU/CUDA generators) and floating-point noise are fine for research
and teaching but are not hardened against floating-point side channels
(Mironov 2012); do not use this module as a production DP library.

No Streamlit imports here; torch is imported only when a mixing mechanism runs.
"""

from dpmix_core.mechanisms._checks import check_features
from dpmix_core.mechanisms.descriptions import (
    GaussianRelease,
    LaplaceLabelRelease,
    LaplaceRelease,
    gaussian_delta,
    gaussian_sigma,
)
from dpmix_core.mechanisms.engine import resolve_device
from dpmix_core.mechanisms.label_dp import laplace_label_release
from dpmix_core.mechanisms.mixing import (
    class_centric_mix,
    dpmix,
    hard_label_agreement,
    local_perturbation,
    poisson_mix,
)
from dpmix_core.mechanisms.outputs import DPPCAResult, DPStatistic, SyntheticData
from dpmix_core.mechanisms.pca import analyze_gauss_pca, pca_sensitivity, symmetric_gaussian_noise
from dpmix_core.mechanisms.sampling import sample_mixture_indices, sample_poisson_batches
from dpmix_core.mechanisms.stats import dp_histogram, dp_mean, dp_variance, mean_sensitivity, variance_sensitivity

__all__ = [
    "check_features",
    "resolve_device",
    "DPPCAResult",
    "DPStatistic",
    "GaussianRelease",
    "LaplaceLabelRelease",
    "LaplaceRelease",
    "SyntheticData",
    "analyze_gauss_pca",
    "class_centric_mix",
    "dp_histogram",
    "dp_mean",
    "dp_variance",
    "dpmix",
    "gaussian_delta",
    "gaussian_sigma",
    "hard_label_agreement",
    "laplace_label_release",
    "local_perturbation",
    "mean_sensitivity",
    "pca_sensitivity",
    "poisson_mix",
    "sample_mixture_indices",
    "sample_poisson_batches",
    "symmetric_gaussian_noise",
    "variance_sensitivity",
]
