"""Teaching helpers for the "DP foundations" page: sensitivity, Laplace vs Gaussian, Analyze-Gauss DP-PCA, why a
mixing release is private (averaging, subsampling, composition), and why public bounds set the noise.

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

One module per lesson: label_sensitivity, laplace_vs_gaussian, dp_pca, mixing_effects, public_bounds (common: shared
helpers).
"""

from dpmix_core.teaching.common import (
    GAUSSIAN_CALIBRATIONS,
    LABEL_ADJACENCY,
    LABEL_ENCODINGS,
    REPLACE_ONE,
    REPLACE_ONE_LONG,
)
from dpmix_core.teaching.dp_pca import (
    PCAComparison,
    image_mosaic,
    nonprivate_pca,
    orient_components,
    pca_comparison,
    pca_grid_figure,
    pca_preprocess,
    subsample_indices,
)
from dpmix_core.teaching.label_sensitivity import (
    LabelChangeExample,
    label_accuracy_figure,
    label_change_example,
    label_noise_scale,
    label_noise_scales,
    label_release_accuracy,
    label_scale_figure,
    label_sensitivity,
)
from dpmix_core.teaching.laplace_vs_gaussian import (
    HistogramComparison,
    MeanImageComparison,
    ReleaseRow,
    dp_histograms,
    dp_mean_images,
    gaussian_method_for,
    guarantee_text,
    histogram_figure,
    mean_images_figure,
    noise_std,
    release_table,
)
from dpmix_core.teaching.mixing_effects import (
    CLIPPED_MODELS,
    EFFECT_MODELS,
    EffectStage,
    MixingEffects,
    effect_model,
    mixing_effects,
    mixing_effects_figure,
)
from dpmix_core.teaching.public_bounds import (
    BOUNDS_HIGHS,
    BoundsLesson,
    bounds_figure,
    bounds_lesson,
    survey_ages,
)

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
    "CLIPPED_MODELS",
    "EFFECT_MODELS",
    "EffectStage",
    "MixingEffects",
    "effect_model",
    "mixing_effects",
    "mixing_effects_figure",
    "BOUNDS_HIGHS",
    "BoundsLesson",
    "bounds_figure",
    "bounds_lesson",
    "survey_ages",
]
