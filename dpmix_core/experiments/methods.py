"""The training methods of a run: one small class per method, one interface (the Opacus-accountant pattern).

A run (:func:`dpmix_core.experiments.runner.run_config`) is the same pipeline for every
method; a method decides only its three steps:

1. :meth:`Method.training_set` — what the model trains on and its privacy accounting:
   a mixing or label-Laplace release (with its card), or the real records;
2. :meth:`Method.project` — a private map of the splits before training (DP-PCA), else none;
3. :meth:`Method.train` — the optimiser: ordinary ``fit`` (which saves and resumes its state when the
   run has a checkpoint), or DP-SGD (which also accounts; it always trains from epoch 0).

``METHODS`` maps ``RunConfig.method`` to its class; a new method is a new class here and a
name in ``dpmix_core.training.names.METHODS``.
"""

from __future__ import annotations

import math
import time
from abc import ABC
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from dpmix_core.data import one_hot_features
from dpmix_core.experiments.config import RunConfig
from dpmix_core.mechanisms.feature_ranges import RANGE_ROUNDS, FeatureRanges, dp_feature_ranges
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.synthesis.private_ranges import ROUNDS
from dpmix_core.training import data as D
from dpmix_core.training.checkpoint import Checkpointer
from dpmix_core.training.names import CLOSED_FORM_MODELS, DP_RANGE_NORMS
from dpmix_core.training.names import METHODS as METHOD_NAMES
from dpmix_core.training.train import FitResult, OptimSettings, StopCheck

__all__ = [
    "METHODS",
    "DpPca",
    "DpSgd",
    "LabelLaplace",
    "Method",
    "Mixing",
    "NonPrivate",
    "Privacy",
    "RunContext",
    "TrainingSet",
    "closed_form_step",
    "release_file_training_set",
    "get_method",
    "json_epsilon",
]


FEW_POINTS_PER_FEATURE = 3  # corrected-lsq with fewer fitted points per feature than this gets a note


def json_epsilon(x: float | None) -> float | str | None:
    """An epsilon for a JSON result: inf becomes "inf"."""
    if x is None:
        return None
    return "inf" if math.isinf(x) else float(x)


@dataclass
class RunContext:
    """What every step of one run shares: its config, device, seeds, stop check, and the run's record.

    ``timings``, ``notes``, ``extra_versions`` and ``extra`` are appended to by the steps and end up in
    the run's result (see the runner's module docstring).
    """

    config: RunConfig
    device: Any  # torch.device
    seeds: np.ndarray  # split, batch order, torch init, DP noise
    stop: StopCheck
    phase: Callable[[str], None]
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extra_versions: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    checkpoint: Checkpointer | None = None  # where ordinary training saves and resumes its state (a worker's run)
    feature_ranges: FeatureRanges | None = None  # DP-SGD's private feature ranges (step 2), accounted in step 3
    exact_features: tuple[int, ...] = ()  # DP-SGD: the data's one-hot features (step 1), which its ranges leave out
    synthesis: Any = None  # the release a mixing run made (a Synthesis; runner.run_release hands it out)

    def tick(self, name: str, t0: float) -> None:
        """Add the seconds since ``t0`` to the timing ``name``."""
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0


@dataclass(frozen=True)
class Privacy:
    """A run's privacy accounting: epsilons by accountant ("inf" where none), delta, the release's card."""

    epsilon: dict[str, Any] = field(default_factory=dict)
    delta: float | None = None
    card: dict | None = None


@dataclass(frozen=True)
class TrainingSet:
    """What the model trains on (before the validation split) and how test records map into its space.

    ``test_map`` is the run's own test loader (``RunConfig.test_inputs``); ``other_test_maps`` holds the other
    loaders that apply to the release, by their ``test_inputs`` name (a clipped class-centric z-score release:
    the test split without the clip, and clipped then rescaled to the released points' median norm), so one
    trained model is read through each (the runner's ``test_accuracy_by_inputs``).
    """

    x: np.ndarray
    y: np.ndarray
    test_map: Callable[[np.ndarray], np.ndarray]
    privacy: Privacy
    other_test_maps: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)


