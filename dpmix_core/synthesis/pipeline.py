"""One call from "dataset + mechanism name + knobs" to released data and its privacy card."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dpmix_core.data import Categories, Dataset, public_zscore_constants
from dpmix_core.data.scattering import FEATURE_TRANSFORMS, FEATURES, feature_dataset, scattering_shape
from dpmix_core.mechanisms import (
    SyntheticData,
    class_centric_mix,
    dpmix,
    laplace_label_release,
    local_perturbation,
    poisson_mix,
)
from dpmix_core.mechanisms.mixing import PREPROCESSING, check_unit_bounds
from dpmix_core.privacy.accountant_names import ACCOUNTANT_SAMPLING, CALIBRATION_ORDER
from dpmix_core.privacy.checks import FeatureRange, check_feature_range
from dpmix_core.privacy.release import CLAMP_NEEDS_UNIT_BOX, PRIVATE_NORMALISATION, MixingRelease, Protects
from dpmix_core.resources.files import check_sha256
from dpmix_core.resources.limits import Cost, LimitExceeded, Limits, check_cost, limits_from_env, mixing_cost
from dpmix_core.synthesis.private_ranges import (
    PrivateRanges,
    check_exact_features,
    check_range_epsilon,
    private_ranges,
    ranges_refusal,
)
from dpmix_core.synthesis.public_constants import ZScoreConstants, read_zscore_constants
from dpmix_core.synthesis.units import RecordUnits, record_units

__all__ = [
    "MECHANISMS",
    "MECHANISM_DESCRIPTIONS",
    "PREPROCESSING",
    "SynthesisConfig",
    "Synthesis",
    "calibration_accountants",
    "calibration_refusal",
    "config_ranges",
    "guarantee_label",
    "synthesize",
    "planned_release",
    "table_refusal",
    "table_units",
    "public_zscore_arrays",
    "release_cost",
    "release_description",
    "release_refusal",
    "scaling_range",
    "resolve_preprocessing",
    "resolve_sigma",
]

MECHANISMS = ("dpmix", "class-centric", "poisson", "local", "label-laplace")
# One sentence per mechanism: what a released point is (the CLI's --mechanism help and the Mixed samples page).
MECHANISM_DESCRIPTIONS: dict[str, str] = {
    "dpmix": "DPMix (Lee et al. 2019): ℓ distinct records from the whole dataset, pixels in [0,1] (or records "
    "clipped to unit norm, as DPFMix runs it).",
    "class-centric": "Class-centric (thesis §4.2, DP-CDA): ℓ records of one class.",
    "poisson": "Poisson mixing (DPFMix): each record joins with probability m/n; the sum is divided by m.",
    "local": "No mixing (ℓ = 1): each released point is one record plus noise — the baseline.",
    "label-laplace": "Label-only Laplace (baseline): every record's real features as they are, its one-hot label "
    "plus Laplace noise at label ε; features not protected.",
}


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
    # class-centric: "unit" (thesis), "zscore" (DP-CDA, public constants), "zscore-private"; dpmix: "unit" (Lee et al.)
    # or "clip" (records clipped to ||x|| <= clip_x, ||y|| <= clip_y: DPFMix App. E.3's DPMix)
    preprocessing: str = "unit"
    clip: float = 1.0  # class-centric c
    zscore_constants: tuple[float, float] | None = None  # public (mean, std) for every feature ("zscore")
    # "zscore" with per-feature public constants from a file (synthesis.public_constants); the path is where they
    # lie, the sha256 of the numbers is what they are (filled in from the file when not given)
    zscore_constants_file: str | None = None
    zscore_constants_sha256: str | None = None
    protect_labels: bool = True  # class-centric: replace-one incl. labels; False: same-class swap (features only)
    public_n: int | None = None  # Poisson: the stated n that sets the rate m/n; None: the dataset's size
    clip_x: float = 1.0  # Poisson (and dpmix "clip") Cx
    clip_y: float = 1.0  # Poisson (and dpmix "clip") Cy
    hard_labels: bool = False
    clamp_negative: bool = False
    label_epsilon: float = 1.0  # label-laplace
    label_task: str = "classification"
    feature_range: FeatureRange | None = None  # public bounds of float features (a pair, or one a feature)
    features: str = "pixels"  # what is mixed: "pixels" or "scattering" (ScatterNet + per-sample GroupNorm, DPFMix)
    # epsilon of feature ranges released privately inside feature_range, which the release then scales with
    # (synthesis.private_ranges); None: the public bounds as they are
    range_epsilon: float | None = None
    # features whose public bounds (0, 1) are exact, a public category's one-hot features: private ranges leave them
    # there and count the others only (less noise); unused (and so empty) without range_epsilon
    exact_features: tuple[int, ...] = ()
    seed: int = 0
    device: str = "cpu"

    @property
    def unit_scaled(self) -> bool:
        """Whether the release scales records to [0,1] (dpmix unless "clip", local, class-centric "unit"): only then is a negative
        released value pure noise, which ``clamp_negative`` may set to 0."""
        if self.mechanism == "dpmix":
            return self.preprocessing != "clip"
        return self.mechanism == "local" or (self.mechanism == "class-centric" and self.preprocessing == "unit")

    @property
    def mix_degree(self) -> int:
        """Records per released point: 1 for local perturbation (which leaves ``l`` unused), else ``l`` (Poisson:
        the expected m)."""
        return 1 if self.mechanism == "local" else self.l

    @property
    def record_clip(self) -> tuple[float, float] | None:
        """(Cx, Cy) that bound the mixed records, ||x|| <= Cx and ||y|| <= Cy (poisson; dpmix "clip"); None where the
        records are not clipped to them (dpmix on [0,1], class-centric, which clips x to c, local, label-laplace)."""
        if self.mechanism == "poisson" or (self.mechanism == "dpmix" and self.preprocessing == "clip"):
            return (self.clip_x, self.clip_y)
        return None

    @property
    def ranges_relation(self) -> str:
        """The adjacency the release (and so its private ranges) is accounted under: add/remove-one for Poisson
        mixing, replace-one for the others."""
        return "add/remove-one" if self.mechanism == "poisson" else "replace-one"

    @property
    def zscore_clipped(self) -> bool:
        """Whether the release z-scores records and then clips them to ||x|| <= c (class-centric "zscore" or
        "zscore-private", DP-CDA Algorithm 1 steps 1-6): the clip a run's ``test_inputs="unclipped"`` lifts."""
        return self.mechanism == "class-centric" and self.preprocessing in ("zscore", "zscore-private")

    def __post_init__(self) -> None:
        if self.feature_range is not None:
            object.__setattr__(self, "feature_range", check_feature_range("feature_range", self.feature_range))
        if self.range_epsilon is None or self.mechanism == "label-laplace":
            object.__setattr__(self, "exact_features", ())  # canonical: they only shape private ranges
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"Unknown mechanism {self.mechanism!r}. Choose one of: {', '.join(MECHANISMS)}.")
        if self.features not in FEATURES:
            raise ValueError(f"Unknown features {self.features!r}. Choose one of: {', '.join(FEATURES)}.")
        if self.clamp_negative and not self.unit_scaled:
            raise ValueError(CLAMP_NEEDS_UNIT_BOX + ".")
        if self.mechanism == "label-laplace":
            if self.features != "pixels":
                raise ValueError("label-laplace releases the real features unchanged; features must be 'pixels'.")
            return
        if self.features != "pixels" and self.unit_scaled and self.feature_range is None:
            raise ValueError(
                f"{self.mechanism} scales features to [0,1] with public bounds, which {self.features} features lack: "
                "use 'poisson' (clips ||x|| <= Cx, DPFMix), class-centric 'zscore' with public zscore_constants, "
                "or give feature_range."
            )
        if self.target_epsilon is None:
            if self.sigma_x is None:
                raise ValueError("Give sigma_x (and sigma_y), or a target epsilon.")
        elif self.accountant is None:  # the tightest rigorous accountant of the mechanism's sampling
            object.__setattr__(self, "accountant", calibration_accountants(self.mechanism)[0])
        elif (refusal := calibration_refusal(self.mechanism, self.accountant)) is not None:
            raise ValueError(refusal)
        if self.preprocessing not in PREPROCESSING:
            raise ValueError(f"preprocessing must be one of {', '.join(PREPROCESSING)}. Found {self.preprocessing!r}.")
        if self.preprocessing == "clip" and self.mechanism != "dpmix":
            raise ValueError(
                "preprocessing 'clip' (records clipped to ||x|| <= clip_x, ||y|| <= clip_y) is for dpmix; "
                "poisson always clips, class-centric clips z-scored records with 'zscore' and clip c."
            )
        if self.zscore_constants is not None:
            if self.preprocessing != "zscore":
                raise ValueError(
                    f"z-score constants apply to preprocessing 'zscore' only (found {self.preprocessing!r})."
                )
            if not self.zscore_constants[1] > 0:
                raise ValueError(f"z-score std must be positive. Found {self.zscore_constants[1]}.")
        self._check_constants_file()
        self._check_range_epsilon()
        if not isinstance(self.protect_labels, bool):
            raise ValueError(f"protect_labels must be True or False. Found {self.protect_labels!r}.")
        if not self.protect_labels and self.mechanism != "class-centric":
            raise ValueError(
                f"{self.mechanism}'s accounting always protects labels; a features-only reading "
                "(same-class swap) exists for class-centric mixing only."
            )
        if self.public_n is not None:
            if isinstance(self.public_n, bool) or not isinstance(self.public_n, int) or self.public_n < 1:
                raise ValueError(f"public n must be a positive integer. Found {self.public_n!r}.")
            if self.mechanism != "poisson":
                raise ValueError("a stated public n sets the Poisson rate m/n; it applies to mechanism 'poisson' only.")
        if not (math.isfinite(self.sigma_ratio) and self.sigma_ratio > 0):
            raise ValueError(f"sigma ratio lambda must be positive. Found {self.sigma_ratio}.")

    def _check_range_epsilon(self) -> None:
        """Private ranges narrow the public bounds a release scales features with: they need those bounds, pixels
        (no feature transform) and a release that scales with them (not a z-score), and less than the target."""
        if self.range_epsilon is None:
            return
        object.__setattr__(self, "range_epsilon", check_range_epsilon(self.range_epsilon))
        if self.feature_range is None:
            raise ValueError("private ranges narrow the public bounds of the features: give them (feature_range).")
        object.__setattr__(self, "exact_features", check_exact_features(self.exact_features, self.feature_range))
        if self.features != "pixels" or self.zscore_clipped:
            how = f"mixes {self.features} features" if self.features != "pixels" else "z-scores the records"
            raise ValueError(f"private ranges narrow the bounds a release scales features with; this one {how}.")
        if (refusal := ranges_refusal(self.range_epsilon, self.target_epsilon)) is not None:
            raise ValueError(refusal)

    def _check_constants_file(self) -> None:
        """A constants file goes with class-centric "zscore" alone; without its sha256, the numbers are read now."""
        if self.zscore_constants_file is None:
            if self.zscore_constants_sha256 is not None:
                raise ValueError("zscore_constants_sha256 names the numbers of a zscore_constants_file; give the file.")
            return
        if self.mechanism != "class-centric" or self.preprocessing != "zscore":
            raise ValueError(
                "a z-score constants file applies to class-centric preprocessing 'zscore' only "
                f"(found {self.mechanism!r}, {self.preprocessing!r})."
            )
        if self.zscore_constants is not None:
            raise ValueError("give z-score constants once: one (mean, std) pair or a per-feature file, not both.")
        path = str(Path(self.zscore_constants_file).expanduser().resolve())
        object.__setattr__(self, "zscore_constants_file", path)
        if self.zscore_constants_sha256 is None:
            object.__setattr__(self, "zscore_constants_sha256", read_zscore_constants(path).sha256)
        else:
            check_sha256("zscore_constants_sha256", self.zscore_constants_sha256)


