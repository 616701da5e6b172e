"""Which ℓ (or T) is best? The axis value of each series chosen without tuning on the images it is scored on.

A paper that reports "the best m per cell" (DPFMix Table 1) or a peak ℓ* (DP-CDA) picks the value on the test set
and reports its accuracy on the same images: an optimistic number. Here a stored sweep's runs, which record
their accuracy on the even and the odd rows of the test split separately (``test_accuracy_halves``), are read
the honest way (as docs/REPRODUCTION.md does for DPFMix Table 1):

    per series:  mean accuracy over seeds on the EVEN rows, at each axis value
                 -> the value with the highest mean is chosen (a tie: the smaller value)
                 -> its mean (± std over seeds) on the ODD rows is reported

Collapsed runs are no result (issue #13 §3): they are left out of a value's mean, and a value whose runs all
collapsed is never chosen; a series whose every value collapsed says so. Beside the honest pick stands the
value a test-set search would report (the highest mean on every row), so the optimism of the paper's way is
visible, and the chosen release's privacy: the smallest rigorous upper bound its runs' privacy cards record.

Only axes a data holder tunes at a fixed budget are read this way (:data:`TUNABLE_AXES`: ℓ, T); picking the
"best" noise or ε would only pick the least private release.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd

from dpmix_core.experiments.results import (
    accuracy_on_rows,
    aggregate,
    all_collapsed,
    certified_epsilon,
    reading,
    row_config,
)
from dpmix_core.experiments.spec import TUNABLE_AXES, PublishedBest, axis_value
from dpmix_core.privacy.statement import bound_text

__all__ = ["TUNABLE_AXES", "AxisPick", "best_axis_caption", "best_axis_notes", "best_axis_values"]


@dataclass(frozen=True)
class AxisPick:
    """One series' choice of axis value: ``chosen`` on the even test rows, ``accuracy`` (± ``std``, over ``runs``
    seeds that learned) on the odd rows; None throughout when every value's runs collapsed. ``tuned``/
    ``tuned_accuracy``: the value with the best mean on every test row and that mean (what a search on the test
    set reports). ``epsilon``/``accountant``: the chosen release's smallest rigorous upper bound (None when its
    runs recorded none). ``published``: the paper's number for this series' best value (:class:`PublishedBest`).
    ``epsilon_span``: (smallest, largest) certified epsilon over the series' values when they differ by more than
    1 % (a series at a fixed sigma, or calibrated by the CLT approximation, whose error depends on m): the best
    value is then also another privacy level.
    """

    series: str
    axis: str
    values_compared: int
    chosen: float | None = None
    accuracy: float | None = None
    std: float | None = None
    runs: int = 0
    tuned: float | None = None
    tuned_accuracy: float | None = None
    epsilon: float | None = None
    accountant: str | None = None
    published: PublishedBest | None = None
    epsilon_span: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.axis not in TUNABLE_AXES:
            raise ValueError(f"the best value is read along {' or '.join(TUNABLE_AXES)} only. Found {self.axis!r}.")
        if self.values_compared < 2:
            raise ValueError(f"a choice needs at least two axis values. Found {self.values_compared}.")
        if (self.chosen is None) != (self.accuracy is None) or (self.chosen is not None and self.runs < 1):
            raise ValueError("a chosen value needs its accuracy and at least one run.")
        for name in ("accuracy", "std", "tuned_accuracy"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
                raise ValueError(f"{name} must be a fraction in [0, 1]. Found {value!r}.")

    @property
    def collapsed(self) -> bool:
        """Every run at every value collapsed: no value can be chosen."""
        return self.chosen is None

    @property
    def gap(self) -> float | None:
        """Ours minus the paper's, in points (None without both)."""
        if self.published is None or self.accuracy is None:
            return None
        return 100 * (self.accuracy - self.published.accuracy)

    def sentence(self, name: str) -> str:
        """The pick in words, the axis called ``name`` (e.g. "ℓ"; what ``sweep`` prints)."""
        if self.chosen is None or self.accuracy is None:
            return f"“{self.series}”: every {name} collapsed (no result)."
        seeds = f"{self.runs} seed{'s' if self.runs != 1 else ''}"
        spread = f" ± {100 * self.std:.2f}" if self.std is not None else ""
        text = (
            f"“{self.series}”: {name} = {self.chosen:g} chosen on the even test rows, {100 * self.accuracy:.2f}{spread} % "
            f"on the odd ({seeds}"
            + ("" if self.epsilon is None else f"; certified ε ≤ {bound_text(self.epsilon)}, {self.accountant}")
            + ")"
        )
        if self.published is not None and self.gap is not None:
            text += f"; the paper's best {100 * self.published.accuracy:.2f} % ({self.gap:+.2f} points)"
        return text + "."

    def to_dict(self) -> dict:
        """JSON-ready (``sweep --json``)."""
        return {
            "series": self.series,
            "axis": self.axis,
            "values_compared": self.values_compared,
            "chosen": self.chosen,
            "accuracy_odd_rows": self.accuracy,
            "std": self.std,
            "runs": self.runs,
            "best_on_all_rows": self.tuned,
            "its_accuracy_all_rows": self.tuned_accuracy,
            "certified_epsilon": self.epsilon,
            "accountant": self.accountant,
            "published": None if self.published is None else self.published.to_dict(),
            "gap_points": self.gap,
            "epsilon_span": None if self.epsilon_span is None else list(self.epsilon_span),
        }