def release_test_maps(
    syn: SynthesisConfig, x_train: np.ndarray, test_inputs: str, scale: float | None = None
) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, Callable[[np.ndarray], np.ndarray]]]:
    """(the test loader ``test_inputs`` of the release made with ``syn``, the other loaders that apply to it by name).

    Only a clipped class-centric z-score release has more than one (``TEST_INPUTS``: with the release's clip,
    without it, and clipped then multiplied by ``scale``, :func:`~dpmix_core.training.data.release_scale`); every
    other release has its own feature map only.
    """
    if not syn.zscore_clipped:
        return D.release_feature_map(syn, x_train), {}
    if scale is None:
        raise ValueError("a clipped class-centric z-score release needs the released points' scale for its loaders.")
    clipped = D.release_feature_map(syn, x_train)
    factor = np.float32(scale)
    maps = {
        "release": clipped,
        "unclipped": D.release_feature_map(syn, x_train, clip=False),
        "release-scale": lambda x: clipped(x) * factor,
    }
    return maps.pop(test_inputs), maps


def run_test_loaders(
    ctx: RunContext, syn: SynthesisConfig, x_train: np.ndarray, released_x: np.ndarray
) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, Callable[[np.ndarray], np.ndarray]]]:
    """:func:`release_test_maps` for the run's release (``released_x``: its points); the factor of the
    "release-scale" loader goes to the run's result (``release_scale``)."""
    scale = None
    if syn.zscore_clipped:
        scale = D.release_scale(released_x, syn.clip)
        ctx.extra["release_scale"] = scale
    return release_test_maps(syn, x_train, ctx.config.test_inputs, scale)


def real_records(config: RunConfig, ds, privacy: Privacy) -> TrainingSet:
    """The real training records as the model sees them (pixels/255, or a data file's features scaled by its public
    ``feature_range``: :func:`~dpmix_core.training.data.record_feature_map`) and one-hot (or numeric) labels."""
    regression = config.task == "regression"
    y = ds.y_train.astype(np.float32)[:, None] if regression else D.one_hot(ds.y_train, ds.num_classes)
    features = D.record_feature_map(config.feature_range)
    return TrainingSet(features(ds.x_train), y, features, privacy)


class Method(ABC):
    """One training method. Subclasses override the steps that differ; the defaults train on real records."""

    name: ClassVar[str]
    # validation accuracy on held-out *private* records is monitoring only (not covered by epsilon)
    private_validation: ClassVar[bool] = False

    def training_set(self, ctx: RunContext, ds, raw_ds, released_features: bool) -> TrainingSet:
        """Step 1 (default: the real records, no privacy)."""
        return real_records(ctx.config, ds, Privacy())

    def project(
        self, ctx: RunContext, splits: tuple[np.ndarray, np.ndarray, np.ndarray], input_shape: tuple[int, ...]
    ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[int, ...], Privacy | None]:
        """Step 2 (default: none): ((train, val, test) features, input shape, privacy or None to keep step 1's)."""
        return splits, input_shape, None

    def train(
        self,
        ctx: RunContext,
        model,
        loss_fn,
        tensors: tuple,
        settings: OptimSettings,
        batch_gen,
        on_epoch: Callable[[dict], None],
    ) -> tuple[Any, FitResult, Privacy | None]:
        """Step 3 (default: ordinary training): (model, fit result, privacy or None to keep the earlier one).

        A closed-form model (``corrected-lsq``) is fitted in one step instead, correcting for the release's
        published feature noise (``sigma_x``, scaled with the inputs; 0 for real records).
        """
        from dpmix_core.training.train import fit

        if ctx.config.model in CLOSED_FORM_MODELS:
            return model, closed_form_step(ctx, model, tensors, on_epoch), None
        xt, yt, xv, yv = tensors
        t0 = time.perf_counter()
        fit_res = fit(
            model,
            loss_fn,
            xt,
            yt,
            settings=settings,
            generator=batch_gen,
            task=ctx.config.task,
            x_val=xv,
            y_val=yv,
            on_epoch=on_epoch,
            stop=ctx.stop,
            checkpoint=ctx.checkpoint,
        )
        ctx.tick("train", t0)
        return model, fit_res, None