@dataclass(frozen=True)
class Synthesis:
    data: SyntheticData
    config: SynthesisConfig  # with the sigmas actually used
    dataset_name: str
    dataset_source: str
    n: int
    label_names: tuple[str, ...] = ()  # class k's name (the dataset's; label column k of the release)
    feature_names: tuple[str, ...] = ()  # feature column j's name where the release keeps the data's features
    label_column: str = ""  # the table's label column (a CSV's header), for the release in the table's units
    units: RecordUnits | None = None  # a [0,1] release of a table's columns: the map back to the records' units
    categories: Categories = ()  # public categories of the table's text columns
    ranges: PrivateRanges | None = None  # the bounds the release scaled with, released privately (config.range_epsilon)


def table_units(config: SynthesisConfig, dataset: Dataset, ranges: PrivateRanges | None = None) -> RecordUnits | None:
    """The map of ``config``'s release of ``dataset`` back to its records' units (:mod:`dpmix_core.synthesis.units`),
    or None where there is none (:func:`table_refusal` says why); ``ranges``: the private ranges it scaled with."""
    if table_refusal(config, dataset) is not None:
        return None
    bounds = config.feature_range if ranges is None else ranges.feature_range
    return record_units(bounds, dataset.feature_dim, unit_scaled=config.unit_scaled)


