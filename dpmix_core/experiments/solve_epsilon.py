"""What epsilon do I need for X % accuracy? Read off a stored sweep's accuracy-vs-epsilon curve (issue #13 §5).

Per series, the sweep's points (epsilon, mean test accuracy, std over seeds) are sorted by epsilon and the
curve is inverted by piecewise-linear interpolation in log epsilon (monotone between neighbouring points).
The error bars give a range: the upper band (mean + std) reaches X first (the optimistic end), the lower
band (mean - std) last (the conservative end). The answer says so in words, or that X is not reached
within the sweep's epsilon range, or that the curve is not monotone where it crosses X (then no single
epsilon can be read off).

Which epsilon: the axis value when the sweep's axis is the target epsilon (what a calibrated release was
asked for), else each point's certified epsilon (the smallest rigorous upper bound its runs recorded:
``results.certified_epsilon``), or one accountant's epsilon column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dpmix_core.experiments.results import all_collapsed

__all__ = [
    "EpsilonAnswer",
    "CERTIFIED",
    "REACHED",
    "NOT_REACHED",
    "ALREADY_REACHED",
    "NOT_MONOTONE",
    "CurvePoint",
    "SAME_EPSILON_RTOL",
    "curve_points",
    "epsilon_choices",
    "solvable_series",
    "solve_epsilon",
    "invert_curve",
    "sweep_epsilon_answers",
]

REACHED = "reached"
NOT_REACHED = "not reached"
ALREADY_REACHED = "already reached"  # at the sweep's smallest epsilon
NOT_MONOTONE = "not monotone"
AXIS_EPSILON = "target_epsilon"  # the sweep axis whose values are epsilons
CERTIFIED = "certified"  # each point's smallest rigorous upper bound (the aggregate's certified_epsilon column)
SAME_EPSILON_RTOL = 1e-3  # epsilons this close (relative) are one point of a curve: a calibration's tolerance
# rigorous accountants first (gdp-clt is an approximation: offered, never the default)
_PREFERRED = ("pld-poisson", "rdp-wor", "rdp-poisson", "lee2019", "dpcda", "analytic-gaussian", "laplace")


@dataclass(frozen=True)
class CurvePoint:
    """One point of a series' curve: epsilon, mean accuracy over seeds and its std (0 with one seed)."""

    epsilon: float
    mean: float
    std: float

    def __post_init__(self) -> None:
        for name in ("epsilon", "mean", "std"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"a curve point needs a finite {name}. Found {getattr(self, name)!r}.")
        if self.epsilon <= 0 or self.std < 0:
            raise ValueError(f"a curve point needs epsilon > 0 and std >= 0. Found {self.epsilon}, {self.std}.")


