"""One training run as data: :class:`RunConfig` (validated, JSON round-trip) and its identity :func:`run_key`.

A run is fully described by its config: dataset, method, the release
(a nested :class:`~dpmix_core.synthesis.pipeline.SynthesisConfig` for mixing and
label-only Laplace), model, loss, optimizer and schedule, epochs, batch size,
validation fraction, subsample limits, DP-SGD / DP-PCA parameters and the
seed. ``device``, ``data_dir`` and the display ``label`` say *where* and *under
what name* it runs, not *what* runs: they are not part of the identity. Nor are the
paths of a release file or of one's own data file: their bytes' SHA-256 is.

No torch import here: configs validate in the app without loading torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from dpmix_core.data import DATASET_NAMES, OWN_DATA, Categories, check_categories, public_zscore_constants
from dpmix_core.privacy.checks import FeatureRange, check_feature_range, describe_feature_range
from dpmix_core.resources.files import check_sha256
from dpmix_core.synthesis.pipeline import MECHANISMS, SynthesisConfig, resolve_preprocessing
from dpmix_core.training.names import (
    BATCHNORM_MODELS,
    CLOSED_FORM_MODELS,
    DP_RANGE_NORMS,
    DPSGD_ACCOUNTANTS,
    FEATURE_MODELS,
    FEATURES,
    INITS,
    INPUT_NORMS,
    LOSSES,
    METHODS,
    MODELS,
    OPTIMIZERS,
    PRECISIONS,
    SCATTER_MODELS,
    SCHEDULES,
    TEST_INPUTS,
)

__all__ = [
    "on_dataset",
    "RunConfig",
    "run_key",
    "NON_IDENTITY_FIELDS",
    "identity_synthesis",
    "synthesis_from_dict",
    "upgrade_v1_synthesis",
]

NON_IDENTITY_FIELDS = ("device", "data_dir", "label", "release_file", "data_file")
_RUN_OWNED_SYNTHESIS_FIELDS = ("seed", "device")  # set by the run, not stored in the nested dict
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
_SYNTHESIS_PAIRS = ("zscore_constants",)  # (mean, std); SynthesisConfig checks its feature_range itself

# The synthesis fields as stored by v0.1 (before public-constant z-scoring and label protection were explicit).
# A stored synthesis dict with exactly these keys was written by v0.1's to_dict and keeps v0.1's meaning:
# class-centric "zscore" without constants used the private data's statistics, and its accounting was the
# same-class swap (labels not protected). See upgrade_v1_synthesis.
_V1_SYNTHESIS_KEYS = frozenset(
    {
        "mechanism",
        "l",
        "T",
        "sigma_x",
        "sigma_y",
        "sigma_ratio",
        "target_epsilon",
        "accountant",
        "delta",
        "preprocessing",
        "clip",
        "zscore_constants",
        "clip_x",
        "clip_y",
        "hard_labels",
        "clamp_negative",
        "label_epsilon",
        "label_task",
        "feature_range",
    }
)
# Fields a mechanism ignores keep v0.1's default in a run's identity, so stored keys never change.
_V1_IGNORED_DEFAULTS = {"preprocessing": "zscore"}


def upgrade_v1_synthesis(d: dict) -> dict:
    """A v0.1 stored synthesis dict in today's spelling, with the meaning it had when it was written.

    v0.1 released class-centric "zscore" without constants with the private
    data's mean/std (today: "zscore-private", never covered) and accounted for
    a same-class swap (today: ``protect_labels=False``). Reading such a row with
    today's defaults would relabel it as covered and label-protecting; this
    keeps old results honest. Other dicts are returned unchanged.
    """
    if set(d) - {"seed", "device"} != _V1_SYNTHESIS_KEYS or d.get("mechanism") != "class-centric":
        return d
    out = dict(d, protect_labels=False)
    if out.get("preprocessing") == "zscore" and out.get("zscore_constants") is None:
        out["preprocessing"] = "zscore-private"
    return out


def identity_synthesis(syn: dict) -> dict:
    """The synthesis part of a run's identity, spelled as v0.1 spelled it wherever the release is the same.

    New fields are left out while they hold the value that reproduces v0.1
    (``public_n``, ``zscore_constants_sha256`` and ``range_epsilon`` None, ``exact_features`` empty; ``features``
    "pixels";
    ``protect_labels`` on mechanisms that ignore it or False for class-centric),
    fields a mechanism ignores keep v0.1's default, and "zscore-private" is
    v0.1's "zscore" without constants: keys of stored runs stay valid, and a
    release that differs gets a new key. A constants file's path is never
    identity (the same numbers elsewhere are the same run); its sha256 is.
    """
    out = dict(syn)
    mechanism = out.get("mechanism")
    out.pop("zscore_constants_file", None)  # where the constants lie; their sha256 is what they are
    if out.get("zscore_constants_sha256") is None:
        out.pop("zscore_constants_sha256", None)
    if out.get("public_n") is None:
        out.pop("public_n", None)
    if out.get("range_epsilon") is None:  # private feature ranges: another release
        out.pop("range_epsilon", None)
    if not out.get("exact_features"):  # features the private ranges leave at (0, 1): none is the release before them
        out.pop("exact_features", None)
    if out.get("features") == "pixels":
        out.pop("features")
    if mechanism != "class-centric" or out.get("protect_labels") is False:
        out.pop("protect_labels", None)
    if mechanism != "class-centric" and out.get("preprocessing") != "clip":  # dpmix "clip": another release
        out.update({k: v for k, v in _V1_IGNORED_DEFAULTS.items() if k in out})
    elif out.get("preprocessing") == "zscore-private":
        out["preprocessing"] = "zscore"
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _reject_unknown_keys(d: dict, cls: type, what: str) -> None:
    """ValueError naming the keys of ``d`` that are not fields of the dataclass ``cls``."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"unknown {what} key(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}.")


