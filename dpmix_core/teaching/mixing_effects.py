"""Lesson: why a random-mixing release is private -- averaging, subsampling and composition, one at a time.

Three release models (``model``):

* ``"poisson"`` -- Poisson mixing (DPFMix Alg. 1): each of T points sums the records that joined it (each record
  independently with probability q = m/n, n the stated public size), every record clipped to ||x|| <= Cx and
  ||y|| <= Cy, divides by m and adds N(0, sigma_x^2) and N(0, sigma_y^2) noise; neighbours add or remove one
  record; accounted by ``pld-poisson``.
* ``"without-replacement"`` -- DPMix (Lee et al. 2019): each point is the mean of exactly m distinct records
  (rate m/n), features in [0,1]^dx and one-hot labels, plus the same noise; neighbours replace one record;
  accounted by ``rdp-wor`` (WBK 2019 via dp_accounting).
* ``"without-replacement-clipped"`` -- the same mixing of m distinct records, each clipped to ||x|| <= Cx and
  ||y|| <= Cy instead of lying in [0,1] (DPFMix App. E.3's DPMix, its Table 1 uniform row); replace-one; ``rdp-wor``
  on the clipped bounds (a record moves a point by 2C/m instead of sqrt(d)/m).

Its epsilon is the product of three effects, which the lesson separates by accounting for *the same noise* on
smaller releases, each a ``dp_accounting`` event of one subsampled Gaussian:

1. no averaging: one point that surely holds your record, divided by 1 (m = 1): a Gaussian mechanism with
   noise multiplier z / m;
2. averaging: the same point divided by m, so one record moves it m times less (sensitivity C / m): z;
3. subsampling: your record joins that point only with probability q (amplification by subsampling);
4. composition: T such points, the release itself;

and, for contrast, T points that all surely hold your record (composition without amplification).

z is the release's own noise multiplier (:meth:`MixingRelease.noise_multiplier`, DPFMix Lemma 2.2: the two
noise blocks whitened into one). Every stage is accounted by the model's accountant (a rigorous upper bound); an
infinite or enormous epsilon is kept and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
import plotly.graph_objects as go

from dpmix_core.privacy.accountants import ENORMOUS_EPSILON, get_accountant
from dpmix_core.privacy.events import SampledGaussianSteps
from dpmix_core.privacy.release import MixingRelease, Sampling
from dpmix_core.teaching.common import _layout
from dpmix_core.views.privacy_scale import format_epsilon

__all__ = [
    "CLIPPED_MODELS",
    "EFFECT_MODELS",
    "EffectStage",
    "effect_model",
    "MixingEffects",
    "mixing_effects",
    "mixing_effects_figure",
]

# release model -> (its accountant, how the lesson names it)
EFFECT_MODELS = {
    "poisson": ("pld-poisson", "Poisson mixing (DPFMix), add/remove-one"),
    "without-replacement": ("rdp-wor", "mixing m distinct records (DPMix), replace-one"),
    "without-replacement-clipped": (
        "rdp-wor",
        "mixing m distinct records clipped to ‖x‖ ≤ Cx, ‖y‖ ≤ Cy (DPFMix App. E.3's DPMix), replace-one",
    ),
}
CLIPPED_MODELS = frozenset({"poisson", "without-replacement-clipped"})  # the models whose records Cx, Cy bound


def effect_model(mechanism: str | None, clip: tuple[float, float] | None) -> str | None:
    """The lesson's model of a release made by ``mechanism`` ("poisson", "dpmix"), its records clipped to ``clip`` =
    (Cx, Cy) or in [0,1] (None); None where the lesson has no model of that release (DP-CDA's, class-centric)."""
    if mechanism == "poisson":
        return "poisson"
    if mechanism in ("dpmix", "local"):  # local perturbation is DPMix with one record per point
        return "without-replacement" if clip is None else "without-replacement-clipped"
    return None


@dataclass(frozen=True)
class EffectStage:
    """One release of the lesson: what it is, its (z, q, T) and its epsilon under the lesson's accountant."""

    name: str
    what: str
    z: float
    q: float
    steps: int
    epsilon: float
    guarantee: str
    reason: str | None = None
    is_release: bool = False  # the stage that is the release itself (composition)


@dataclass(frozen=True)
class MixingEffects:
    """The stages, in the order the lesson tells them, for one Poisson mixing release."""

    release: MixingRelease
    delta: float
    accountant: str
    stages: tuple[EffectStage, ...]

    def stage(self, name: str) -> EffectStage:
        return next(s for s in self.stages if s.name == name)

    def table(self) -> pd.DataFrame:
        """One row per stage: what it is, z, q, T, epsilon, the guarantee and the accountant's note."""
        return pd.DataFrame(
            [
                {
                    "stage": s.name,
                    "what is released": s.what,
                    "noise multiplier z": float(f"{s.z:.4g}"),
                    "q": float(f"{s.q:.4g}"),
                    "points T": s.steps,
                    "ε": _label(s.epsilon).removeprefix("ε = "),
                    "guarantee": s.guarantee,
                    "note": s.reason or "",
                }
                for s in self.stages
            ]
        )

    def sentences(self) -> list[str]:
        """The lesson in numbers: one plain sentence per effect."""
        e = {s.name: format_epsilon(s.epsilon) for s in self.stages}
        m, q, T = self.release.mix_degree, self.release.sampling_rate, self.release.num_points
        naive = format_epsilon(T * self.stage("subsampling").epsilon)
        return [
            f"**Averaging** divides one record's influence by m = {m}: the same noise is worth {m}× more, and ε of "
            f"one point that holds your record drops from {e['no averaging']} to {e['averaging']}.",
            f"**Subsampling** hides whether your record is in a point at all (q = {q:.3g}): ε of one point drops "
            f"to {e['subsampling']}.",
            f"**Composition** over T = {T:,} points costs privacy, but far less than adding them up: "
            f"{e['composition']}, against T × {e['subsampling']} = {naive} for basic composition (which also needs "
            f"T·δ) and {e['no amplification']} if every point held your record.",
        ]


def mixing_effects(
    *,
    n: int,
    m: int,
    T: int,
    sigma_x: float,
    sigma_y: float,
    delta: float,
    model: str = "poisson",
    clip_x: float = 1.0,
    clip_y: float = 1.0,
    dx: int = 784,
    dy: int = 10,
) -> MixingEffects:
    """The lesson's stages for mixing m records (expected, for Poisson) out of n into T points.

    ``clip_x`` / ``clip_y`` bound the records of the clipped models (:data:`CLIPPED_MODELS`); ``dx`` / ``dy`` are the
    feature and label dimensions of the without-replacement model (its data in [0,1]^dx x [0,1]^dy). ValueError: bad
    input.
    """
    if model not in EFFECT_MODELS:
        raise ValueError(f"model must be one of {', '.join(EFFECT_MODELS)}. Found {model!r}.")
    if isinstance(m, int) and isinstance(n, int) and m > n:
        raise ValueError(f"m = {m:,} records averaged per point cannot exceed the n = {n:,} records there are.")
    if model == "poisson":
        clips = {"clip_x": clip_x, "clip_y": clip_y}
        release = MixingRelease.poisson(n=n, m=m, T=T, sigma_x=sigma_x, sigma_y=sigma_y, **clips)
        alone = MixingRelease.poisson(n=n, m=1, T=T, sigma_x=sigma_x, sigma_y=sigma_y, **clips)
    else:
        clip = (clip_x, clip_y) if model == "without-replacement-clipped" else None
        release = MixingRelease.dpmix(n=n, l=m, T=T, sigma_x=sigma_x, sigma_y=sigma_y, dx=dx, dy=dy, clip=clip)
        alone = MixingRelease.dpmix(n=n, l=1, T=T, sigma_x=sigma_x, sigma_y=sigma_y, dx=dx, dy=dy, clip=clip)
    z, z_alone, q = release.noise_multiplier(), alone.noise_multiplier(), release.sampling_rate
    accountant = EFFECT_MODELS[model][0]
    acc = get_accountant(accountant)
    plan = (
        (
            "no averaging",
            f"one point that surely holds your record, not averaged (m = 1): z = {z_alone:.3g}",
            z_alone,
            1.0,
            1,
        ),
        (
            "averaging",
            f"the same point averaged over m = {m} records: one record moves it {m}× less, z = {z:.3g}",
            z,
            1.0,
            1,
        ),
        ("subsampling", f"your record joins that point only with probability q = m/n = {q:.3g}", z, q, 1),
        ("composition", f"T = {T:,} such points: the release", z, q, T),
        ("no amplification", f"T = {T:,} points that all surely hold your record (q = 1), for contrast", z, 1.0, T),
    )
    stages = []
    for name, what, stage_z, stage_q, steps in plan:
        event = _event(release.sampling, steps, stage_z, sampled=stage_q < 1.0, n=n, m=m, q=q, name=name)
        result = acc.epsilon(event, delta)
        stages.append(
            EffectStage(
                name=name,
                what=what,
                z=stage_z,
                q=stage_q,
                steps=steps,
                epsilon=float(result.epsilon),
                guarantee=result.guarantee,
                reason=result.reason,
                is_release=name == "composition",
            )
        )
    return MixingEffects(release=release, delta=delta, accountant=accountant, stages=_one_point_bound(stages))


def _event(
    sampling: Sampling, steps: int, z: float, *, sampled: bool, n: int, m: int, q: float, name: str
) -> SampledGaussianSteps:
    """``steps`` Gaussian steps with noise multiplier z, each holding the record with the release's rate (sampled)
    or surely: Poisson at q (or 1), or m distinct records of n (or 1 of 1)."""
    mechanism = f"lesson: {name}"
    if sampling is Sampling.POISSON:
        return SampledGaussianSteps(sampling, steps, z, q=q if sampled else 1.0, mechanism=mechanism)
    return SampledGaussianSteps(sampling, steps, z, n=n if sampled else 1, l=m if sampled else 1, mechanism=mechanism)


def _one_point_bound(stages: list[EffectStage]) -> tuple[EffectStage, ...]:
    """The subsampled point's bound, tightened by two facts that need no accountant: it is part of the T-point
    release (dropping points is post-processing), and subsampling never costs privacy (it is the averaged point,
    used only with probability q). Where the noise is tiny the accountants' one-step bounds are looser than
    either (the PLD grid overflows; RDP is loose), and a lesson must not show subsampling or composition
    *adding* privacy."""
    by_name = {s.name: s for s in stages}
    point = by_name["subsampling"]
    for other, why in (
        ("averaging", "subsampling never costs privacy: the bound of the averaged point applies"),
        ("composition", "one point is part of the T-point release: its bound applies"),
    ):
        if by_name[other].epsilon < point.epsilon:
            point = replace(point, epsilon=by_name[other].epsilon, reason=why)
    return tuple(point if s.name == "subsampling" else s for s in stages)


def _label(eps: float) -> str:
    return f"ε = {format_epsilon(eps)}"


def mixing_effects_figure(effects: MixingEffects) -> go.Figure:
    """Horizontal bars of epsilon per stage on a log axis; the release's bar in red, the contrast grey.
    Infinite or enormous epsilons are drawn at the axis end and labelled as such."""
    stages = effects.stages
    finite = [s.epsilon for s in stages if 0 < s.epsilon <= ENORMOUS_EPSILON]
    top = max(finite, default=1.0) * 30
    low = min(finite, default=1.0) / 3
    lengths = [min(s.epsilon, top) if s.epsilon > 0 else low for s in stages]
    colors = ["#d62728" if s.is_release else ("#aaaaaa" if s.name == "no amplification" else "#1f77b4") for s in stages]
    fig = go.Figure(
        go.Bar(
            x=lengths,
            y=[
                f"{i}. {s.name}" if s.name != "no amplification" else "contrast: no amplification"
                for i, s in enumerate(stages, 1)
            ],
            orientation="h",
            marker={"color": colors},
            text=[_label(s.epsilon) for s in stages],
            textposition="outside",
            textfont={"size": 15},
            hovertext=[s.what for s in stages],
        )
    )
    fig.update_layout(
        xaxis={
            "type": "log",
            "title": f"ε at δ = {effects.delta:g} ({effects.accountant}, log scale)",
            "range": [math.log10(low), math.log10(top * 10)],
        },
        yaxis={"autorange": "reversed", "title": "release (same noise)"},
        showlegend=False,
    )
    return _layout(fig, "Where the privacy of a mixing release comes from", 420)