@dataclass(frozen=True)
class EpsilonAnswer:
    """The epsilon a series needs for ``accuracy`` (a fraction), read off its stored curve.

    ``status``: REACHED (``epsilon`` on the mean curve), ALREADY_REACHED (at the smallest epsilon swept),
    NOT_REACHED (the mean stays below within the sweep), NOT_MONOTONE (the mean crosses the level going
    down as well as up). ``epsilon_low``/``epsilon_high``: where the upper / lower error band reaches the
    level (None: not within the sweep). ``seeds``: the fewest seeds behind a point (1: no error bar).
    ``collapsed_runs``: runs of the curve's points that collapsed and are left out of their means (the curve
    then reads what a run that learns reaches, and the sentence says so).
    """

    series: str
    accuracy: float
    epsilon_name: str  # "target epsilon", "certified" or an accountant's name
    status: str
    epsilon: float | None
    epsilon_low: float | None
    epsilon_high: float | None
    epsilon_range: tuple[float, float]
    best_accuracy: float
    seeds: int
    collapsed_runs: int = 0

    def __post_init__(self) -> None:
        if self.status not in (REACHED, NOT_REACHED, ALREADY_REACHED, NOT_MONOTONE):
            raise ValueError(f"unknown status {self.status!r}.")
        if self.collapsed_runs < 0:
            raise ValueError(f"collapsed_runs must be >= 0. Found {self.collapsed_runs!r}.")
        if not 0 < self.accuracy <= 1:
            raise ValueError(f"accuracy must be a fraction in (0, 1]. Found {self.accuracy!r}.")

    def sentence(self) -> str:
        """The answer in words (what the page and the CLI print)."""
        note = (
            f" {self.collapsed_runs} run(s) of these points collapsed (the model never learned) and are left out "
            "of their means: the curve is what a run that learns reaches."
            if self.collapsed_runs
            else ""
        )
        return self._answer() + note

    def _answer(self) -> str:
        level = f"{100 * self.accuracy:g} % test accuracy"
        lo, hi = self.epsilon_range
        where = {"target epsilon": "target ε", CERTIFIED: "certified ε: each point's smallest rigorous bound"}.get(
            self.epsilon_name, f"ε from {self.epsilon_name}"
        )
        bars = " Only one seed per point: no error bar, so no range." if self.seeds < 2 else self._range_words(lo, hi)
        if self.status == NOT_MONOTONE:
            return (
                f"“{self.series}”: the curve is not monotone where it crosses {level} (accuracy falls as well as "
                f"rises with ε there), so no single ε can be read off; more seeds or ε values would settle it."
            )
        if self.status == NOT_REACHED:
            return (
                f"“{self.series}”: {level} is not reached within the sweep's ε range ({lo:.3g} to {hi:.3g}; "
                f"best {100 * self.best_accuracy:.1f} %).{bars if self.epsilon_low is not None else ''}"
            )
        if self.status == ALREADY_REACHED:
            return (
                f"“{self.series}”: {level} is already reached at the smallest ε of the sweep ({lo:.3g}, {where}); "
                "a smaller ε may do, but the sweep does not show it."
            )
        return f"“{self.series}” needs ε ≈ {self.epsilon:.3g} for {level} ({where}).{bars}"

    def _range_words(self, lo: float, hi: float) -> str:
        low = f"{self.epsilon_low:.3g}" if self.epsilon_low is not None else f"below {lo:.3g}"
        high = f"{self.epsilon_high:.3g}" if self.epsilon_high is not None else f"above {hi:.3g} (beyond the sweep)"
        return f" Given the spread over seeds (±1 std): between {low} and {high}."

    def to_dict(self) -> dict:
        return {
            "series": self.series,
            "accuracy": self.accuracy,
            "epsilon_name": self.epsilon_name,
            "status": self.status,
            "epsilon": self.epsilon,
            "epsilon_low": self.epsilon_low,
            "epsilon_high": self.epsilon_high,
            "epsilon_range": list(self.epsilon_range),
            "best_accuracy": self.best_accuracy,
            "seeds": self.seeds,
            "collapsed_runs": self.collapsed_runs,
            "answer": self.sentence(),
        }


def epsilon_choices(agg: pd.DataFrame, axis: str | None) -> list[str]:
    """The epsilons a curve can be read against: "target epsilon" on a target-epsilon axis, then "certified" where
    a point has a certified epsilon, then every accountant column of the sweep (rigorous ones first; not a
    non-private run's "none")."""
    names = [c.removeprefix("epsilon_") for c in agg.columns if c.startswith("epsilon_") and c != "epsilon_none"]
    ordered = [n for n in _PREFERRED if n in names] + sorted(n for n in names if n not in _PREFERRED)
    certified = "certified_epsilon" in agg.columns and bool(
        pd.to_numeric(agg["certified_epsilon"], errors="coerce").map(math.isfinite).any()
    )
    return (["target epsilon"] if axis == AXIS_EPSILON else []) + ([CERTIFIED] if certified else []) + ordered


def _epsilon_values(agg: pd.DataFrame, axis: str | None, epsilon_name: str) -> pd.Series:
    if epsilon_name == "target epsilon":
        if axis != AXIS_EPSILON:
            raise ValueError("this sweep's axis is not the target ε: choose an accountant's ε instead.")
        return pd.to_numeric(agg["axis_value"], errors="coerce")
    column = "certified_epsilon" if epsilon_name == CERTIFIED else f"epsilon_{epsilon_name}"
    if column not in agg.columns:
        raise ValueError(
            f"this sweep has no ε from {epsilon_name!r}; choose one of: {', '.join(epsilon_choices(agg, axis))}."
        )
    return pd.to_numeric(agg[column], errors="coerce")