def config_ranges(config: SynthesisConfig, x_train: np.ndarray) -> PrivateRanges | None:
    """The private ranges ``config``'s release of these training records scales with (``config.range_epsilon``;
    :mod:`dpmix_core.synthesis.private_ranges`), or None for the public bounds as they are. Deterministic: the
    release and every map of records into its space (test inputs, audits) compute the same ranges."""
    if config.range_epsilon is None or config.mechanism == "label-laplace":
        return None
    assert config.feature_range is not None  # SynthesisConfig refuses private ranges without public bounds
    return private_ranges(
        x_train,
        config.feature_range,
        epsilon=config.range_epsilon,
        delta=config.delta,
        relation=config.ranges_relation,
        seed=config.seed,
        exact=config.exact_features,
    )


def scaling_range(config: SynthesisConfig, x_train: np.ndarray) -> FeatureRange | None:
    """The bounds ``config``'s release scales these training records with: its private ranges, else its public
    ``feature_range``."""
    ranges = config_ranges(config, x_train)
    return config.feature_range if ranges is None else ranges.feature_range


def table_refusal(config: SynthesisConfig, dataset: Dataset) -> str | None:
    """Why ``config``'s release of ``dataset`` cannot be written in the table's units (one line), or None."""
    if dataset.x_train.ndim != 2 or dataset.x_train.dtype.kind != "f":
        return f"{dataset.name}'s records are images, not the columns of a table; its release stays in [0,1]"
    if config.mechanism == "label-laplace":
        return "label-laplace releases the records' features as they are, with noisy labels: nothing to map back"
    if config.features != "pixels":
        return f"the release mixes {config.features} features, not the table's columns"
    if not config.unit_scaled:
        how = (
            "z-scores records and clips them to ||x|| <= c"
            if config.zscore_clipped
            else "clips records to ||x|| <= Cx"
            if config.record_clip is not None
            else "does not scale records to [0,1]"
        )
        name = config.mechanism if config.mechanism == "poisson" else f"{config.mechanism} '{config.preprocessing}'"
        return (
            f"{name} {how}, which cannot be undone; only a [0,1]-scaled "
            "release (dpmix or class-centric 'unit', local) maps back to the table's units"
        )
    return None