def best_axis_caption(name: str) -> str:
    """How to read the table of picks along the axis called ``name`` (e.g. "ℓ"; the page and the sweep report
    print it beside the table)."""
    return (
        f"Per series, the {name} with the highest mean accuracy on the even rows of the test split is chosen and "
        "its accuracy reported on the odd rows, which the choice never saw. A search on the test set itself (what "
        f"'the best {name}' in a paper usually is) is the column 'best {name} on all rows': the distance between the "
        "two is its optimism. Collapsed runs are left out; a value whose runs all collapsed is never chosen. Each "
        f"{name} is its own release (at a target ε each is calibrated to it); the certified ε is the smallest "
        "rigorous upper bound on the chosen release's privacy card."
    )


def best_axis_notes(picks: tuple[AxisPick, ...], name: str) -> list[str]:
    """What to know about the series whose privacy is not fixed along the axis called ``name``: one sentence
    naming each such series and its certified ε range (empty when every series holds its ε)."""
    moving = [p for p in picks if p.epsilon_span is not None]
    if not moving:
        return []
    why = f"(a fixed noise, or a budget set by an approximation), so {{}} best {name} is also another privacy level"
    if len(moving) == 1:
        (p,) = moving
        lo, hi = p.epsilon_span or (0.0, 0.0)
        return [
            f"“{p.series}”: its certified ε runs from {lo:.3g} to {hi:.3g} across {name} {why.format('its')}; "
            "the chosen release's ε is in the table."
        ]
    spans = "; ".join(
        f"“{p.series}” {p.epsilon_span[0]:.3g} to {p.epsilon_span[1]:.3g}" for p in moving if p.epsilon_span
    )
    return [
        f"In {len(moving)} series the certified ε moves across {name} {why.format('their')}; the chosen release's ε "
        f"is in the table. The ranges: {spans}."
    ]


def _has_halves(row: dict, test_inputs: str | None) -> bool:
    """Whether a stored run has its accuracy on the even rows through ``test_inputs`` (and so on the odd ones)."""
    result = row.get("result")
    if not isinstance(result, dict):
        return False
    own = (row.get("config") or {}).get("test_inputs", "release")
    read = reading(result, test_inputs, own=own)
    return read is not None and accuracy_on_rows(read, "even") is not None


def _learned(agg: pd.DataFrame) -> pd.DataFrame:
    """The aggregate's points that have a result (not every run collapsed) and an axis value."""
    if agg.empty:
        return agg
    return agg[~all_collapsed(agg) & agg["axis_value"].notna()]