def _curve_rows(agg: pd.DataFrame, axis: str | None, series: str, epsilon_name: str) -> pd.DataFrame:
    """The aggregate's rows behind one series' curve (``_eps`` added): points whose every run collapsed and
    points without a finite, positive epsilon left out."""
    if series not in set(agg["label"]):
        raise ValueError(f"no series {series!r} in this sweep; choose one of: {', '.join(sorted(set(agg['label'])))}.")
    eps = _epsilon_values(agg, axis, epsilon_name)
    rows = agg.assign(_eps=eps)[agg["label"] == series]
    rows = rows[~all_collapsed(rows)]  # all seeds collapsed: no result
    return rows[rows["_eps"].map(lambda v: math.isfinite(v) and v > 0) & rows["test_accuracy_mean"].notna()]


def curve_points(agg: pd.DataFrame, axis: str | None, series: str, epsilon_name: str) -> tuple[list[CurvePoint], int]:
    """(points sorted by epsilon, fewest seeds behind a point) of one series; collapsed and unbounded points
    left out, points at the same epsilon averaged. "The same" within SAME_EPSILON_RTOL: releases calibrated to
    one target (a sweep along ℓ at eps = 1) land within the calibration's tolerance of it, not on it, and are one
    point (at the largest of their epsilons, the safe reading of a bound), not a curve."""
    rows = _curve_rows(agg, axis, series, epsilon_name)
    if rows.empty:
        return [], 0
    std = rows["test_accuracy_std"].fillna(0.0).astype(float)
    rows = rows.assign(_std=std).sort_values("_eps")
    eps = rows["_eps"].astype(float).tolist()
    groups = [0]
    for before, e in zip(eps, eps[1:], strict=False):
        groups.append(groups[-1] + (e > before * (1 + SAME_EPSILON_RTOL)))
    rows = rows.assign(_group=groups)
    grouped = rows.groupby("_group", sort=True).agg(
        eps=("_eps", "max"),
        mean=("test_accuracy_mean", "mean"),
        std=("_std", "max"),
        seeds=("test_accuracy_count", "min"),
    )
    grouped = grouped.set_index("eps")
    points = [CurvePoint(float(e), float(r["mean"]), float(r["std"])) for e, r in grouped.iterrows()]
    return points, int(grouped["seeds"].min())


def solvable_series(agg: pd.DataFrame, axis: str | None, epsilon_name: str) -> list[str]:
    """Series with at least two points at different finite epsilons (baselines without privacy are not)."""
    if agg.empty:
        return []
    try:
        return [s for s in sorted(set(agg["label"])) if len(curve_points(agg, axis, s, epsilon_name)[0]) >= 2]
    except ValueError:
        return []


def _crossing(e0: float, v0: float, e1: float, v1: float, level: float) -> float:
    """The epsilon between e0 and e1 where the line through (log e0, v0), (log e1, v1) takes ``level``."""
    if v1 == v0:
        return e0
    t = (level - v0) / (v1 - v0)
    return math.exp(math.log(e0) + t * (math.log(e1) - math.log(e0)))


def invert_curve(eps: list[float], values: list[float], level: float) -> tuple[float | None, bool]:
    """(first epsilon where the interpolated curve reaches ``level``, whether it stays >= level after it).

    None when it never reaches it; the first epsilon itself when the curve starts at or above it.
    """
    if len(eps) != len(values) or not eps:
        raise ValueError("a curve needs as many values as epsilons, and at least one point.")
    first = None
    for i, v in enumerate(values):
        if v >= level:
            first = eps[0] if i == 0 else _crossing(eps[i - 1], values[i - 1], eps[i], v, level)
            stays = all(w >= level for w in values[i:])
            return first, stays
    return None, False


def _last_reach(eps: list[float], values: list[float], level: float) -> float | None:
    """The epsilon after which the curve stays >= level (None if it ends below): the conservative reading."""
    if values[-1] < level:
        return None
    i = len(values) - 1
    while i > 0 and values[i - 1] >= level:
        i -= 1
    return eps[0] if i == 0 else _crossing(eps[i - 1], values[i - 1], eps[i], values[i], level)