def closed_form_step(ctx: RunContext, model, tensors: tuple, on_epoch: Callable[[dict], None]) -> FitResult:
    """Step 3 for a closed-form model (``corrected-lsq``): fit it with the release's published noise, note how.

    ``sigma_x`` (the release's feature noise) is scaled with the inputs (``input_norm``), ``sigma_y`` is not,
    and argmax labels have none; real records (no release) have no noise. The run's notes say which floor was
    chosen, and warn when it is the grid's largest or when there are few fitted points per feature.
    """
    from dpmix_core.training.corrected_lsq import DEFAULT_FLOORS
    from dpmix_core.training.train import fit_closed_form

    xt, yt, xv, yv = tensors
    t0 = time.perf_counter()
    sigma_x = float(ctx.extra.get("sigma_x") or 0.0) * float(ctx.extra.get("input_scale", 1.0))
    syn = ctx.config.synthesis  # labels are not rescaled; argmax labels carry no Gaussian noise
    sigma_y = 0.0 if syn is not None and syn.hard_labels else float(ctx.extra.get("sigma_y") or 0.0)
    fit_res = fit_closed_form(
        model,
        xt,
        yt,
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        task=ctx.config.task,
        x_val=xv,
        y_val=yv,
        on_epoch=on_epoch,
    )
    ctx.tick("train", t0)
    chosen = fit_res.history[-1]["floor"]
    how = "chosen on the release's held-out points" if len(xv) else "(the default: no held-out points)"
    ctx.notes.append(
        f"corrected-lsq: least squares in closed form, Gram corrected for feature noise sigma_x = "
        f"{sigma_x:.4g}, eigenvalue floor {chosen:g} {how} (no epochs, optimiser or loss)"
    )
    if len(xv) and chosen == max(DEFAULT_FLOORS):
        ctx.notes.append(
            f"corrected-lsq chose the largest floor of its grid ({chosen:g}): the held-out points favour the most "
            "regular fit, so the noise swamps most of the signal at this setting"
        )
    n_fit, dim = int(xt.shape[0]), (int(xt[0].numel()) if len(xt) else 0)
    if n_fit < FEW_POINTS_PER_FEATURE * dim:
        ctx.notes.append(
            f"corrected-lsq fitted {dim} coefficients per output from {n_fit} points (fewer than "
            f"{FEW_POINTS_PER_FEATURE} per feature): the noise correction rests on few points per coefficient, so "
            "compare a gradient-trained model on the same release"
        )
    return fit_res


class Mixing(Method):
    """Train on a random-mixing release (DPMix, class-centric, Poisson; pixels or public features)."""

    name = "mixing"

    def training_set(self, ctx: RunContext, ds, raw_ds, released_features: bool) -> TrainingSet:
        if ctx.config.release_file is not None:
            return release_file_training_set(ctx, ds)
        synthesis, card = _synthesize(ctx, ds, raw_ds, released_features)
        ctx.extra["sigma_x"], ctx.extra["sigma_y"] = synthesis.config.sigma_x, synthesis.config.sigma_y
        privacy = Privacy({e["accountant"]: e["epsilon"] for e in card["epsilons"]}, synthesis.config.delta, card)
        test_map, others = run_test_loaders(ctx, synthesis.config, ds.x_train, synthesis.data.x)
        return TrainingSet(synthesis.data.x, synthesis.data.y, test_map, privacy, others)