def _made(
    data: SyntheticData, config: SynthesisConfig, dataset: Dataset, ranges: PrivateRanges | None = None
) -> Synthesis:
    """The release of ``dataset``'s own features (its class and feature names carry over to the card; a table's
    [0,1] release keeps the map back to the table's units, through its private ranges where it has them)."""
    units = table_units(config, dataset, ranges)
    if ranges is not None:
        data = replace(data, notes=(f"bounds: {ranges.describe()}",) + tuple(data.notes))
    return Synthesis(
        data,
        config,
        dataset.name,
        dataset.source,
        dataset.n_train,
        dataset.label_names,
        dataset.feature_names,
        dataset.label_column,
        units,
        dataset.categories,
        ranges,
    )


def _sigmas(config: SynthesisConfig) -> tuple[float, float]:
    sx = 1.0 if config.sigma_x is None else config.sigma_x
    sy = config.sigma_ratio * sx if config.sigma_y is None else config.sigma_y
    return sx, sy


def release_description(
    config: SynthesisConfig, sigma_x: float, sigma_y: float, *, n: int, dx: int, dy: int, class_sizes: tuple[int, ...]
) -> MixingRelease:
    """The one release description this recipe makes on data with these sizes (known before any data is touched).

    Also how a privacy card is checked (:func:`dpmix_core.experiments.release_files.verify_card`): the card's
    parameters and sizes give the description back, and its epsilons can be recomputed.
    """
    if config.mechanism in ("dpmix", "local"):
        clip = (config.clip_x, config.clip_y) if config.preprocessing == "clip" else None
        return MixingRelease.dpmix(
            n=n,
            l=config.mix_degree,
            T=config.T,
            sigma_x=sigma_x,
            sigma_y=sigma_y,
            dx=dx,
            dy=dy,
            clamp_negative=config.clamp_negative,
            clip=clip,
        )
    if config.mechanism == "class-centric":
        return MixingRelease.class_centric(
            class_sizes=class_sizes,
            l=config.l,
            T=config.T,
            sigma_x=sigma_x,
            sigma_y=sigma_y,
            dx=dx,
            dy=dy,
            preprocessing=config.preprocessing,
            clip=config.clip,
            hard_labels=config.hard_labels,
            protect_labels=config.protect_labels,
            clamp_negative=config.clamp_negative,
        )
    return MixingRelease.poisson(
        n=config.public_n if config.public_n is not None else n,
        m=config.l,
        T=config.T,
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        clip_x=config.clip_x,
        clip_y=config.clip_y,
    )


