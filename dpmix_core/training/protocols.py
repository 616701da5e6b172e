"""Per-model training protocols: the optimiser, schedule, batch size, loss and early stopping of each model's paper.

Applied by ``train`` (CLI and :func:`~dpmix_core.cli.train.train_repeats`)
wherever the user did not set the field; a :class:`RunConfig` built by hand
keeps its own defaults, and stored configs list every field, so nothing stored
changes meaning. Epochs are the paper's (``paper_epochs``) for reference only:
``train`` keeps its own short default unless ``--epochs`` is given. No torch
import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from dpmix_core.training.names import INITS, INPUT_NORMS, LOSSES, MODELS, OPTIMIZERS, SCHEDULES

__all__ = [
    "DPSGD_OWN_DATA_NORM",
    "ModelProtocol",
    "OWN_DATA_LINEAR",
    "PROTOCOLS",
    "TRAIN_EPOCHS",
    "own_data_protocol_note",
    "protocol_options",
    "train_epochs",
]

TRAIN_EPOCHS = 5  # ``train``'s short default where --epochs is not given (the papers' epochs are paper_epochs)


@dataclass(frozen=True)
class ModelProtocol:
    """How a model's paper trained it (``source`` cites the section or table)."""

    source: str
    optimizer: str
    lr: float
    schedule: str
    batch_size: int
    loss: str
    lr_step_epochs: int = 10
    lr_gamma: float = 0.5
    lr_milestones: tuple[int, ...] = ()
    early_stopping: int | None = None
    init: str = "torch"  # the framework's initialisation the paper's code started from (INITS)
    paper_epochs: int | None = None
    # the paper's post-processing of a [0,1] release: negative released values set to 0 (a release option, so
    # ``train`` applies it to the release it synthesises where the user left it unset; not a RunConfig field)
    clamp_negative: bool = False
    input_norm: str = "none"  # the training inputs' normalisation (INPUT_NORMS; post-processing on a release)
    # (mechanism, field, value) where the paper trained that release differently (thesis §4.1 vs §4.2)
    by_mechanism: tuple[tuple[str, str, object], ...] = ()

    def __post_init__(self) -> None:
        if (
            self.optimizer not in OPTIMIZERS
            or self.schedule not in SCHEDULES
            or self.loss not in LOSSES
            or self.init not in INITS
            or self.input_norm not in INPUT_NORMS
        ):
            raise ValueError(f"invalid protocol: {self}")
        if self.schedule == "multistep" and not self.lr_milestones:
            raise ValueError("a multistep protocol needs milestones.")

    def options(self, mechanism: str | None = None) -> dict:
        """The RunConfig fields this protocol sets (the loss may depend on the release's mechanism)."""
        out = dict(
            optimizer=self.optimizer,
            lr=self.lr,
            schedule=self.schedule,
            batch_size=self.batch_size,
            loss=self.loss,
            lr_step_epochs=self.lr_step_epochs,
            lr_gamma=self.lr_gamma,
            lr_milestones=self.lr_milestones,
            early_stopping=self.early_stopping,
            init=self.init,
            input_norm=self.input_norm,
        )
        out.update({name: value for mech, name, value in self.by_mechanism if mech == mechanism})
        return out


_DPCDA = ModelProtocol(
    "DP-CDA §4 / Table 1: Adam lr 1e-3 with a learning-rate scheduler it does not name (ours: halved every 10 "
    "epochs); argmax labels (Alg. 1 line 13), cross-entropy; batch size not stated (ours: 128)",
    optimizer="adam",
    lr=1e-3,
    schedule="step",
    batch_size=128,
    loss="ce",
    lr_step_epochs=10,
    lr_gamma=0.5,
)

_DPFMIX_APP_E = ModelProtocol(
    "DPFMix App. E.3: Adam, 200 epochs, batch 256, lr 1e-3 divided by 10 at epochs 80, 120, 160; "
    "generalised KL (App. D)",
    optimizer="adam",
    lr=1e-3,
    schedule="multistep",
    batch_size=256,
    loss="gkl",
    lr_gamma=0.1,
    lr_milestones=(80, 120, 160),
    paper_epochs=200,
)