def release_file_training_set(ctx: RunContext, ds) -> TrainingSet:
    """Step 1 for a release made earlier (``train --release``): the file's points, its card's epsilons.

    The file must still have the bytes the run was set up with (``release_sha256``) and fit the dataset
    the card names (feature and label dimensions after the card's public feature transform).
    """
    from dpmix_core.experiments.release_files import read_release, release_synthesis

    config = ctx.config
    assert config.release_file is not None and config.synthesis is not None  # RunConfig checks both
    ctx.phase("release")
    t0 = time.perf_counter()
    release = read_release(config.release_file)
    where = f"release file {config.release_file!r}"
    if release.sha256 != config.release_sha256:
        raise ValueError(f"{where} changed since the run was set up (its SHA-256 differs): set the run up again.")
    syn = release_synthesis(release.card, where=f"the card of {config.release_file!r}")
    same = lambda s: replace(s, seed=0, device="cpu")  # noqa: E731 -- the run owns these two
    if same(syn) != same(config.synthesis):
        raise ValueError(f"the run's release parameters differ from the card of {where}: set the run up again.")
    if release.x.shape[1] != ds.feature_dim or release.y.shape[1] != ds.num_classes:
        raise ValueError(
            f"{where} holds {release.x.shape[1]} features and {release.y.shape[1]} labels per point, but "
            f"{config.dataset!r} ({syn.features}) has {ds.feature_dim} and {ds.num_classes}: it is not a release "
            "of this dataset."
        )
    ctx.tick("release", t0)
    card = release.card
    ctx.extra["sigma_x"], ctx.extra["sigma_y"] = syn.sigma_x, syn.sigma_y
    ctx.extra["released_points"] = release.num_points
    ctx.extra["release_file"] = {
        "path": config.release_file,
        "sha256": release.sha256,
        "created_utc": card.get("created_utc"),
        "dpmix_studio_version": card.get("dpmix_studio_version"),
    }
    made = f"made by DPMix Studio {card.get('dpmix_studio_version', '?')} on {card.get('created_utc', '?')}"
    ctx.notes.append(
        f"trained on the release file {config.release_file} (SHA-256 {release.sha256[:12]}…, {made}): training is "
        "post-processing, so epsilon is the card's, computed when the release was made; seeds change only the "
        "validation split and the model's initialisation, never the release"
    )
    privacy = Privacy({e["accountant"]: e["epsilon"] for e in card["epsilons"]}, card["delta"], card)
    test_map, others = run_test_loaders(ctx, syn, ds.x_train, release.x)
    return TrainingSet(release.x, release.y, test_map, privacy, others)


class LabelLaplace(Method):
    """Label-only Laplace: the real features (pixels/255, or scaled by public bounds; in order) with Laplace-noised
    labels."""

    name = "label-laplace"

    def training_set(self, ctx: RunContext, ds, raw_ds, released_features: bool) -> TrainingSet:
        synthesis, card = _synthesize(ctx, ds, raw_ds, released_features)
        ctx.notes.append("label-only Laplace: features are not private; epsilon covers the labels only")
        privacy = Privacy({"laplace": json_epsilon(getattr(synthesis.data.release, "epsilon", None))}, 0.0, card)
        test_map = D.release_feature_map(synthesis.config, ds.x_train)  # the records' own features
        return TrainingSet(test_map(ds.x_train), synthesis.data.y, test_map, privacy)


class NonPrivate(Method):
    """The non-private baseline: the real training records, no noise."""

    name = "non-private"

    def training_set(self, ctx: RunContext, ds, raw_ds, released_features: bool) -> TrainingSet:
        ctx.notes.append("non-private baseline: trained on the real training records")
        return real_records(ctx.config, ds, Privacy({"none": "inf"}, None))


class DpPca(Method):
    """Analyze-Gauss DP-PCA (Dwork et al. 2014) projection, then a non-private linear classifier."""

    name = "dp-pca"
    private_validation = True

    def project(self, ctx, splits, input_shape):
        from dpmix_core.training.pca import fit_projection

        config = ctx.config
        ctx.phase("pca")
        t0 = time.perf_counter()
        x_tr, x_va, x_test = splits
        proj = fit_projection(
            x_tr,
            num_components=config.pca_components,
            epsilon=config.pca_epsilon,
            delta=config.pca_delta,
            seed=int(ctx.seeds[3]),
        )
        privacy = Privacy(
            {"analytic-gaussian": json_epsilon(proj.epsilon)},
            None if math.isinf(proj.epsilon) else config.pca_delta,
        )
        ctx.notes.extend(proj.notes)
        ctx.notes.append(
            "only the projection is DP: the linear classifier is trained non-privately on the projected "
            "private records (the DP-PCA baseline's protocol)"
        )
        ctx.tick("pca", t0)
        projected = (proj.transform(x_tr), proj.transform(x_va), proj.transform(x_test))
        return projected, (config.pca_components,), privacy


