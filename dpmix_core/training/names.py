"""Names the training code accepts (no torch import: configs validate without loading torch)."""

from dpmix_core.data.scattering import FEATURES  # noqa: F401 -- re-exported: the feature transforms live with the data

METHODS = ("mixing", "non-private", "dp-sgd", "label-laplace", "dp-pca")
MODELS = (
    "thesis-cnn",
    "dpfmix-cnn",
    "dpcda-cnn",
    "dpcda-cnn-gn",
    "scatter-linear",
    "scatter-cnn",
    "linear",
    "corrected-lsq",
)
SCATTER_MODELS = ("scatter-linear", "scatter-cnn")  # take (C, h, w) scattering coefficients
CLOSED_FORM_MODELS = ("corrected-lsq",)  # fitted in one step, no optimiser (training.corrected_lsq)
FEATURE_MODELS = (*SCATTER_MODELS, "linear", *CLOSED_FORM_MODELS)  # the models that train on scattering features
IMAGE_MODELS = ("thesis-cnn", "dpfmix-cnn", "dpcda-cnn", "dpcda-cnn-gn")
BATCHNORM_MODELS = ("dpcda-cnn",)  # batch statistics mix samples: not DP-SGD compatible (Opacus refuses them)
LOSSES = ("kl", "ce", "gkl", "mse")
OPTIMIZERS = ("adam", "sgd")
# plateau: x lr_gamma after lr_patience epochs without a lower validation loss (torch ReduceLROnPlateau)
SCHEDULES = ("constant", "step", "multistep", "cosine", "plateau")
# private-ranges: DP-SGD on one's own file rescales each feature by its range, released privately
# (mechanisms.feature_ranges) as a release's --private-ranges finds it: 10 rounds, one-hot features left out;
# dp-ranges: the first version (3 rounds, every column counted), kept so that the runs stored with it mean what they did
DP_RANGE_NORMS = ("private-ranges", "dp-ranges")
INPUT_NORMS = ("none", "rms", "standardize", *DP_RANGE_NORMS)
PRECISIONS = ("fp32", "bf16")  # training arithmetic: float32, or bfloat16 autocast (training.precision)
INITS = ("torch", "keras")  # weight initialisation: torch.nn defaults, or TensorFlow/Keras defaults (the thesis)
# what the real test split goes through: the release's own feature map, that map without its clip (DP-CDA's
# class-centric z-score: the paper tests on "the original test partition", and the clip bounds the private records),
# or that map rescaled to the released points' median norm (the scale a BatchNorm CNN's running statistics fit)
TEST_INPUTS = ("release", "unclipped", "release-scale")
DPSGD_ACCOUNTANTS = ("pld-poisson", "rdp-poisson")
