"""A sweep's points at their certified ε: accuracy against the bound, not against the knob the sweep turned.

A sweep is drawn against its own axis: σ, ℓ, T, or the target ε each series was calibrated to with its own
accountant. Series calibrated by different accountants then sit side by side at ε values that do not mean the same
thing (DPFMix's Poisson series at a CLT ε, an approximation that understates the PLD bound of the same release;
its uniform series at an RDP bound), and a σ or ℓ sweep shows no ε at all. Read on the certified axis, every
private point moves to the smallest rigorous upper bound its runs recorded for their own release
(:func:`~dpmix_core.experiments.results.certified_epsilon`, the ``certified_epsilon`` column of
:func:`~dpmix_core.experiments.results.aggregate`)::

    aggregate (axis: the sweep's) --on_certified_epsilon--> CertifiedPoints
        agg: axis "certified_epsilon", axis_value = the point's certified ε (None for a run without privacy,
             ∞ for one whose every ε is infinite: both drawn as flat reference lines)
        left_out: the private points with no certified ε, each with why (an approximation only, or a release no
             accountant covers)

Several sweeps share that axis (:func:`overlaid`): their points are comparable there whatever each sweep turned,
each series named after its sweep. Nothing is recomputed: the bounds are the runs' stored ones. A point keeps its
accuracy, error bar and collapse count; only its x moves. Label-only and projection-only bounds protect less than a
release's (their series and guarantee say so); they are placed at their own ε like the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from dpmix_core.experiments.results import format_axis_value

__all__ = ["CERTIFIED_AXIS", "CertifiedPoints", "on_certified_epsilon", "overlaid"]

CERTIFIED_AXIS = "certified_epsilon"  # the axis name of the points' certified epsilons (trade_offs.AXIS_TITLES)


@dataclass(frozen=True)
class CertifiedPoints:
    """:func:`on_certified_epsilon`'s points (``agg``) and the private points it could not place (``left_out``:
    one phrase each, "series (axis = value): why")."""

    agg: pd.DataFrame
    left_out: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.agg) and set(self.agg["axis"].dropna()) - {CERTIFIED_AXIS}:
            raise ValueError(f"certified points are on the {CERTIFIED_AXIS!r} axis only.")

    def sentence(self, limit: int = 4) -> str:
        """ "" when every private point was placed; else one sentence naming the first ``limit`` left out."""
        if not self.left_out:
            return ""
        shown = "; ".join(self.left_out[:limit])
        more = f"; and {len(self.left_out) - limit} more" if len(self.left_out) > limit else ""
        return f"{len(self.left_out)} point(s) have no certified ε and are not drawn on this axis: {shown}{more}."


def on_certified_epsilon(agg: pd.DataFrame) -> CertifiedPoints:
    """``agg`` (an :func:`~dpmix_core.experiments.results.aggregate`) with each point's x moved to its certified ε.

    A point whose runs have no privacy (guarantee "none") keeps no axis value and one whose every ε is infinite
    (no noise) the value ∞, so a figure draws either as a flat reference line; a private point without a certified
    ε is left out and named in ``left_out`` with the reason.
    ValueError: an aggregate without the ``certified_epsilon`` column (one made before it was recorded).
    """
    if "certified_epsilon" not in agg.columns:
        raise ValueError("this aggregate has no certified_epsilon column: aggregate the runs again.")
    keep: list[tuple[object, float | None]] = []
    left_out: list[str] = []
    for index, row in agg.iterrows():
        certified = row["certified_epsilon"]
        if str(row.get("guarantee", "")) == "none":
            keep.append((index, None))
        elif isinstance(certified, (int, float)) and math.isfinite(certified):
            keep.append((index, float(certified)))
        elif _unbounded(row):  # no noise (e.g. DP-PCA at eps = inf): a reference line at "certified eps = inf"
            keep.append((index, math.inf))
        else:
            left_out.append(f"{row['label']}{_where(row)}: {_why(row)}")
    placed = agg.loc[[index for index, _ in keep]].copy()
    placed["axis_value"] = pd.Series([value for _, value in keep], index=placed.index, dtype=object)
    placed["axis"] = CERTIFIED_AXIS
    return CertifiedPoints(placed.reset_index(drop=True), tuple(left_out))


def _where(row: pd.Series) -> str:
    axis, value = row.get("axis"), row.get("axis_value")
    if not isinstance(axis, str) or not axis or value is None or pd.isna(value):
        return ""
    return f" ({axis} = {format_axis_value(float(value))})"


def _unbounded(row: pd.Series) -> bool:
    """Whether every ε the point recorded is infinite (no noise: the sweep's ε = ∞ end)."""
    bounds = [
        float(v)
        for column, v in row.items()
        if str(column).startswith("epsilon_") and isinstance(v, (int, float)) and not pd.isna(v)
    ]
    return bool(bounds) and all(math.isinf(v) for v in bounds)


def _why(row: pd.Series) -> str:
    if str(row.get("guarantee", "")).startswith("not covered"):
        return "no accountant covers its release"
    return "no rigorous bound recorded (only an approximation, e.g. gdp-clt)"


def overlaid(aggs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Several sweeps' aggregates as one, each series named "sweep: series" (two sweeps' "mixing" stay apart), to be
    read on the certified axis (:func:`on_certified_epsilon`): the only axis their points share. ValueError: none."""
    if not aggs:
        raise ValueError("no sweep to overlay.")
    parts = [agg.assign(label=[f"{name}: {label}" for label in agg["label"]]) for name, agg in aggs.items()]
    return pd.concat([part for part in parts if len(part)] or parts[:1], ignore_index=True)
