"""Classifiers used to measure the utility of a release: thesis / DPFMix CNN, DP-CDA CNN, ScatterNet + linear or
small CNN, linear.

Every model takes flat float32 rows (B, d), the layout the mechanisms release,
and reshapes them itself: ``input_shape`` is the dataset's record shape,
(H, W) for grey images, (H, W, C) for colour images (channels last, as
``Dataset.x_train``), or (d,) for feature vectors. ``num_outputs`` is K for
classification and 1 for regression on the label value.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from dpmix_core.training.names import BATCHNORM_MODELS, IMAGE_MODELS, INITS, MODELS

__all__ = [
    "MODELS",
    "BATCHNORM_MODELS",
    "IMAGE_MODELS",
    "ThesisCNN",
    "DPCDACNN",
    "ScatterLinear",
    "ScatterCNN",
    "LinearModel",
    "INITS",
    "build_model",
    "keras_initialise",
    "count_parameters",
]


class _ToImage(nn.Module):
    """Flat rows (B, d) -> (B, C, H, W) for a record shape (H, W) or (H, W, C)."""

    def __init__(self, input_shape: tuple[int, ...]) -> None:
        super().__init__()
        if len(input_shape) not in (2, 3):
            raise ValueError(f"image models need records of shape (H, W) or (H, W, C). Found {input_shape}.")
        self.shape = tuple(int(s) for s in input_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.shape) == 2:
            return x.reshape(x.shape[0], 1, *self.shape)
        h, w, c = self.shape
        return x.reshape(x.shape[0], h, w, c).permute(0, 3, 1, 2)


def _channels(input_shape: tuple[int, ...]) -> int:
    return 1 if len(input_shape) == 2 else int(input_shape[2])


def _flat_size(body: nn.Module, input_shape: tuple[int, ...]) -> int:
    with torch.no_grad():
        return int(body(torch.zeros(1, math.prod(input_shape))).shape[1])


class ThesisCNN(nn.Module):
    """Thesis Table 4.1: conv 32@5x5, max-pool 2, conv 48@5x5, max-pool 2, fc 100, fc 100, fc K.

    ReLU after every hidden layer; 'valid' convolutions (Keras' default), so a
    28x28 input gives 48x4x4 = 768 features before fc 100. No batch-norm:
    usable with DP-SGD as it is.

    ``padding=2`` is the same network as DPFMix Table 5 prints it (Lee et al. 2019's CNN, "stride 1, padding 2"):
    a 28x28 input then gives 48x7x7 = 2352 features and 285,690 parameters. Table 5 states 357,690, which is
    this network on a 32x32 single-channel input (48x8x8 = 3072 features); we keep MNIST's 28x28 and take the
    layer list, not the count, as the specification (tested both ways).
    """

    def __init__(self, input_shape: tuple[int, ...], num_outputs: int, *, padding: int = 0) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _ToImage(input_shape),
            nn.Conv2d(_channels(input_shape), 32, 5, padding=padding),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 48, 5, padding=padding),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(_flat_size(self.features, input_shape), 100),
            nn.ReLU(),
            nn.Linear(100, 100),
            nn.ReLU(),
            nn.Linear(100, num_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class DPCDACNN(nn.Module):
    """DP-CDA CNN (Saha, Tonoy, Imtiaz, Table 1), layer by layer.

    conv 32@5x5 (stride 1, padding 2) -> ReLU -> BatchNorm -> max-pool 2;
    conv 64@3x3 (padding 1) -> ReLU -> BatchNorm -> max-pool 2; flatten
    (3136 for 28x28); fc 100 -> ReLU -> dropout 0.5; fc 100 -> ReLU ->
    dropout 0.5; fc K. ``norm="batch"`` is the paper's; ``norm="group"``
    swaps in GroupNorm (8 groups), which depends on one sample only, for
    DP-SGD (Opacus rejects BatchNorm: it mixes the samples of a batch).
    Before #13 this class used guessed widths (3x3 convs, fc 128).
    """

    def __init__(self, input_shape: tuple[int, ...], num_outputs: int, *, norm: str = "batch") -> None:
        super().__init__()
        if norm not in ("batch", "group"):
            raise ValueError(f"norm must be 'batch' or 'group'. Found {norm!r}.")

        def block(c_in: int, c_out: int, kernel: int) -> list[nn.Module]:
            layer = nn.BatchNorm2d(c_out) if norm == "batch" else nn.GroupNorm(8, c_out)
            return [nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2), nn.ReLU(), layer, nn.MaxPool2d(2)]

        self.features = nn.Sequential(
            _ToImage(input_shape), *block(_channels(input_shape), 32, 5), *block(32, 64, 3), nn.Flatten()
        )
        self.head = nn.Sequential(
            nn.Linear(_flat_size(self.features, input_shape), 100),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(100, 100),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(100, num_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _scattering_shape(model: str, input_shape: tuple[int, ...], groups: int) -> tuple[int, int, int]:
    """(C, h, w) of scattering coefficients, C a multiple of the GroupNorm ``groups``; else a one-line error."""
    if len(input_shape) != 3:
        raise ValueError(f"{model} takes scattering features of shape (C, h, w). Found {input_shape}.")
    c, h, w = (int(s) for s in input_shape)
    if c % groups:
        raise ValueError(f"scattering channels ({c}) must be a multiple of the {groups} groups.")
    return c, h, w


class ScatterLinear(nn.Module):
    """Linear classifier on ScatterNet features (Tramer & Boneh 2021; DPFMix Table 3).

    Input: flat scattering coefficients (B, channels*h*w) with ``channels`` a
    multiple of 81 (J=2, L=8: 81 per input channel, h = w = 7 for 28x28).
    Per-sample GroupNorm without learned parameters (27 groups of 3
    channels, as Tramer & Boneh) puts every sample on one scale whatever the
    release did to it (clipping, division by m); then one linear layer.
    ``norm=False``: the linear layer only, for releases whose features were
    group-normalised per sample *before* clipping and mixing (DPFMix App. E.2:
    "we build a linear classifier upon the mixed features").
    """

    def __init__(self, input_shape: tuple[int, ...], num_outputs: int, *, groups: int = 27, norm: bool = True) -> None:
        super().__init__()
        self.shape = c, h, w = _scattering_shape("scatter-linear", input_shape, groups)
        self.norm = nn.GroupNorm(groups, c, affine=False) if norm else nn.Identity()
        self.linear = nn.Linear(c * h * w, num_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(x.reshape(x.shape[0], *self.shape))
        return self.linear(z.flatten(1))


class ScatterCNN(nn.Module):
    """Small CNN on ScatterNet features (Tramer & Boneh 2021, "ScatterNet + CNN" for MNIST / Fashion-MNIST).

    Input: flat scattering coefficients (B, C*h*w), C a multiple of 27 (81 x 7 x 7 for MNIST). The layer list of
    Tramer & Boneh's MNIST model: (per-sample GroupNorm, 27 groups, no learned parameters) -> conv 16@3x3 stride
    2 padding 1 -> tanh -> conv 32@3x3 stride 1 padding 1 -> tanh -> flatten (32x4x4 = 512 for 7x7) -> fc 32 ->
    tanh -> fc K: 33,066 parameters for MNIST, no batch statistics, so DP-SGD can train it too. ``norm=False``
    as :class:`ScatterLinear` (features normalised per sample before mixing, DPFMix App. E.2). Not in the
    mixing papers: DPFMix trains a linear layer; this model is ours to try on the same releases (#13 §5).
    """

    def __init__(self, input_shape: tuple[int, ...], num_outputs: int, *, groups: int = 27, norm: bool = True) -> None:
        super().__init__()
        c, h, w = _scattering_shape("scatter-cnn", input_shape, groups)
        self.features = nn.Sequential(
            nn.Unflatten(1, (c, h, w)),
            nn.GroupNorm(groups, c, affine=False) if norm else nn.Identity(),
            nn.Conv2d(c, 16, 3, stride=2, padding=1),
            nn.Tanh(),
            nn.Conv2d(16, 32, 3, stride=1, padding=1),
            nn.Tanh(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(_flat_size(self.features, (c, h, w)), 32), nn.Tanh(), nn.Linear(32, num_outputs)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class LinearModel(nn.Module):
    """Multinomial logistic regression (K outputs, with a softmax loss) or linear regression (1 output)."""

    def __init__(self, input_shape: tuple[int, ...], num_outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(math.prod(input_shape), num_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))


def keras_initialise(model: nn.Module) -> nn.Module:
    """Re-initialise ``model`` as TensorFlow/Keras would: Glorot-uniform kernels, zero biases (in place).

    Keras' ``Dense`` and ``Conv2D`` default to ``kernel_initializer="glorot_uniform"`` (U(-a, a),
    a = sqrt(6 / (fan_in + fan_out)), a convolution's fans counting its kernel's area) and
    ``bias_initializer="zeros"``; torch's layers draw both from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    The thesis trained its CNN in TensorFlow (§4.1, appendix A.2), so its protocol starts here. Norm layers
    keep torch's start, which is Keras' too (scale 1, shift 0). Draws from torch's global RNG, layer by layer.
    """
    for layer in model.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return model


_CHANNELS_LAST_ON_CPU = ("thesis-cnn", "dpfmix-cnn", "dpcda-cnn")  # measured faster NHWC (see build_model)


def build_model(
    name: str,
    *,
    input_shape: tuple[int, ...],
    num_outputs: int,
    normalised_features: bool = False,
    init: str = "torch",
    device: str | torch.device = "cpu",
) -> nn.Module:
    """A fresh model by name (initialised from torch's global RNG: seed it first), on ``device``.

    On a CPU the thesis, DPFMix and DP-CDA CNNs keep their convolution weights in channels-last layout, which
    oneDNN's NHWC kernels train 1.1-1.5x and evaluate 1.5-2x faster on 2 cores (bench/bench_cpu_layout.py,
    docs/PERFORMANCE.md; not the GroupNorm variant, which it does not speed up); the outputs are the same function
    of the inputs, up to float rounding. On a GPU every model keeps torch's default layout (NHWC not measured there).

    ``normalised_features``: the inputs are already group-normalised per sample (a
    feature release, DPFMix App. E.2), so scatter-linear and scatter-cnn add no GroupNorm of their own.

    Args:
        name: one of :data:`MODELS`: "thesis-cnn", "dpfmix-cnn" (the same CNN with padding 2, DPFMix Table 5),
            "dpcda-cnn" (BatchNorm: not for DP-SGD), "dpcda-cnn-gn",
            "scatter-linear", "scatter-cnn", "linear" or "corrected-lsq" (a linear layer whose weights
            :func:`~dpmix_core.training.train.fit_closed_form` sets).
        input_shape: one record's shape: (H, W) or (H, W, C) (channels last) for the image models,
            (C, h, w) scattering coefficients for scatter-linear and scatter-cnn (C a multiple of 27), any shape
            for linear and corrected-lsq.
        num_outputs: K for classification, 1 for regression on the label value.
        normalised_features: see above (scatter-linear and scatter-cnn only).
        init: "torch" (torch.nn's default initialisation) or "keras" (:func:`keras_initialise`: the
            TensorFlow defaults the thesis's CNN started from).
        device: where the model lives (initialised on the CPU first, so a seed gives the same weights anywhere).

    Returns:
        A freshly initialised ``nn.Module`` that takes flat float32 rows (B, prod(input_shape)) and returns
        (B, num_outputs) outputs (logits for classification).

    Raises:
        ValueError: an unknown name or init, an ``input_shape`` of the wrong rank for an image or scatter
            model, or scattering channels that are not a multiple of 27.
    """
    if init not in INITS:
        raise ValueError(f"Unknown init {init!r}. Choose one of: {', '.join(INITS)}.")
    model = _build(
        name,
        input_shape=tuple(int(s) for s in input_shape),
        num_outputs=num_outputs,
        normalised_features=normalised_features,
    )
    model = (keras_initialise(model) if init == "keras" else model).to(device)
    if name in _CHANNELS_LAST_ON_CPU and torch.device(device).type == "cpu":
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # (stubs omit it)
    return model


def _build(name: str, *, input_shape: tuple[int, ...], num_outputs: int, normalised_features: bool) -> nn.Module:
    if name == "thesis-cnn":
        return ThesisCNN(input_shape, num_outputs)
    if name == "dpfmix-cnn":
        return ThesisCNN(input_shape, num_outputs, padding=2)
    if name == "dpcda-cnn":
        return DPCDACNN(input_shape, num_outputs, norm="batch")
    if name == "dpcda-cnn-gn":
        return DPCDACNN(input_shape, num_outputs, norm="group")
    if name == "scatter-linear":
        return ScatterLinear(input_shape, num_outputs, norm=not normalised_features)
    if name == "scatter-cnn":
        return ScatterCNN(input_shape, num_outputs, norm=not normalised_features)
    if name in ("linear", "corrected-lsq"):  # corrected-lsq: the same layer, fitted in closed form
        return LinearModel(input_shape, num_outputs)
    raise ValueError(f"Unknown model {name!r}. Choose one of: {', '.join(MODELS)}.")


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