def guarantee_label(config: SynthesisConfig) -> str:
    """How to read this config's epsilons, known without data: "covered", "features only; ...", "not covered: ..."."""
    if config.mechanism == "label-laplace":
        return "labels only; features not private"
    if config.mechanism == "class-centric":
        if config.preprocessing == "zscore-private":
            return f"not covered: {PRIVATE_NORMALISATION}"
        if not config.protect_labels:
            return Protects.FEATURES_ONLY.value
    return "covered"


def resolve_preprocessing(config: SynthesisConfig, dataset_name: str) -> SynthesisConfig:
    """The config with explicit public z-score constants: "zscore" without them takes the dataset's documented ones.

    Raises ValueError when the dataset has none (uploads): the user must state
    public constants, or opt in to "zscore-private" (never covered).
    """
    if (
        config.mechanism != "class-centric"
        or config.preprocessing != "zscore"
        or config.zscore_constants is not None
        or config.zscore_constants_file is not None
    ):
        return config
    constants = public_zscore_constants(dataset_name) if config.features == "pixels" else None  # pixel constants
    if constants is None:
        raise ValueError(
            f"z-scoring {dataset_name!r} needs public constants: give a mean and std that do not depend on the "
            "private data (e.g. --zscore-constants MEAN,STD), use [0,1] features (preprocessing 'unit'), or opt in "
            "to 'zscore-private' (statistics of the private data; then no epsilon is covered)."
        )
    return replace(config, zscore_constants=constants)


def public_zscore_arrays(config: SynthesisConfig, d: int) -> ZScoreConstants | None:
    """The public per-feature (mean, std) of a resolved class-centric "zscore" config on d features; None otherwise.

    One (mean, std) pair is repeated over the d features; a constants file is read and must hold the numbers
    its sha256 names, for exactly d features. Raises ValueError with one line otherwise.
    """
    if config.mechanism != "class-centric" or config.preprocessing != "zscore":
        return None
    if config.zscore_constants_file is not None:
        constants = read_zscore_constants(config.zscore_constants_file, sha256=config.zscore_constants_sha256)
        return constants.fitting(d, f"the z-score constants file {config.zscore_constants_file!r}")
    if config.zscore_constants is None:
        raise ValueError("class-centric 'zscore' needs its public constants resolved (resolve_preprocessing).")
    mean, std = config.zscore_constants
    return ZScoreConstants(np.full(d, mean), np.full(d, std), "one public (mean, std) for every feature")


def planned_release(config: SynthesisConfig, dataset: Dataset) -> MixingRelease:
    """The release the mechanism will make on this dataset (before any data is touched). Raises ValueError (one
    line) for [0,1] scaling of features that are not uint8 pixels without their public bounds."""
    if config.unit_scaled and config.features == "pixels":
        check_unit_bounds(dataset.x_train.dtype, config.feature_range)
    config = resolve_preprocessing(config, dataset.name)
    sx, sy = _sigmas(config)
    d, k = _feature_dim(config, dataset), dataset.num_classes
    counts = tuple(int(c) for c in dataset.class_counts()) if config.mechanism == "class-centric" else ()
    release = release_description(config, sx, sy, n=dataset.n_train, dx=d, dy=k, class_sizes=counts)
    return replace(release, feature_transform=FEATURE_TRANSFORMS[config.features])