class DpSgd(Method):
    """DP-SGD (Abadi et al. 2016) with Opacus on the real records; z calibrated to the target (eps, delta).

    With ``input_norm="private-ranges"`` step 2 rescales every split by per-feature ranges released from the
    training records (:func:`~dpmix_core.mechanisms.feature_ranges.dp_feature_ranges`) as a release's private
    ranges find them (:data:`~dpmix_core.synthesis.private_ranges.ROUNDS` rounds; the one-hot features of the data's
    public categories, whose bounds (0, 1) are exact, neither counted nor narrowed), and step 3 calibrates and
    accounts the ranges and the steps together (:func:`~dpmix_core.training.dpsgd.dpsgd_with_ranges_epsilons`).
    ``"dp-ranges"`` is the first version of the step (3 rounds over every column), which stored runs keep.
    """

    name = "dp-sgd"
    private_validation = True

    def training_set(self, ctx, ds, raw_ds, released_features):
        if ctx.config.input_norm == "private-ranges":
            ctx.exact_features = one_hot_features(ds.feature_names, ds.categories)
        return super().training_set(ctx, ds, raw_ds, released_features)

    def project(self, ctx, splits, input_shape):
        if ctx.config.input_norm not in DP_RANGE_NORMS:
            return splits, input_shape, None
        if ctx.config.feature_range is None:  # raw features: no public bounds to narrow (the clip bounds each step)
            ctx.notes.append("no public feature range: DP-SGD trains on the features as they are, no ranges released")
            return splits, input_shape, None
        from dpmix_core.training.dpsgd import RANGES_EPSILON_SHARE, ranges_noise_multiplier

        config = ctx.config
        x_tr, x_va, x_test = splits
        z_ranges = ranges_noise_multiplier(target_epsilon=config.dpsgd_epsilon, delta=config.dpsgd_delta)
        ranges = dp_feature_ranges(
            x_tr,
            noise_multiplier=z_ranges,
            rounds=RANGE_ROUNDS if config.input_norm == "dp-ranges" else ROUNDS,
            seed=np.random.SeedSequence([int(ctx.seeds[3]), 1]),
            exact=ctx.exact_features,
        )
        ctx.feature_ranges = ranges
        ctx.extra["dpsgd_ranges"] = {  # in the units of the features as the public bounds scale them, [0,1]
            "low": ranges.low.tolist(),
            "high": ranges.high.tolist(),
            "noise_multiplier": ranges.noise_multiplier,
            "rounds": ranges.rounds,
            "bins": ranges.bins,
            "exact_features": list(ranges.exact),
        }
        ctx.notes.append(
            f"inputs rescaled by each feature's range inside the public bounds, released privately: {ranges.describe()}, "
            f"costing {RANGES_EPSILON_SHARE:.0%} of the target alone; epsilon covers the ranges and DP-SGD's steps together"
        )
        return (ranges.scale(x_tr), ranges.scale(x_va), ranges.scale(x_test)), input_shape, None

    def train(self, ctx, model, loss_fn, tensors, settings, batch_gen, on_epoch):
        import torch

        from dpmix_core.training.dpsgd import (
            calibrate_noise_multiplier,
            calibrate_with_ranges,
            dpsgd_epsilons,
            dpsgd_with_ranges_epsilons,
            steps_per_epoch,
            train_dpsgd,
        )

        config = ctx.config
        xt, yt, xv, yv = tensors
        ctx.extra_versions.append("opacus")
        ctx.phase("calibration")
        t0 = time.perf_counter()
        n_priv = int(xt.shape[0])
        steps = steps_per_epoch(n_priv, config.batch_size) * config.epochs
        ranges = ctx.feature_ranges
        budget = {
            "n": n_priv,
            "batch_size": config.batch_size,
            "steps": steps,
            "target_epsilon": config.dpsgd_epsilon,
            "delta": config.dpsgd_delta,
        }
        if ranges is None:
            z = calibrate_noise_multiplier(**budget, accountant=config.dpsgd_accountant)
        else:
            z = calibrate_with_ranges(**budget, ranges_event=ranges.dp_event())
        ctx.tick("calibration", t0)
        noise_gen = torch.Generator(device=ctx.device).manual_seed(int(ctx.seeds[3]))
        t0 = time.perf_counter()
        model, fit_res = train_dpsgd(
            model,
            loss_fn,
            xt,
            yt,
            settings=settings,
            noise_multiplier=z,
            clip=config.dpsgd_clip,
            generator=batch_gen,
            noise_generator=noise_gen,
            task=config.task,
            x_val=xv,
            y_val=yv,
            on_epoch=on_epoch,
            stop=ctx.stop,
        )
        ctx.tick("train", t0)
        shape = {"n": n_priv, "batch_size": config.batch_size, "steps": steps, "noise_multiplier": z}
        if ranges is None:
            epsilon = dpsgd_epsilons(**shape, delta=config.dpsgd_delta)
        else:
            epsilon = dpsgd_with_ranges_epsilons(**shape, delta=config.dpsgd_delta, ranges_event=ranges.dp_event())
        ctx.extra["dpsgd"] = {
            "noise_multiplier": z,
            "sample_rate": config.batch_size / n_priv,
            "steps": steps,
            "clip": config.dpsgd_clip,
            "target_epsilon": config.dpsgd_epsilon,
            "calibrated_with": config.dpsgd_accountant if ranges is None else "pld-dp-accounting",
        }
        ctx.notes.append(
            f"DP-SGD noise multiplier calibrated with {config.dpsgd_accountant}; epsilon also from "
            "Opacus' RDP and PRV accountants on the same (q, z, steps)"
            if ranges is None
            else "DP-SGD noise multiplier calibrated with dp_accounting's PLD on the ranges and the steps composed; "
            "epsilon also from dp_accounting's RDP and Opacus' RDP and PRV accountants on the same composition"
        )
        return model, fit_res, Privacy(epsilon, config.dpsgd_delta)