_LINEAR = ModelProtocol(
    "no paper: Adam lr 1e-3, constant, batch 128, cross-entropy (the RunConfig defaults)",
    optimizer="adam",
    lr=1e-3,
    schedule="constant",
    batch_size=128,
    loss="ce",
)

# The linear model on one's own file: a few hundred records of a few features take MNIST's protocol (Adam 1e-3,
# batch 128, 5 epochs) a few dozen steps, not enough to leave the constant predictor (a 3-class, 4-feature CSV of
# 480 records: 38.8 % non-private, the majority class 37.2 %); 50 epochs at batch 32 and lr 1e-2: 92.6 %.
# Its features as a release scales them ([0,1] by public bounds) crowd into the part of [0,1] the data fills: the
# same file with bounds (-5, 10) reached 89.3 %, with (-50, 100) 37.2 % (the constant predictor); standardised on
# the training inputs it reaches the raw features' accuracy whatever the bounds (92.6 % at (-5, 10), (-50, 100) and
# (-5000, 10000)). On releases of that file (l = 4, T = 1000, bounds (-5, 10), 6 seeds) it moves the mean within the
# seeds' spread: DPMix at eps 30 54.1 -> 51.8 %, class-centric at eps 10 58.8 -> 56.3 %, Poisson at eps 10 38.2 ->
# 39.9 %; so one rule for every method but DP-SGD, which may read no statistic of its records (RunConfig refuses).
_OWN_DATA_EPOCHS = 50
DPSGD_OWN_DATA_NORM = "private-ranges"  # DP-SGD may read no statistic of its records outside its epsilon
OWN_DATA_LINEAR = ModelProtocol(
    "no paper: the linear model on one's own file, Adam lr 1e-2, constant, batch 32, cross-entropy, 50 epochs "
    "(enough steps for a file of a few hundred records), inputs standardised per feature on the training inputs "
    "(features scaled to [0,1] by loose public bounds leave a linear model at the constant predictor)",
    optimizer="adam",
    lr=1e-2,
    schedule="constant",
    batch_size=32,
    loss="ce",
    paper_epochs=_OWN_DATA_EPOCHS,
    input_norm="standardize",
)

PROTOCOLS: dict[str, ModelProtocol] = {
    "thesis-cnn": ModelProtocol(
        "thesis §4.1 (Adam lr 1e-4 halved every 10 epochs, 50 epochs, 10 % validation; DPMix trained every "
        "epoch with Keras' KLDivergence to the clamped soft labels, which does not renormalise them (loss 'gkl' has "
        "its gradient); the noisy labels' argmax is no validation signal) and §4.2 / "
        "appendix B (EarlyStopping(monitor='val_accuracy', patience=3, restore_best_weights=True), argmax "
        "labels, cross-entropy, Keras' default batch size 32); Keras' default initialisation (Glorot-uniform "
        "kernels, zero biases: the thesis's code is TensorFlow); negative released values set to 0 (appendix B: "
        "X_synthetic[X_synthetic < 0] = 0; §4.1: 'I set all the negative values in the synthetic feature and label "
        "matrices to 0'), post-processing",
        optimizer="adam",
        lr=1e-4,
        schedule="step",
        batch_size=32,
        loss="ce",
        lr_step_epochs=10,
        lr_gamma=0.5,
        early_stopping=3,
        init="keras",
        paper_epochs=50,
        clamp_negative=True,
        by_mechanism=(
            ("dpmix", "loss", "gkl"),
            ("dpmix", "early_stopping", None),
            ("local", "loss", "gkl"),
            ("local", "early_stopping", None),
        ),
    ),
    "dpcda-cnn": _DPCDA,
    "dpcda-cnn-gn": _DPCDA,
    "dpfmix-cnn": _DPFMIX_APP_E,
    "scatter-linear": _DPFMIX_APP_E,
    "scatter-cnn": _DPFMIX_APP_E,  # not in DPFMix: trained on its releases with its protocol
    "linear": _LINEAR,
    "corrected-lsq": replace(  # the fields a RunConfig needs; none of them is used
        _LINEAR,
        source="no optimiser: least squares in closed form, corrected for the release's feature noise, eigenvalue "
        "floor chosen on the release's held-out points (training.corrected_lsq); epochs, optimiser and loss unused",
        paper_epochs=1,
    ),
}
assert set(PROTOCOLS) == set(MODELS), "every model needs a protocol"