def _feature_dim(config: SynthesisConfig, dataset: Dataset) -> int:
    """d of the mixed records: the dataset's, or the feature transform's (ScatterNet: 81 x H/4 x W/4 per channel)."""
    if config.features == "pixels":
        return dataset.feature_dim
    c, h, w = scattering_shape(dataset.x_train.shape[1:])
    return c * h * w


def calibration_accountants(mechanism: str) -> list[str]:
    """The accountants that can calibrate sigma for ``mechanism``'s release: those of its sampling scheme (Poisson for
    "poisson", without replacement for the others), in :data:`CALIBRATION_ORDER`; none for label-laplace (no sigma).
    Any other accountant refuses the release with one line (UnsupportedReleaseError)."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"Unknown mechanism {mechanism!r}. Choose one of: {', '.join(MECHANISMS)}.")
    if mechanism == "label-laplace":
        return []
    sampling = "poisson" if mechanism == "poisson" else "without-replacement"
    return [name for name in CALIBRATION_ORDER if ACCOUNTANT_SAMPLING[name] == sampling]


def calibration_refusal(mechanism: str, accountant: str) -> str | None:
    """Why ``accountant`` cannot calibrate ``mechanism``'s release, in one line (None when it can)."""
    offered = calibration_accountants(mechanism)
    if accountant in offered:
        return None
    return (
        f"{accountant!r} cannot calibrate a {mechanism} release (it analyses another sampling scheme, or no such "
        f"accountant): use one of {', '.join(offered)}."
    )


def resolve_sigma(config: SynthesisConfig, dataset: Dataset) -> SynthesisConfig:
    """The config with explicit sigmas: a target epsilon is calibrated on the exact release for this dataset."""
    if config.mechanism == "label-laplace":
        return config
    config = resolve_preprocessing(config, dataset.name)
    if config.target_epsilon is not None and config.range_epsilon is not None:
        return _calibrated_beside_ranges(config, dataset)
    if config.target_epsilon is not None:
        from dpmix_core.privacy.accountants import get_accountant  # lazy: dp_accounting and scipy cost ~1 s to import
        from dpmix_core.privacy.calibration import REPRODUCIBLE, calibrate_sigma

        assert config.accountant is not None  # SynthesisConfig sets the mechanism's tightest one when none is given
        cal = calibrate_sigma(
            get_accountant(config.accountant),
            planned_release(config, dataset),
            target_epsilon=config.target_epsilon,
            delta=config.delta,
            sigma_ratio=config.sigma_ratio,
            time_budget=REPRODUCIBLE,  # the same config gives the same sigma on any machine, at any load
        )
        return replace(config, sigma_x=cal.sigma_x, sigma_y=cal.sigma_y, target_epsilon=None)
    sx, sy = _sigmas(config)
    return replace(config, sigma_x=sx, sigma_y=sy)


def _calibrated_beside_ranges(config: SynthesisConfig, dataset: Dataset) -> SynthesisConfig:
    """The config with the least sigmas whose release and its private ranges together stay within the target
    (:func:`~dpmix_core.synthesis.private_ranges.composition_epsilon`); the ranges' noise depends on their epsilon,
    delta and the adjacency only, so no record is read here."""
    from dpmix_core.privacy.calibration import calibrate_sigma_composed
    from dpmix_core.synthesis import private_ranges as pr

    assert config.target_epsilon is not None and config.range_epsilon is not None
    z = pr.range_noise_multiplier(config.range_epsilon, config.delta, config.ranges_relation)
    item = pr.ranges_item(z, pr.ROUNDS, config.ranges_relation)
    cal = calibrate_sigma_composed(
        planned_release(config, dataset),
        lambda release: pr.composition_epsilon(item, release, config.delta),
        target_epsilon=config.target_epsilon,
        delta=config.delta,
        sigma_ratio=config.sigma_ratio,
    )
    return replace(config, sigma_x=cal.sigma_x, sigma_y=cal.sigma_y, target_epsilon=None)


