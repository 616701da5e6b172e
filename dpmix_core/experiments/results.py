"""Aggregate finished runs for plots: mean ± std over seeds per series, method, mechanism and axis value."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpmix_core.data import TEST_ROWS
from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.spec import AXES, axis_value
from dpmix_core.privacy.accountant_names import RIGOROUS_ACCOUNTANTS
from dpmix_core.synthesis.pipeline import guarantee_label
from dpmix_core.training.names import TEST_INPUTS

__all__ = [
    "BASELINE_UPPER_BOUNDS",
    "aggregate",
    "certified_epsilon",
    "all_collapsed",
    "collapsed_note",
    "format_axis_value",
    "infer_axis",
    "no_signal_note",
    "partly_collapsed",
    "runs_per_point",
    "accuracy_on_rows",
    "reading",
    "GROUP_COLUMNS",
    "PROJECTION_ONLY",
]

GROUP_COLUMNS = ("label", "method", "mechanism", "axis_value")


def _eps_number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in ("inf", "+inf"):
        return math.inf
    return None  # "error: ..." or missing


# DP-PCA's baseline protocol privatises the projection only: the classifier is fitted non-privately on the
# projected private records (experiments.methods.DpPca), so its model is no private release of features and labels.
PROJECTION_ONLY = "projection only; the classifier is trained on the private records"


def reading(result: dict, test_inputs: str | None = None, *, own: str | None = None) -> dict | None:
    """A finished run's result as read through the test loader ``test_inputs`` (``TEST_INPUTS``; None: the run's
    own, ``own``, by default its config's): test_accuracy, test_accuracy_halves and collapsed taken from that
    loader's entry of the run's ``test_accuracy_by_inputs``. None when the run has no reading through it (a
    release with one loader, or a run stored before both were recorded)."""
    if test_inputs is not None and test_inputs not in TEST_INPUTS:
        raise ValueError(f"test_inputs must be one of {', '.join(TEST_INPUTS)}. Found {test_inputs!r}.")
    if own is None:
        own = (result.get("config") or {}).get("test_inputs", "release")
    if test_inputs is None or test_inputs == own:
        return result
    other = (result.get("test_accuracy_by_inputs") or {}).get(test_inputs)
    if not isinstance(other, dict):
        return None
    return {
        **result,
        "test_accuracy": other.get("accuracy"),
        "test_accuracy_halves": other.get("halves"),
        "collapsed": bool(other.get("collapsed")),
    }


def accuracy_on_rows(result: dict, test_rows: str = "all", test_inputs: str | None = None) -> float | None:
    """A finished run's test accuracy on every row of the test split, or on its even or odd rows (the run's
    ``test_accuracy_halves``: [even, odd]), through the test loader ``test_inputs`` (None: the run's own;
    :func:`reading`); None when the run has no such number (not finished, a regression task, or a run stored
    before the halves or that loader's reading were recorded)."""
    if test_rows not in TEST_ROWS:
        raise ValueError(f"test_rows must be one of {', '.join(TEST_ROWS)}. Found {test_rows!r}.")
    read = reading(result, test_inputs)
    if read is None:
        return None
    if test_rows == "all":
        value = read.get("test_accuracy")
    else:
        halves = read.get("test_accuracy_halves")
        half = ("even", "odd").index(test_rows)
        value = halves[half] if isinstance(halves, (list, tuple)) and len(halves) == 2 else None
    return None if value is None else float(value)


# the epsilons runs report besides the mixing accountants' (DP-SGD's, DP-PCA's, label-only Laplace's; no privacy card
# states their guarantee), by whether each is a rigorous upper bound of what its method protects
# (views.sweep_report.EPSILON_READINGS says how each reads): Opacus' PRV accountant is one up to its numerical error
BASELINE_UPPER_BOUNDS: dict[str, bool] = {
    "analytic-gaussian": True,
    "laplace": True,
    "opacus-rdp": True,
    "opacus-prv": False,
    "pld-dp-accounting": True,
    "rdp-dp-accounting": True,
}


# cards made before 2026-12-02 named a Laplace or Gaussian release's guarantee by its class
_CARD_NAMES = {"LaplaceLabelRelease": "laplace", "LaplaceRelease": "laplace"}


def certified_epsilon(result: dict) -> tuple[float, str] | None:
    """(epsilon, accountant): the smallest finite epsilon among a finished run's rigorous upper bounds, or None.

    A run with a privacy card (a mixing release): the entries the card marks ``upper_bound``, for the release it
    describes (an approximation, or a release no accountant covers, has none). A run without one (DP-SGD, DP-PCA):
    its epsilons from rigorous accountants (:data:`RIGOROUS_ACCOUNTANTS`, :data:`BASELINE_UPPER_BOUNDS`). An
    infinite bound certifies nothing (no noise, or too little), nor does a non-private run's "none".
    """
    entries = (result.get("privacy_card") or {}).get("epsilons")
    if entries:
        named = [
            (_CARD_NAMES.get(str(e.get("accountant")), e.get("accountant")), e.get("epsilon"))
            for e in entries
            if isinstance(e, dict) and e.get("upper_bound")
        ]
    else:
        rigorous = RIGOROUS_ACCOUNTANTS | {name for name, bound in BASELINE_UPPER_BOUNDS.items() if bound}
        named = [(name, value) for name, value in (result.get("epsilon") or {}).items() if name in rigorous]
    found = [(v, str(name)) for name, value in named if (v := _eps_number(value)) is not None and math.isfinite(v)]
    return min(found) if found else None


def _guarantee(cfg: RunConfig) -> str:
    """How the run's epsilon reads: see synthesis.guarantee_label ("none" without privacy, "covered" for DP-SGD,
    PROJECTION_ONLY for DP-PCA)."""
    if cfg.method == "non-private":
        return "none"
    if cfg.method == "dp-pca":
        return PROJECTION_ONLY
    if cfg.synthesis is None:
        return "covered"
    return guarantee_label(cfg.synthesis)


def infer_axis(configs: list[RunConfig]) -> str | None:
    """The first axis (in AXES order) on which the runs take more than one value; None if none varies."""
    for axis in AXES:
        values = {axis_value(c, axis) for c in configs}
        values.discard(None)
        if len(values) > 1:
            return axis
    return None


def row_config(row: dict) -> RunConfig:
    """A finished-run row's :class:`RunConfig`: the one its reader parsed once (``row["run_config"]``, as
    ``trade_offs.read_stored_sweep`` leaves it), else parsed from ``row["config"]`` now. A page's views of one sweep
    aggregate its rows several times; parsing and validating each config every time was most of their cost."""
    parsed = row.get("run_config")
    return parsed if isinstance(parsed, RunConfig) else RunConfig.from_dict(row["config"])


def aggregate(
    rows: list[dict], axis: str | None = None, *, test_rows: str = "all", test_inputs: str | None = None
) -> pd.DataFrame:
    """One row per (label, method, mechanism, axis value) of finished runs.

    ``rows``: ``{"config": RunConfig.to_dict(), "result": run_job(...) output}``, optionally with the config
    already parsed (:func:`row_config`) (rows without a result or a test_accuracy are skipped). ``axis``: a sweep
    axis name; by default each row's ``"axis"`` key, else the axis along which
    the runs vary. ``label`` is the series name (RunConfig.label), so two
    series of one method (e.g. DP-CDA at eps = 20 and eps = 10) stay apart.
    ``test_rows``: the accuracy on every test row, or on the even or odd rows
    only (:func:`accuracy_on_rows`; runs without that number are skipped). ``test_inputs``: through which test
    loader (None: each run's own; another: the same trained model's reading through it, its collapse included,
    :func:`reading`; runs without that reading are skipped).

    Columns: label, method, mechanism, axis, axis_value, test_accuracy_mean /
    _std / _count, test_mse_mean / _std / _count, seconds_mean, one
    ``epsilon_<accountant>`` column per accountant seen (mean over the group;
    inf when any run is unbounded), delta and guarantee (how its epsilons
    read: "covered", "none", "features only; ...", "not covered: ..."). std
    is the sample standard deviation (NaN for a single run). ``certified_epsilon``: the largest over the group of
    each run's :func:`certified_epsilon` (its seeds share one release; the largest is the safe statement if they
    ever differ; NaN when no run has one), ``certified_by`` the accountants that gave it.

    ``collapsed``: how many of the group's runs never left the constant
    predictor (result["collapsed"]). They are left out of the mean whenever the
    group has a run that learned; a group whose runs all collapsed keeps their
    mean so that plots can show it, with a distinct marker, as collapsed.
    ``no_signal``: how many of the group's runs that learned kept an epoch that early stopping chose on a
    validation split at chance (result["selection_note"]): their accuracy is that of an arbitrary epoch (a
    collapsed run is no result either way, and is counted as collapsed).
    """
    finished = []
    for row in rows:
        result = row.get("result") if isinstance(row, dict) else None
        own = (row.get("config") or {}).get("test_inputs", "release")
        if not isinstance(result, dict) or (read := reading(result, test_inputs, own=own)) is None:
            continue
        if (accuracy := accuracy_on_rows(read, test_rows)) is None:
            continue
        finished.append((row_config(row), {**read, "test_accuracy": accuracy}, row.get("axis")))
    columns = [
        "label",
        "method",
        "mechanism",
        "axis",
        "axis_value",
        "test_accuracy_mean",
        "test_accuracy_std",
        "test_accuracy_count",
        "test_mse_mean",
        "test_mse_std",
        "test_mse_count",
        "seconds_mean",
        "delta",
        "guarantee",
        "collapsed",
        "runs",
        "no_signal",
        "certified_epsilon",
        "certified_by",
    ]
    if not finished:
        return pd.DataFrame(columns=columns)
    if axis is None:
        row_axes = {a for _, _, a in finished if a}
        axis = row_axes.pop() if len(row_axes) == 1 else infer_axis([c for c, _, _ in finished])
    records = []
    for cfg, result, _ in finished:
        rec = {
            "label": cfg.label or cfg.method,
            "method": cfg.method,
            "mechanism": cfg.mechanism or "",
            "axis_value": axis_value(cfg, axis) if axis else None,
            "test_accuracy": float(result["test_accuracy"]),
            "test_mse": None if result.get("test_mse") is None else float(result["test_mse"]),
            "seconds": result.get("seconds"),
            "delta": result.get("delta"),
            "guarantee": _guarantee(cfg),
            "collapsed": bool(result.get("collapsed")),
            "no_signal": bool(result.get("selection_note")) and not result.get("collapsed"),
            "certified": certified_epsilon(result),
        }
        for name, value in (result.get("epsilon") or {}).items():
            rec[f"epsilon_{name}"] = _eps_number(value)
        records.append(rec)
    eps_cols = sorted({c for rec in records for c in rec if c.startswith("epsilon_")})
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault(_group_key(rec), []).append(rec)
    out = []
    for key in sorted(groups, key=_group_order):  # as pandas' groupby(sort=True, dropna=False): no value last
        label, method, mechanism, value = key
        g = groups[key]
        n_collapsed, n_runs = sum(r["collapsed"] for r in g), len(g)
        n_blind = sum(r["no_signal"] for r in g)
        if n_collapsed < len(g):  # collapsed runs are no result: the mean is over the runs that learned
            g = [r for r in g if not r["collapsed"]]
        acc = [float(r["test_accuracy"]) for r in g]  # a NaN accuracy counts as a run, not in the mean
        mse = _numbers(r["test_mse"] for r in g)
        deltas = [r["delta"] for r in g if not _missing(r["delta"])]
        rec = {
            "label": label,
            "method": method,
            "mechanism": mechanism or None,
            "axis": axis,
            "axis_value": value,
            "test_accuracy_mean": _mean(_numbers(acc)),
            "test_accuracy_std": _std(_numbers(acc)),
            "test_accuracy_count": len(acc),
            "test_mse_mean": _mean(mse),
            "test_mse_std": _std(mse),
            "test_mse_count": len(mse),
            "seconds_mean": _mean(_numbers(r["seconds"] for r in g)),
            "delta": deltas[0] if deltas else None,
            "guarantee": "; ".join(sorted({r["guarantee"] for r in g})),
            "collapsed": n_collapsed,
            "runs": n_runs,
            "no_signal": n_blind,
            "certified_epsilon": max((c[0] for r in g if (c := r["certified"]) is not None), default=math.nan),
            "certified_by": "; ".join(sorted({c[1] for r in g if (c := r["certified"]) is not None})),
        }
        for col in eps_cols:  # inf when any run's is (the mean of an inf is inf), NaN when none has one
            rec[col] = _mean(_numbers(r.get(col) for r in g))
        out.append(rec)
    return pd.DataFrame.from_records(out, columns=columns + eps_cols)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _numbers(values) -> list[float]:
    """The values that are numbers, as floats (None, NaN and text left out: pandas' to_numeric(coerce) + dropna)."""
    out = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(x):
            out.append(x)
    return out


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _std(values: list[float]) -> float:
    """The sample standard deviation (ddof 1); NaN for fewer than two values."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def _group_key(rec: dict) -> tuple:
    """The record's (GROUP_COLUMNS) values; no axis value is None, so such records form one group."""
    label, method, mechanism, value = (rec[column] for column in GROUP_COLUMNS)
    return label, method, mechanism, None if _missing(value) else float(value)


def _group_order(key: tuple) -> tuple:
    label, method, mechanism, value = key
    return str(label), str(method), str(mechanism), value is None, 0.0 if value is None else value


def runs_per_point(agg: pd.DataFrame) -> pd.Series:
    """Finished runs behind each aggregated row, collapsed ones included (an aggregate from before the ``runs``
    column: the runs with an accuracy)."""
    return agg["runs"] if "runs" in agg.columns else agg["test_accuracy_count"]


def all_collapsed(agg: pd.DataFrame) -> pd.Series:
    """True for aggregated rows whose runs all collapsed (never plotted as a normal point)."""
    if "collapsed" not in agg.columns:
        return pd.Series(False, index=agg.index)
    return (agg["collapsed"].fillna(0) > 0) & (agg["collapsed"].fillna(0) >= runs_per_point(agg).fillna(0))


def partly_collapsed(agg: pd.DataFrame) -> pd.Series:
    """True for aggregated rows where some runs, not all, collapsed: their mean is over the runs that learned
    (:func:`aggregate`), so it must say how many were left out."""
    if "collapsed" not in agg.columns or "runs" not in agg.columns:
        return pd.Series(False, index=agg.index)
    collapsed, runs = agg["collapsed"].fillna(0), agg["runs"].fillna(0)
    return (collapsed > 0) & (collapsed < runs)


def collapsed_note(row: pd.Series) -> str:
    """For a partly collapsed row, "k of n runs collapsed, left out of the mean"; else ""."""
    if not bool(partly_collapsed(pd.DataFrame([row])).iloc[0]):
        return ""
    return f"{int(row['collapsed'])} of {int(row['runs'])} runs collapsed, left out of the mean"


def format_axis_value(value) -> str:
    """An axis value or epsilon as printed: 1e-05, 128, ∞, or — for none (a run the axis does not describe)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return "—"
    return "∞" if math.isinf(value) else f"{value:g}"


def no_signal_note(agg: pd.DataFrame, *, limit: int = 4) -> str:
    """One sentence naming the points with runs whose early stopping chose its epoch on a validation split at
    chance (``no_signal``), the first ``limit`` of them; "" when there are none (or an aggregate from before)."""
    if "no_signal" not in agg.columns:
        return ""
    hit = agg[agg["no_signal"].fillna(0) > 0]
    if hit.empty:
        return ""
    axis = next((a for a in agg.get("axis", pd.Series(dtype=object)) if isinstance(a, str) and a), None)

    def where(row: pd.Series) -> str:
        value = row["axis_value"]
        at = "" if axis is None or value is None or pd.isna(value) else f", {axis} = {format_axis_value(float(value))}"
        return f"{row['label']}{at}: {int(row['no_signal'])} of {int(row['runs'])} run(s)"

    points = "; ".join(where(row) for _, row in hit.head(limit).iterrows())
    more = f"; and {len(hit) - limit} more point(s)" if len(hit) > limit else ""
    return (
        f"At {len(hit)} point(s) early stopping chose the epoch on a validation split at chance ({points}{more}): "
        "the release's own labels gave it nothing to read, so those accuracies are of an arbitrary epoch (each "
        "run's notes say why)."
    )