def _synthesize(ctx: RunContext, ds, raw_ds, released_features: bool):
    """The run's release and its privacy card (mixing and label-Laplace): (Synthesis, card)."""
    from dpmix_core.synthesis.export import privacy_card
    from dpmix_core.synthesis.pipeline import synthesize

    syn_config = ctx.config.synthesis
    assert syn_config is not None  # RunConfig checks that these methods carry a synthesis config
    ctx.phase("synthesis")
    t0 = time.perf_counter()
    synthesis = (
        synthesize(syn_config, raw_ds, transformed=ds, job=True)
        if released_features
        else synthesize(syn_config, ds, job=True)
    )
    ctx.tick("synthesis", t0)
    ctx.stop(force=True)
    ctx.synthesis = synthesis
    ctx.extra["released_points"] = int(synthesis.data.x.shape[0])
    ctx.extra["release_notes"] = list(synthesis.data.notes)
    return synthesis, privacy_card(synthesis)


METHODS: dict[str, type[Method]] = {cls.name: cls for cls in (Mixing, NonPrivate, DpSgd, LabelLaplace, DpPca)}
assert set(METHODS) == set(METHOD_NAMES), "every method name has exactly one class"


def get_method(name: str) -> Method:
    """The method class for ``RunConfig.method``; ValueError naming the choices otherwise."""
    try:
        return METHODS[name]()
    except KeyError:
        raise ValueError(f"Unknown method {name!r}. Choose one of: {', '.join(METHODS)}.") from None