def release_cost(config: SynthesisConfig, dataset: Dataset) -> Cost:
    """The estimated memory and time of this release on this dataset (see :mod:`dpmix_core.resources.limits`)."""
    if config.mechanism == "label-laplace":
        T, l = dataset.n_train, 1
    else:
        T, l = config.T, config.mix_degree
    d = dataset.feature_dim if config.mechanism == "label-laplace" else _feature_dim(config, dataset)
    return mixing_cost(T=T, l=l, d=d, k=dataset.num_classes, n=dataset.n_train)


def release_refusal(config: SynthesisConfig, dataset: Dataset, limits: Limits | None = None) -> str | None:
    """Why :func:`synthesize` would refuse this release before any work (a limit, in one line), or None."""
    try:
        check_cost(release_cost(config, dataset), limits or limits_from_env(), change="T or l")
    except LimitExceeded as exc:
        return str(exc)
    return None


def synthesize(
    config: SynthesisConfig,
    dataset: Dataset,
    *,
    transformed: Dataset | None = None,
    limits: Limits | None = None,
    job: bool = False,
) -> Synthesis:
    """Run the configured mechanism on the training split (calibrating sigma first if asked).

    With ``config.features`` other than "pixels" the records are first mapped
    by that public feature transform (ScatterNet + per-sample GroupNorm, DPFMix
    App. E.2), then clipped and mixed; the release says so. ``transformed``:
    ``dataset`` already mapped by that transform (``feature_dataset``), to not
    compute it twice.

    The estimated cost is checked first against ``limits`` (default: the environment's;
    ``job=True``: a background job, held to the job time limit): over a limit, a
    :class:`~dpmix_core.resources.limits.LimitExceeded` names it before anything is computed.
    """
    check_cost(release_cost(config, dataset), limits or limits_from_env(), change="T or l", job=job)
    if config.mechanism != "label-laplace" and config.features != "pixels":
        config = resolve_sigma(config, dataset)  # calibrated on the feature release (same n, sizes, bounds)
        feats = (
            transformed if transformed is not None else feature_dataset(dataset, config.features, device=config.device)
        )
        inner = synthesize(replace(config, features="pixels"), feats, limits=limits, job=job)
        description = FEATURE_TRANSFORMS[config.features]
        release = inner.data.release
        if not isinstance(release, MixingRelease):
            raise ValueError(f"feature mixing needs a mixing mechanism. Found {config.mechanism!r}.")
        data = replace(
            inner.data,
            release=replace(release, feature_transform=description),
            notes=(f"features mixed: {description}",) + tuple(inner.data.notes),
        )
        return Synthesis(data, config, dataset.name, feats.source, dataset.n_train, dataset.label_names)
    X = dataset.x_train.reshape(dataset.n_train, -1)
    y = dataset.y_train
    k = dataset.num_classes
    if config.mechanism == "label-laplace":
        data = laplace_label_release(
            X,
            y,
            num_classes=k,
            epsilon=config.label_epsilon,
            task=config.label_task,
            postprocess=True,
            seed=config.seed,
        )
        return _made(data, config, dataset)
    config = resolve_sigma(config, dataset)
    sx, sy = _sigmas(config)  # both set by resolve_sigma
    ranges = config_ranges(config, X)  # the bounds the records are scaled with, released privately (or None)
    bounds = config.feature_range if ranges is None else ranges.feature_range
    if config.mechanism == "local":
        data = local_perturbation(
            X,
            y,
            num_classes=k,
            num_points=config.T,
            sigma_x=sx,
            sigma_y=sy,
            clamp_negative=config.clamp_negative,
            seed=config.seed,
            device=config.device,
            feature_range=bounds,
        )
        return _made(data, config, dataset, ranges)
    release = planned_release(config, dataset)  # the one description: the mechanism runs exactly it
    common: dict = dict(num_classes=k, release=release, seed=config.seed, device=config.device, feature_range=bounds)
    if config.mechanism == "class-centric":
        constants = public_zscore_arrays(config, X.shape[1])
        if constants is not None:
            common.update(mean=constants.mean, std=constants.std)
        data = class_centric_mix(X, y, **common)
        if config.zscore_constants_file is not None and constants is not None:
            note = f"per-feature public z-score constants: {constants.source} (sha256 {constants.sha256[:12]}...)"
            data = replace(data, notes=tuple(data.notes) + (note,))
    elif config.mechanism == "poisson":
        data = poisson_mix(X, y, **common)
    else:
        data = dpmix(X, y, **common)
    return _made(data, config, dataset, ranges)
