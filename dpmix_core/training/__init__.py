"""Utility side of a release: train models on released (or baseline) data, evaluate on the real test split.

Modules (torch is imported by the ones that need it, not here):

* :mod:`~dpmix_core.training.models` — thesis CNN (Table 4.1), DP-CDA CNN (Table 1; batch-norm / GroupNorm),
  ScatterNet + linear (DPFMix) or small CNN (Tramèr & Boneh 2021), linear / logistic;
* :mod:`~dpmix_core.training.losses` — KL to noisy soft labels, CE on argmax, generalized KL, MSE;
* :mod:`~dpmix_core.training.train` — the in-memory training loop and evaluation;
* :mod:`~dpmix_core.data.scattering` — cached ScatterNet features (kymatio), per-sample GroupNorm;
* :mod:`~dpmix_core.training.dpsgd` — DP-SGD with Opacus, calibrated with our accountants;
* :mod:`~dpmix_core.training.pca` — Analyze-Gauss DP-PCA projection;
* :mod:`~dpmix_core.experiments.runner` — ``run_job(config, reporter)`` / ``run_config(config)``;
* :mod:`~dpmix_core.training.protocols` — each model's paper protocol (optimiser, schedule, early stopping);
* :mod:`~dpmix_core.training.collapse` — did the trained model learn (not the constant predictor, not chance)?
* :mod:`~dpmix_core.training.batchnorm` — BatchNorm statistics re-estimated on unlabelled inputs (AdaBN): the
  diagnostic of a release/test shift.
"""

from dpmix_core.training.names import LOSSES, METHODS, MODELS

__all__ = ["LOSSES", "METHODS", "MODELS"]