def _protocol(model: str, own_data: bool) -> ModelProtocol:
    if model not in PROTOCOLS:
        raise ValueError(f"Unknown model {model!r}. Choose one of: {', '.join(PROTOCOLS)}.")
    return OWN_DATA_LINEAR if own_data and model == "linear" else PROTOCOLS[model]


def protocol_options(
    model: str, *, method: str = "mixing", mechanism: str | None = None, own_data: bool = False
) -> dict:
    """RunConfig fields of ``model``'s protocol; {} for DP-SGD but on one's own file (the papers' protocols train
    on released data).

    DP-SGD keeps the RunConfig defaults: its step size and batch size trade
    against noise, and early stopping would select on private records.
    ``own_data``: the run reads one's own file (``RunConfig.data_file``); the linear model then takes
    :data:`OWN_DATA_LINEAR`, DP-SGD too but for its standardised inputs (a statistic of the private records):
    at the defaults' Adam 1e-3 and batch 128 a few hundred records give DP-SGD too few steps (the 3-class CSV of
    :data:`OWN_DATA_LINEAR`'s note: 44.6 % at ε = 8), at its lr 1e-2 and batch 32 90.1 % (non-private 92.6 %).
    Instead of standardising, DP-SGD rescales by each feature's range released privately ("private-ranges",
    :mod:`dpmix_core.mechanisms.feature_ranges`): as they are, features scaled by loose bounds left it at the
    constant predictor (that CSV at bounds (-50, 100), 3 seeds: 35.8 / 37.2 % at ε = 8 / 2; with the first version
    of the ranges, 3 rounds, 77.1 / 75.5 %; ``bench/dpsgd_feature_ranges.py``).
    """
    protocol = _protocol(model, own_data)
    if method != "dp-sgd":
        return protocol.options(mechanism)
    return dict(protocol.options(mechanism), input_norm=DPSGD_OWN_DATA_NORM) if protocol is OWN_DATA_LINEAR else {}


def train_epochs(model: str, *, own_data: bool = False) -> int:
    """``train``'s epochs where --epochs is not given: :data:`TRAIN_EPOCHS`, or :data:`OWN_DATA_LINEAR`'s own."""
    return _OWN_DATA_EPOCHS if _protocol(model, own_data) is OWN_DATA_LINEAR else TRAIN_EPOCHS


_OWN_DATA_FIELDS = ("optimizer", "lr", "batch_size", "epochs", "input_norm")


def own_data_protocol_note(configs: Iterable[Mapping[str, Any]]) -> str | None:
    """A sentence when runs of the linear model on one's own file (RunConfig dicts) train otherwise than
    :data:`OWN_DATA_LINEAR` (a spec's own protocol, e.g. a preset's MNIST one: a few dozen steps on a few hundred
    records may not leave the constant predictor); None when they follow it. DP-SGD's inputs take
    :data:`DPSGD_OWN_DATA_NORM` instead of "standardize"."""
    wanted = {**OWN_DATA_LINEAR.options(), "epochs": _OWN_DATA_EPOCHS}
    gaps: dict[str, set] = {}
    for config in configs:
        if config.get("model") != "linear" or config.get("data_file") is None:
            continue
        for name in _OWN_DATA_FIELDS:
            want = DPSGD_OWN_DATA_NORM if name == "input_norm" and config.get("method") == "dp-sgd" else wanted[name]
            if config.get(name) != want:
                gaps.setdefault(name, set()).add(config.get(name))
    if not gaps:
        return None
    theirs = ", ".join(f"{name} {' / '.join(sorted(map(str, values)))}" for name, values in gaps.items())
    ours = ", ".join(f"{name} {wanted[name]}" for name in gaps)
    return (
        f"the linear model trains on your file with the spec's protocol ({theirs}), not the one `train --data-file` "
        f"uses ({ours}: enough steps for a few hundred records); runs that never leave the constant predictor are "
        "flagged collapsed; set those fields in the spec (its base, and each series that sets them) to train as `train` does."
    )