def _row(agg: pd.DataFrame, series: str, value: float) -> pd.Series | None:
    match = agg[(agg["label"] == series) & (agg["axis_value"] == value)]
    return match.iloc[0] if len(match) else None


def _certified_by_value(rows: list[dict], axis: str) -> dict[str, dict[float, tuple[float, str]]]:
    """Per series and axis value: the largest certified epsilon over its runs (its seeds share one release; the
    largest is the safe statement if they ever differ)."""
    found: dict[str, dict[float, tuple[float, str]]] = {}
    for row in rows:
        result = row.get("result")
        if not isinstance(result, dict) or (eps := certified_epsilon(result)) is None:
            continue
        cfg = row_config(row)
        if (value := axis_value(cfg, axis)) is not None:
            series = found.setdefault(cfg.label or cfg.method, {})
            series[float(value)] = max(series.get(float(value), eps), eps)
    return found


def best_axis_values(
    rows: list[dict],
    axis: str | None,
    *,
    test_inputs: str | None = None,
    published: tuple[PublishedBest, ...] = (),
) -> tuple[AxisPick, ...]:
    """Per series of a stored sweep's ``rows`` (``trade_offs.sweep_rows``) that runs at two or more values of
    ``axis``: the value chosen on the even test rows and its accuracy on the odd ones (module docstring), read
    through the test loader ``test_inputs`` (None: each run's own). Empty for an axis outside
    :data:`TUNABLE_AXES` or runs without per-half accuracies. Series in name order."""
    if axis not in TUNABLE_AXES:
        return ()
    # one order whatever the store's: floating-point means then do not depend on it (nor does a tie)
    rows = sorted(rows, key=lambda row: json.dumps(row.get("config"), sort_keys=True, default=str))
    even = aggregate(rows, axis, test_rows="even", test_inputs=test_inputs)
    if even.empty:
        return ()
    odd = aggregate(rows, axis, test_rows="odd", test_inputs=test_inputs)
    # the test-set search reads the same runs as the pick (a run stored before its halves were is in neither)
    halved = [r for r in rows if _has_halves(r, test_inputs)]
    every = aggregate(halved, axis, test_rows="all", test_inputs=test_inputs)
    by_series = {b.series: b for b in published}
    certified_by_series = _certified_by_value(rows, axis)
    picks = []
    for series, group in sorted(even.groupby("label"), key=lambda item: str(item[0])):
        compared = int(group["axis_value"].notna().sum())
        if compared < 2:  # a run the axis does not move (a baseline), or one value only: nothing to choose
            continue
        learned = _learned(group).sort_values("axis_value")
        pick = AxisPick(str(series), axis, compared, published=by_series.get(str(series)))
        if learned.empty:
            picks.append(pick)
            continue
        best = learned.loc[learned["test_accuracy_mean"].idxmax()]  # idxmax: the first (smallest value) on a tie
        chosen = float(best["axis_value"])
        at = _row(odd, str(series), chosen)
        if at is None:  # the even rows and the odd rows come from the same runs; never without the other
            continue
        tuned = _learned(every[every["label"] == series]).sort_values("axis_value")
        top = tuned.loc[tuned["test_accuracy_mean"].idxmax()] if len(tuned) else None
        certified = certified_by_series.get(str(series), {})
        eps = certified.get(chosen)
        bounds = [e for e, _ in certified.values()]
        span = (min(bounds), max(bounds)) if bounds and max(bounds) > 1.01 * min(bounds) else None
        std = float(at["test_accuracy_std"])
        picks.append(
            AxisPick(
                str(series),
                axis,
                compared,
                chosen=chosen,
                accuracy=float(at["test_accuracy_mean"]),
                std=None if math.isnan(std) else std,
                runs=int(at["test_accuracy_count"]),
                tuned=None if top is None else float(top["axis_value"]),
                tuned_accuracy=None if top is None else float(top["test_accuracy_mean"]),
                epsilon=None if eps is None else eps[0],
                accountant=None if eps is None else eps[1],
                published=by_series.get(str(series)),
                epsilon_span=span,
            )
        )
    return tuple(picks)