def synthesis_from_dict(d: dict) -> SynthesisConfig:
    """A SynthesisConfig from its JSON form (lists -> tuples, "inf" -> inf); unknown keys are a ValueError."""
    if not isinstance(d, dict):
        raise ValueError(f"synthesis must be a table/dict of SynthesisConfig fields. Found {type(d).__name__}.")
    d = upgrade_v1_synthesis(d)
    _reject_unknown_keys(d, SynthesisConfig, "synthesis")
    if "mechanism" not in d:
        raise ValueError("synthesis needs a mechanism (one of: " + ", ".join(MECHANISMS) + ").")
    kw = {k: _from_json_number(v) for k, v in d.items()}
    for name in _SYNTHESIS_PAIRS:
        if kw.get(name) is not None:
            value = kw[name]
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ValueError(f"synthesis.{name} must be a pair of numbers. Found {value!r}.")
            kw[name] = tuple(float(v) for v in value)
    return SynthesisConfig(**kw)  # which checks feature_range (a pair, or one a feature)


def _from_json_number(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("inf", "+inf", "infinity"):
        return math.inf
    return value


def _to_json_value(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, tuple):
        return [_to_json_value(v) for v in value]
    return value


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run; validated on construction (one-line ValueErrors).

    method: "mixing" (train on a random-mixing release), "non-private" (real
    data), "dp-sgd" (Opacus, calibrated to dpsgd_epsilon/dpsgd_delta),
    "label-laplace" (real features, Laplace-noised labels) or "dp-pca"
    (Analyze-Gauss projection to pca_components dimensions + a linear model).
    ``synthesis`` is required for mixing and label-laplace, and must be None
    otherwise; its seed is the run's seed and it always runs on the CPU (so a
    release does not depend on the device).
    ``features``: "pixels", or "scattering" (ScatterNet J=2, L=8 features of
    every record, computed *before* any mechanism: DPFMix Table 3). With
    ``synthesis.features = "scattering"`` the release itself group-normalises
    each record's features (27 groups) before clipping and mixing (DPFMix
    App. E.2) and scatter-linear / scatter-cnn add no normalisation of their own;
    without it (v0.1's runs) raw coefficients are mixed and the model normalises
    the mixed point.
    ``lr_milestones`` (schedule "multistep"), ``lr_patience`` (schedule "plateau": x ``lr_gamma`` once that many
    epochs pass without a lower loss on the release's validation split, torch's ``ReduceLROnPlateau``; it needs
    that split, and DP-SGD, whose validation split is private records, refuses it) and ``early_stopping``
    (patience on the release's validation accuracy, best weights restored: thesis §4.2) enter the run's identity
    only when used.
    ``loss``: "kl" (soft labels, renormalised), "ce" (argmax labels), "gkl"
    (generalized KL, DPFMix App. D; it has the gradient of Keras' unnormalised
    KLDivergence, the thesis §4.1 loss) or "mse" (regression on the label value;
    the task is regression exactly when loss is "mse").
    ``init``: "torch" (torch.nn's defaults) or "keras" (Glorot-uniform kernels, zero biases: TensorFlow's
    defaults, which the thesis's CNN started from); in the identity only when "keras".
    ``precision``: "fp32", or "bf16" (forward passes under bfloat16 autocast, :mod:`dpmix_core.training.precision`:
    1.1-2.9x faster on a CPU with native bfloat16, refused on one without); in the identity only when "bf16". DP-SGD
    keeps float32; a closed-form model has no forward pass to speed up (set to "fp32").
    ``test_inputs``: "release" (the test split through the release's own feature map, its clip included),
    "unclipped" (class-centric z-score releases only: z-scored, not clipped to ``synthesis.clip``) or
    "release-scale" (the same releases: z-scored, clipped, then multiplied by the released points' median norm over
    ``synthesis.clip``, a factor read off the release alone). DP-CDA clips the private records it mixes (Algorithm 1,
    step 6) and evaluates on "the original test partition ... unmixed and noise-free" (Sec. 4) without saying
    whether its test loader clips; "unclipped" is the reading that it does not; "release-scale" puts the test
    images at the scale of the training inputs, whose noise dominates their norm, so that the running statistics
    of a BatchNorm CNN fit them. In the identity only when not "release".
    ``input_norm="rms"`` divides all inputs (train, validation, test) by the
    root-mean-square of the training inputs; ``"standardize"`` subtracts each feature's mean over the training
    inputs and divides by its standard deviation (a release scaled to [0,1] with loose public bounds crowds its
    features into a small part of the range, where a linear model barely moves). Both are post-processing for
    released data, and not allowed for DP-SGD (they would read the private data); corrected-lsq takes one scale
    for the release's noise, so not "standardize". ``"dp-ranges"`` (DP-SGD on a data file only) rescales each
    feature to [0,1] by its range inside the public bounds, released with Gaussian noise and accounted with the
    DP-SGD steps (:mod:`dpmix_core.mechanisms.feature_ranges`, :mod:`dpmix_core.training.dpsgd`).
    ``train_limit``/``test_limit`` take a fixed random subset (the same for
    every seed) of the training/test split: the quick variants.
    ``release_file`` / ``release_sha256``: train on a release made earlier by
    ``synthesize`` (:mod:`dpmix_core.experiments.release_files`) instead of
    making one; ``synthesis`` then holds the card's parameters, the hash is the
    release's identity and the path is not (the same bytes elsewhere are the same run).
    ``data_file`` / ``data_sha256`` / ``label_column`` / ``test_fraction``: train on one's own ``.csv`` or ``.npz``
    (dataset ``"file"``, read by :func:`~dpmix_core.data.load_user_data` with ``label_column``): a stratified
    ``test_fraction`` of its records is held out as the test split, the same rows for every seed
    (:func:`~dpmix_core.data.held_out_split`), and never released; the release mixes the rest. The hash is the
    data's identity, the path is not; the other two enter the identity only with a data file. With a release
    file too, the release was made from the file's other records (``synthesize --test-fraction``, its card says
    which: :func:`~dpmix_core.experiments.release_files.held_out_data`) and the run is scored on the held-out ones.
    ``feature_range``: the public (low, high) bounds of a data file's float features, or one pair per feature
    (:mod:`dpmix_core.data.feature_bounds`; pairs that are all equal are the one pair, the same run). The methods that train on
    the file's own records (non-private, DP-SGD, DP-PCA, and label-only Laplace's features) scale them to [0,1]
    with it, as a [0,1] release scales the records it mixes, so a baseline and a release learn from the same
    features; a run with a release takes it into ``synthesis.feature_range`` (a different one there is refused),
    where its identity then holds it.
    ``categories``: the public categories of a data file CSV's text columns, each read as its one-hot features
    (:mod:`dpmix_core.data.categories`; their bounds are (0, 1)); part of the identity when there are any.
    """

    method: str
    dataset: str = "mnist"
    synthesis: SynthesisConfig | None = None
    features: str = "pixels"
    model: str = "thesis-cnn"
    init: str = "torch"  # weight initialisation: "torch", or "keras" (Glorot-uniform, zero biases: the thesis's TF)
    loss: str = "ce"
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9  # sgd only
    weight_decay: float = 0.0
    schedule: str = "constant"  # constant | step (x lr_gamma every lr_step_epochs) | multistep | cosine | plateau
    lr_step_epochs: int = 10
    lr_gamma: float = 0.5
    lr_milestones: tuple[int, ...] = ()  # multistep: x lr_gamma at these epochs (DPFMix App. E.3: 80, 120, 160)
    lr_patience: int = 10  # plateau: epochs without a lower validation loss before x lr_gamma (torch's default)
    epochs: int = 10
    batch_size: int = 128
    val_fraction: float = 0.1
    early_stopping: int | None = None  # patience on the release's validation accuracy (thesis §4.2); None: off
    precision: str = "fp32"  # training arithmetic: "fp32", or "bf16" autocast (training.precision)
    input_norm: str = "none"
    test_inputs: str = "release"  # the test split through the release's map ("release") or without its clip
    train_limit: int | None = None
    test_limit: int | None = None
    dpsgd_epsilon: float = 1.0
    dpsgd_delta: float = 1e-5
    dpsgd_clip: float = 1.0
    dpsgd_accountant: str = "pld-poisson"
    pca_components: int = 50
    pca_epsilon: float = 1.0  # inf: exact (non-private) PCA
    pca_delta: float = 1e-5
    seed: int = 0
    label: str = ""  # display name of the series (not identity)
    device: str = "auto"  # not identity
    data_dir: str | None = None  # not identity
    release_file: str | None = None  # train on this synthesize file instead of making a release (not identity)
    release_sha256: str | None = None  # its bytes' SHA-256: the release's identity
    data_file: str | None = None  # train on one's own .csv / .npz (dataset "file"; not identity)
    data_sha256: str | None = None  # its bytes' SHA-256: the data's identity
    label_column: str | None = None  # a data_file CSV's label column (None: "label", else the first)
    test_fraction: float = 0.2  # a data_file's records held out as the test split (stratified, never released)
    feature_range: FeatureRange | None = None  # a data_file's public bounds of float features (pair or per feature)
    categories: Categories = ()  # a data_file CSV's text columns and their public categories (one-hot features)

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        _choice("method", self.method, METHODS)
        _choice("dataset", self.dataset, (*DATASET_NAMES, OWN_DATA))
        _choice("features", self.features, FEATURES)
        _choice("model", self.model, MODELS)
        _choice("init", self.init, INITS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("loss", self.loss, LOSSES)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("schedule", self.schedule, SCHEDULES)
        _choice("input_norm", self.input_norm, INPUT_NORMS)
        _choice("test_inputs", self.test_inputs, TEST_INPUTS)
        _choice("dpsgd_accountant", self.dpsgd_accountant, DPSGD_ACCOUNTANTS)
        for name in (
            "lr",
            "momentum",
            "weight_decay",
            "lr_gamma",
            "val_fraction",
            "dpsgd_epsilon",
            "dpsgd_delta",
            "dpsgd_clip",
            "pca_epsilon",
            "pca_delta",
        ):
            value = getattr(self, name)
            if not _is_real(value) or math.isnan(value):
                raise ValueError(f"{name} must be a number. Found {value!r}.")
            set_(name, float(value))
        for name in ("lr_step_epochs", "epochs", "batch_size", "pca_components"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
            set_(name, int(value))
        for name in ("train_limit", "test_limit"):
            value = getattr(self, name)
            if value is not None:
                if not _is_int(value) or value < 1:
                    raise ValueError(f"{name} must be a positive integer or None. Found {value!r}.")
                set_(name, int(value))
        milestones = self.lr_milestones
        if not isinstance(milestones, (list, tuple)) or not all(_is_int(m) and m >= 1 for m in milestones):
            raise ValueError(f"lr_milestones must be a list of positive epoch numbers. Found {milestones!r}.")
        milestones = tuple(int(m) for m in milestones)
        if list(milestones) != sorted(set(milestones)):
            raise ValueError(f"lr_milestones must be strictly increasing. Found {list(milestones)}.")
        set_("lr_milestones", milestones)
        if self.schedule == "multistep" and not milestones:
            raise ValueError("schedule 'multistep' needs lr_milestones (e.g. 80, 120, 160: DPFMix App. E.3).")
        if not _is_int(self.lr_patience) or self.lr_patience < 0:
            raise ValueError(f"lr_patience must be a whole number of epochs >= 0. Found {self.lr_patience!r}.")
        set_("lr_patience", int(self.lr_patience))
        if self.schedule == "plateau":
            if not 0 < self.lr_gamma < 1:
                raise ValueError(
                    f"schedule 'plateau' needs 0 < lr_gamma < 1 (torch's default 0.1). Found {self.lr_gamma}."
                )
            if self.val_fraction <= 0:
                raise ValueError(
                    "schedule 'plateau' lowers the rate on the validation loss: it needs val_fraction > 0."
                )
        if self.early_stopping is not None:
            if not _is_int(self.early_stopping) or self.early_stopping < 1:
                raise ValueError(
                    f"early_stopping must be a patience >= 1 (epochs) or None. Found {self.early_stopping!r}."
                )
            set_("early_stopping", int(self.early_stopping))
        if self.model in CLOSED_FORM_MODELS:  # fitted in one step: one "epoch", nothing to stop early
            set_("epochs", 1)
            set_("early_stopping", None)
            set_("precision", "fp32")  # no forward pass to run in bfloat16
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0. Found {self.seed!r}.")
        set_("seed", int(self.seed))
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive finite number. Found {self.lr}.")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1). Found {self.momentum}.")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0. Found {self.weight_decay}.")
        if not 0 < self.lr_gamma <= 1:
            raise ValueError(f"lr_gamma must be in (0, 1]. Found {self.lr_gamma}.")
        if not 0 <= self.val_fraction <= 0.5:
            raise ValueError(f"val_fraction must be in [0, 0.5]. Found {self.val_fraction}.")
        if not isinstance(self.label, str):
            raise ValueError(f"label must be a string. Found {self.label!r}.")
        if not (isinstance(self.device, str) and _DEVICE.match(self.device)):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'. Found {self.device!r}.")
        if self.data_dir is not None and not isinstance(self.data_dir, str):
            set_("data_dir", str(self.data_dir))
        self._check_release_file(set_)
        self._check_data_file(set_)
        self._check_synthesis(set_)
        self._check_combination()

    # ------------------------------------------------------------------ validation helpers

    def _check_release_file(self, set_) -> None:
        if self.release_file is None and self.release_sha256 is None:
            return
        if self.release_file is None or self.release_sha256 is None:
            raise ValueError("a release file needs both release_file (its path) and release_sha256 (its bytes' hash).")
        if self.method != "mixing":
            raise ValueError(f"a release file is a mixing release: method must be 'mixing'. Found {self.method!r}.")
        check_sha256("release_sha256", self.release_sha256)
        set_("release_file", str(self.release_file))

    def _check_data_file(self, set_) -> None:
        if not (_is_real(self.test_fraction) and 0 < self.test_fraction < 1):
            raise ValueError(f"test_fraction must be between 0 and 1 (e.g. 0.2). Found {self.test_fraction!r}.")
        set_("test_fraction", float(self.test_fraction))
        set_("categories", check_categories("categories", self.categories))
        own = self.data_file is not None or self.data_sha256 is not None
        if not own:
            if self.dataset == OWN_DATA:
                raise ValueError(f"dataset {OWN_DATA!r} is one's own file: give data_file and data_sha256.")
            if self.label_column is not None:
                raise ValueError("label_column names a column of a data_file CSV; this run has no data file.")
            if self.feature_range is not None:
                raise ValueError("feature_range bounds a data_file's float features; this run has no data file.")
            if self.categories:
                raise ValueError("categories name the text columns of a data_file CSV; this run has no data file.")
            return
        if self.data_file is None or self.data_sha256 is None:
            raise ValueError("a data file needs both data_file (its path) and data_sha256 (its bytes' hash).")
        if self.dataset != OWN_DATA:
            raise ValueError(f"a run on a data file has dataset {OWN_DATA!r}. Found {self.dataset!r}.")
        check_sha256("data_sha256", self.data_sha256)
        set_("data_file", str(self.data_file))
        if self.label_column is not None and not isinstance(self.label_column, str):
            raise ValueError(f"label_column must be a column's name. Found {self.label_column!r}.")
        if self.feature_range is not None:
            set_("feature_range", check_feature_range("feature_range", self.feature_range))

    def _check_synthesis(self, set_) -> None:
        syn = self.synthesis
        if isinstance(syn, dict):
            syn = synthesis_from_dict(syn)
        if self.method in ("mixing", "label-laplace"):
            if not isinstance(syn, SynthesisConfig):
                raise ValueError(f"method {self.method!r} needs a synthesis config (SynthesisConfig or dict).")
            if self.method == "mixing" and syn.mechanism == "label-laplace":
                raise ValueError(
                    "method 'mixing' needs a mixing mechanism; use method 'label-laplace' for label-only Laplace."
                )
            if self.method == "label-laplace" and syn.mechanism != "label-laplace":
                raise ValueError(
                    f"method 'label-laplace' needs synthesis.mechanism 'label-laplace'. Found {syn.mechanism!r}."
                )
            if (
                syn.mechanism == "class-centric"
                and syn.preprocessing == "zscore"
                and syn.zscore_constants is None
                and syn.zscore_constants_file is None
            ):
                if self.features != "pixels":
                    raise ValueError(
                        "z-scoring scattering features needs public constants (zscore_constants, or a "
                        "zscore_constants_file of per-feature ones); the datasets' "
                        "documented constants are for pixels. Use preprocessing 'unit' with feature_range, or 'poisson'."
                    )
                syn = resolve_preprocessing(syn, self.dataset)
            set_(
                "synthesis",
                replace(_normalised_synthesis(self._with_data_bounds(syn, set_)), seed=self.seed, device="cpu"),
            )
        elif syn is not None:
            raise ValueError(
                f"synthesis applies to methods 'mixing' and 'label-laplace'; set it to None for {self.method!r}."
            )

    def _with_data_bounds(self, syn: SynthesisConfig, set_) -> SynthesisConfig:
        """One pair of bounds for a data file's run: the file's ``feature_range`` in the synthesis where it has none,
        the synthesis's as the run's where the run has none; two different ones are refused (the records would be
        scaled one way for the release, another for the test split)."""
        if self.data_file is None:
            return syn
        if self.feature_range is None:
            if syn.feature_range is not None:
                set_("feature_range", syn.feature_range)  # canonical: SynthesisConfig checked it
            return syn
        if syn.feature_range is None:
            return replace(syn, feature_range=self.feature_range)
        if syn.feature_range != self.feature_range:  # both canonical (check_feature_range)
            raise ValueError(
                f"synthesis.feature_range {describe_feature_range(syn.feature_range)} differs from the data file's "
                f"feature_range {describe_feature_range(self.feature_range)}: give the public bounds once."
            )
        return syn

    def _check_combination(self) -> None:
        syn = self.synthesis
        if self.features == "scattering" and self.model not in FEATURE_MODELS:
            names = ", ".join(repr(m) for m in FEATURE_MODELS)
            raise ValueError(f"scattering features need one of the models {names}. Found {self.model!r}.")
        if syn is not None and syn.features != "pixels" and self.features != syn.features:
            raise ValueError(
                f"a release of {syn.features} features needs the run's features = {syn.features!r} "
                "(the test split is mapped by the same public transform)."
            )
        if self.features == "pixels" and self.model in SCATTER_MODELS:
            raise ValueError(f"model {self.model!r} needs features = 'scattering'.")
        if self.method == "dp-pca" and self.model not in ("linear", *CLOSED_FORM_MODELS):
            raise ValueError(
                f"dp-pca trains a linear model on the projection; set model = 'linear' or 'corrected-lsq'. "
                f"Found {self.model!r}."
            )
        if self.model in CLOSED_FORM_MODELS:
            if self.method == "dp-sgd":
                raise ValueError(
                    f"model {self.model!r} is fitted in closed form, not by DP-SGD's gradient steps: use 'linear'."
                )
            if syn is not None and syn.clamp_negative:
                raise ValueError(
                    f"model {self.model!r} corrects for additive Gaussian noise; clamp_negative makes the released "
                    "noise non-Gaussian: set clamp_negative to false."
                )
            if self.input_norm == "standardize":
                raise ValueError(
                    f"model {self.model!r} corrects for the release's noise at one scale; 'standardize' scales each "
                    "feature by its own: use input_norm 'rms' or 'none'."
                )
        if self.input_norm in DP_RANGE_NORMS and self.method != "dp-sgd":
            raise ValueError(
                f"input_norm {self.input_norm!r} releases private feature ranges for DP-SGD's records; "
                f"{self.method} needs none: use 'standardize' (post-processing on a release) or 'none'."
            )
        if self.method == "dp-sgd":
            if self.precision != "fp32":
                raise ValueError(
                    "DP-SGD trains in float32 here (Opacus's per-sample gradients, not measured in bfloat16): "
                    "set precision to 'fp32'."
                )
            if self.model in BATCHNORM_MODELS:
                raise ValueError(
                    f"model {self.model!r} uses batch-norm, which DP-SGD cannot train (per-sample gradients); "
                    "use 'dpcda-cnn-gn' (GroupNorm) or 'thesis-cnn'."
                )
            if self.input_norm not in ("none", *DP_RANGE_NORMS):
                raise ValueError(
                    f"input_norm {self.input_norm!r} reads the training inputs; DP-SGD trains on private data: "
                    "use 'none', or 'private-ranges' (each feature's range, released privately) on a data file."
                )
            if self.input_norm in DP_RANGE_NORMS and self.dataset != OWN_DATA:
                raise ValueError(
                    f"input_norm {self.input_norm!r} rescales a data file's features (--data-file); images are in "
                    "[0,1] already: use 'none'."
                )
            if self.early_stopping is not None:
                raise ValueError(
                    "early stopping selects on held-out private records, which DP-SGD's epsilon does not cover: "
                    "set early_stopping to None."
                )
            if self.schedule == "plateau":
                raise ValueError(
                    "schedule 'plateau' reads the loss on held-out private records, which DP-SGD's epsilon does not "
                    "cover: use constant, step, multistep or cosine."
                )
            if not (math.isfinite(self.dpsgd_epsilon) and self.dpsgd_epsilon > 0):
                raise ValueError(f"dpsgd_epsilon must be a positive finite number. Found {self.dpsgd_epsilon}.")
            if not 0 < self.dpsgd_delta < 1:
                raise ValueError(f"dpsgd_delta must be in (0, 1). Found {self.dpsgd_delta}.")
            if not (math.isfinite(self.dpsgd_clip) and self.dpsgd_clip > 0):
                raise ValueError(f"dpsgd_clip must be a positive finite number. Found {self.dpsgd_clip}.")
        if self.method == "dp-pca":
            if not self.pca_epsilon > 0:
                raise ValueError(f"pca_epsilon must be positive (inf: exact PCA). Found {self.pca_epsilon}.")
            if not 0 < self.pca_delta < 1:
                raise ValueError(f"pca_delta must be in (0, 1). Found {self.pca_delta}.")
        regression = self.loss == "mse"
        if self.method == "mixing" and regression:
            raise ValueError(
                "loss 'mse' is for regression labels; mixing releases soft label vectors: use kl, ce or gkl."
            )
        if self.method == "label-laplace" and syn is not None:  # _check_synthesis: label-laplace has one
            if (syn.label_task == "regression") != regression:
                raise ValueError(
                    f"label_task {syn.label_task!r} needs loss "
                    f"{'mse' if syn.label_task == 'regression' else 'kl, ce or gkl'}; found loss {self.loss!r}."
                )
        if self.test_inputs != "release" and not (self.method == "mixing" and syn is not None and syn.zscore_clipped):
            what = "lifts the clip of" if self.test_inputs == "unclipped" else "rescales the clipped test images of"
            raise ValueError(
                f"test_inputs {self.test_inputs!r} {what} a class-centric z-score release (DP-CDA); this run's "
                "test inputs have no such clip: use 'release'."
            )
        if self.method == "mixing" and self.features == "scattering" and syn is not None:
            if syn.unit_scaled and syn.feature_range is None:
                raise ValueError(
                    f"mechanism {syn.mechanism!r} scales features to [0,1] with public bounds, which scattering "
                    "features lack: use 'poisson' (clips ||x|| <= Cx), class-centric 'zscore' with public zscore_constants, "
                    "or set feature_range."
                )

    # ------------------------------------------------------------------ properties and JSON

    @property
    def task(self) -> str:
        """'regression' when the loss is mse, else 'classification'."""
        return "regression" if self.loss == "mse" else "classification"

    @property
    def mechanism(self) -> str | None:
        """The synthesis mechanism, or None for methods without a release."""
        return self.synthesis.mechanism if self.synthesis is not None else None

    def to_dict(self) -> dict:
        """JSON-ready dict (infinite numbers as "inf"); ``RunConfig.from_dict`` inverts it."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "synthesis":
                if value is None:
                    out["synthesis"] = None
                else:
                    syn = dataclasses.asdict(value)
                    for key in _RUN_OWNED_SYNTHESIS_FIELDS:
                        syn.pop(key)
                    out["synthesis"] = {k: _to_json_value(v) for k, v in syn.items()}
            else:
                out[f.name] = _to_json_value(value)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """Build from a (JSON) dict; unknown keys are a ValueError; missing keys take their defaults."""
        if isinstance(d, RunConfig):
            return d
        if not isinstance(d, dict):
            raise ValueError(f"a run config must be a dict. Found {type(d).__name__}.")
        _reject_unknown_keys(d, cls, "run config")
        if "method" not in d:
            raise ValueError("a run config needs a method (one of: " + ", ".join(METHODS) + ").")
        kw = {k: _from_json_number(v) for k, v in d.items() if k != "synthesis"}
        syn = d.get("synthesis")
        if syn is not None:
            syn = dict(syn) if isinstance(syn, dict) else syn
            if isinstance(syn, dict):
                seed = syn.pop("seed", None)
                syn.pop("device", None)
                if seed is not None and "seed" not in kw:
                    kw["seed"] = seed
                syn = synthesis_from_dict(syn)
        kw["synthesis"] = syn
        return cls(**kw)

    def identity(self) -> dict:
        """The fields that determine the result: to_dict() without device, data_dir, label, and unused groups."""
        d = self.to_dict()
        for key in NON_IDENTITY_FIELDS:
            d.pop(key)
        if d.get("synthesis") is not None:
            d["synthesis"] = identity_synthesis(d["synthesis"])
        if self.method != "dp-sgd":
            for key in ("dpsgd_epsilon", "dpsgd_delta", "dpsgd_clip", "dpsgd_accountant"):
                d.pop(key)
        if self.method != "dp-pca":
            for key in ("pca_components", "pca_epsilon", "pca_delta"):
                d.pop(key)
        if self.optimizer != "sgd":
            d.pop("momentum")
        if self.schedule != "step":
            d.pop("lr_step_epochs")
        if self.schedule not in ("step", "multistep", "plateau"):
            d.pop("lr_gamma")
        if self.schedule != "plateau":
            d.pop("lr_patience")
        if self.schedule != "multistep":  # new fields leave the identity at their v0.1-equivalent value
            d.pop("lr_milestones")
        if self.early_stopping is None:
            d.pop("early_stopping")
        if self.init == "torch":
            d.pop("init")
        if self.test_inputs == "release":
            d.pop("test_inputs")
        if self.precision == "fp32":
            d.pop("precision")
        if self.release_sha256 is None:
            d.pop("release_sha256")
        if self.data_sha256 is None:  # the fields of one's own data file, absent from the runs on a named dataset
            for key in ("data_sha256", "label_column", "test_fraction"):
                d.pop(key)
        if self.feature_range is None or self.synthesis is not None:  # a release holds its bounds in its synthesis
            d.pop("feature_range")
        if not self.categories:  # absent from the runs before text columns could be read
            d.pop("categories")
        return d

    def replace(self, **changes) -> RunConfig:
        return replace(self, **changes)


def on_dataset(config: RunConfig, dataset: str, data_dir: str | None = None, **data_file: Any) -> RunConfig:
    """The same run on another dataset, with the public z-score constants of the data it now reads.

    A config built for one dataset carries that dataset's documented constants (resolved in
    ``__post_init__``); moved as it is, Fashion-MNIST would be z-scored with MNIST's mean and std. Constants
    that were the old dataset's documented ones are re-resolved for the new dataset; constants the user
    stated (any other pair) are kept. ``data_file``: the fields of one's own file (dataset "file":
    ``data_file``, ``data_sha256``, ``label_column``, ``test_fraction``), which has no documented constants.
    """
    syn = config.synthesis
    if isinstance(syn, SynthesisConfig) and syn.zscore_constants is not None:
        documented = public_zscore_constants(config.dataset)
        if documented is not None and all(
            math.isclose(a, b, rel_tol=1e-12) for a, b in zip(syn.zscore_constants, documented, strict=True)
        ):
            syn = replace(syn, zscore_constants=None)  # __post_init__ resolves the new dataset's
    return replace(config, dataset=dataset, data_dir=data_dir, synthesis=syn, **data_file)


def _normalised_synthesis(syn: SynthesisConfig) -> SynthesisConfig:
    """Numbers in canonical types (15 -> 15.0 for float fields, 256.0 -> 256 for int fields): stable run keys."""
    changes: dict[str, Any] = {}
    for f in fields(SynthesisConfig):
        value = getattr(syn, f.name)
        kind = str(f.type)
        if kind.startswith("float") and _is_real(value):
            changes[f.name] = float(value)
        elif kind == "int" and isinstance(value, float) and value.is_integer():
            changes[f.name] = int(value)
        elif f.name in _SYNTHESIS_PAIRS and value is not None:
            if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_real(v) for v in value)):
                raise ValueError(f"synthesis.{f.name} must be a pair of numbers. Found {value!r}.")
            changes[f.name] = tuple(float(v) for v in value)
    return replace(syn, **changes)


def _choice(name: str, value: object, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ValueError(f"Unknown {name} {value!r}. Choose one of: {', '.join(options)}.")


def run_key(config: dict | RunConfig) -> str:
    """sha256 (hex) of the canonical JSON of the run's identity (device, data_dir and label excluded).

    The dict is parsed first, so defaults filled in or left out, ints vs floats
    (lr 1 vs 1.0) and key order all give the same key.
    """
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    payload = json.dumps(cfg.identity(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(payload.encode()).hexdigest()