def solve_epsilon(
    agg: pd.DataFrame, *, axis: str | None, series: str, accuracy: float, epsilon_name: str | None = None
) -> EpsilonAnswer:
    """The epsilon ``series`` needs for ``accuracy`` (a fraction), from an aggregated sweep (``sweep_results``).

    Args:
        agg: one row per (series, axis value) with test_accuracy_mean / _std / _count and epsilon_* columns.
        axis: the sweep's axis.
        epsilon_name: "target epsilon", "certified" or an accountant; default the first of :func:`epsilon_choices`.

    Returns:
        An :class:`EpsilonAnswer`; ValueError (one line) for an unknown series or epsilon, or fewer than two points.
    """
    if not (isinstance(accuracy, (int, float)) and 0 < accuracy <= 1):
        raise ValueError(f"accuracy must be a fraction in (0, 1] (90 % is 0.9). Found {accuracy!r}.")
    choices = epsilon_choices(agg, axis)
    if epsilon_name is None:
        if not choices:
            raise ValueError("this sweep recorded no ε to read the curve against.")
        epsilon_name = choices[0]
    points, seeds = curve_points(agg, axis, series, epsilon_name)
    if len(points) < 2:
        raise ValueError(f"series {series!r} has fewer than two points with a finite ε: no curve to read.")
    eps = [p.epsilon for p in points]
    mean = [p.mean for p in points]
    upper = [p.mean + p.std for p in points]
    lower = [p.mean - p.std for p in points]
    at, stays = invert_curve(eps, mean, accuracy)
    low, _ = invert_curve(eps, upper, accuracy)
    high = _last_reach(eps, lower, accuracy)
    if at is None:
        status = NOT_REACHED
    elif not stays:
        status = NOT_MONOTONE
    elif mean[0] >= accuracy:
        status = ALREADY_REACHED
    else:
        status = REACHED
    return EpsilonAnswer(
        series=series,
        accuracy=float(accuracy),
        epsilon_name=epsilon_name,
        status=status,
        epsilon=at if status == REACHED else None,
        epsilon_low=low,
        epsilon_high=high,
        epsilon_range=(eps[0], eps[-1]),
        best_accuracy=max(mean),
        seeds=seeds,
        collapsed_runs=_collapsed_runs(_curve_rows(agg, axis, series, epsilon_name)),
    )


def _collapsed_runs(rows: pd.DataFrame) -> int:
    """Collapsed runs behind a curve's points (each of those points has a run that learned)."""
    return int(rows["collapsed"].fillna(0).sum()) if "collapsed" in rows else 0


def sweep_epsilon_answers(
    store,
    sweep: int | str,
    *,
    accuracy: float,
    series: str | None = None,
    epsilon_name: str | None = None,
    test_rows: str | None = None,
    test_inputs: str | None = None,
) -> list[EpsilonAnswer]:
    """:func:`solve_epsilon` for one series (or every series with a curve) of a sweep in a results store.

    Args:
        store: a :class:`~dpmix_core.runtime.store.ResultStore`.
        sweep: its id or name.
        test_rows: the test rows the accuracy is read on ("all", "even", "odd"; None: the sweep spec's).
        test_inputs: the test loader the trained models are read through (``TEST_INPUTS``; None: each run's own).

    Returns:
        One answer per series; ValueError (one line) when the sweep is unknown or has no curve.
    """
    from dpmix_core.experiments.trade_offs import sweep_results  # lazy: plotly

    agg, axis, _ = sweep_results(store, sweep, test_rows=test_rows, test_inputs=test_inputs)
    if agg.empty:
        raise ValueError(f"sweep {sweep!r} has no finished runs yet.")
    choices = epsilon_choices(agg, axis)
    name = epsilon_name or (choices[0] if choices else None)
    if name is None:
        raise ValueError(f"sweep {sweep!r} recorded no ε to read its curves against.")
    if name not in choices:
        raise ValueError(f"sweep {sweep!r} has no ε from {name!r}; choose one of: {', '.join(choices)}.")
    names = [series] if series is not None else solvable_series(agg, axis, name)
    if not names:
        if bool(all_collapsed(agg).all()):  # the points are there, but none learned: say so, not "no curve"
            raise ValueError(
                f"every run of sweep {sweep!r} collapsed (the model never learned): there is no accuracy to read an "
                "ε off; the sweep report names each run and its likely cause."
            )
        raise ValueError(f"no series of sweep {sweep!r} has two points at different finite ε.")
    return [solve_epsilon(agg, axis=axis, series=s, accuracy=accuracy, epsilon_name=name) for s in names]
