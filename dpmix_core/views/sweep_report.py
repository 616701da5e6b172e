"""One-file HTML report of a trade-off sweep, for a stakeholder deck or an e-mail.

What the Train & trade-offs page shows for a stored sweep, in one self-contained file (plotly.js inlined, opens
offline): what was run, a plain-language reading, the accuracy-versus-privacy figure, the paper's numbers next
to ours, every aggregated point with its ε columns and how to read each of them, the runs that did not learn,
and the library versions. Only finished runs count; the reading says how many are still pending or failed.
The page offers it as a download and ``python -m dpmix_core sweep-report`` writes it. No Streamlit.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd

from dpmix_core.experiments.best_axis import best_axis_caption, best_axis_notes
from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.quick_vs_full import QUICK_WITHIN_PTS
from dpmix_core.experiments.results import (
    all_collapsed,
    collapsed_note,
    format_axis_value,
    no_signal_note,
    partly_collapsed,
    runs_per_point,
)
from dpmix_core.experiments.spec import axis_value
from dpmix_core.experiments.sweep_view import overlay_aggregates, view_sweep
from dpmix_core.experiments.trade_offs import (
    AXIS_TITLES,
    REPRODUCED_WITHIN_PTS,
    TEST_INPUTS_TITLES,
    StoredSweep,
    axis_column,
    best_axis_table,
    read_stored_sweep,
)
from dpmix_core.privacy.accountants import ACCOUNTANTS, get_accountant
from dpmix_core.runtime.store import ResultStore
from dpmix_core.views.accuracy_figure import MARKERS_CAPTION, epsilon_columns, sweep_figure
from dpmix_core.views.html_report import Section, html_report

__all__ = ["EPSILON_READINGS", "epsilon_reading", "epsilon_readings", "sweep_reading", "sweep_report"]

REPORT_FIGURE_HEIGHT = 680  # px: a page-width figure whose legend (one line a series) wraps below the plot

# epsilons a run reports that are not mixing accountants (their runs carry no privacy card to read it from)
EPSILON_READINGS = {
    "analytic-gaussian": "DP-PCA's Analyze-Gauss noise under the analytic Gaussian mechanism (Balle & Wang 2018): "
    "a rigorous (ε, δ) bound for the projection",
    "laplace": "label-only Laplace: pure ε-DP for the labels; the features are not private",
    "opacus-rdp": "DP-SGD's steps (with its private feature ranges, on one's own file) under Opacus's RDP "
    "accountant: a rigorous upper bound",
    "opacus-prv": "DP-SGD's steps (with its private feature ranges, on one's own file) under Opacus's PRV "
    "accountant: an upper bound up to its numerical error",
    "pld-dp-accounting": "DP-SGD on one's own file: its private feature ranges and its steps composed, under "
    "dp_accounting's PLD accountant (pessimistic rounding): a rigorous upper bound",
    "rdp-dp-accounting": "DP-SGD on one's own file: its private feature ranges and its steps composed, under "
    "dp_accounting's RDP accountant: a rigorous upper bound",
}


def epsilon_readings(agg: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """How to read each ε column of ``agg``: the guarantee the runs' privacy cards state for it, else the
    accountant's own kind (rigorous or an approximation), else :data:`EPSILON_READINGS`."""
    stated: dict[str, set[str]] = {}
    for row in rows:
        card = (row.get("result") or {}).get("privacy_card") or {}
        for entry in card.get("epsilons") or []:
            if isinstance(entry, dict) and entry.get("accountant") and entry.get("guarantee"):
                stated.setdefault(str(entry["accountant"]), set()).add(str(entry["guarantee"]))
    out = []
    for column in epsilon_columns(agg):
        name = column.removeprefix("epsilon_")
        reading = "; ".join(sorted(stated[name])) if name in stated else epsilon_reading(name)
        out.append({"ε column": name, "how to read it": reading})
    return pd.DataFrame(out, columns=["ε column", "how to read it"])


def epsilon_reading(name: str) -> str:
    """How to read an epsilon named ``name`` that no privacy card states a guarantee for: the accountant's own kind
    (rigorous or an approximation), else :data:`EPSILON_READINGS` (DP-SGD's, DP-PCA's, label-only Laplace's)."""
    if name in ACCOUNTANTS:
        return "rigorous upper bound" if get_accountant(name).rigorous else "approximation (not an upper bound)"
    return EPSILON_READINGS.get(name, "see the runs' privacy cards")


def _point(row: pd.Series) -> str:
    spread = "" if pd.isna(row["test_accuracy_std"]) else f" ± {100 * row['test_accuracy_std']:.2f}"
    lost = collapsed_note(row)
    return (
        f"{row['label']}, {100 * row['test_accuracy_mean']:.2f} %{spread} ({int(row['test_accuracy_count'])} seed(s)"
        + (f"; {lost}" if lost else "")
        + ")"
    )


def sweep_reading(
    agg: pd.DataFrame, axis: str | None, statuses: Counter, comparison: pd.DataFrame | None, *, left_out: int = 0
) -> str:
    """The report's plain-language paragraph: what finished, the best private point, the non-private reference,
    collapsed points, runs not in the report (``left_out``: finished runs with no reading on the chosen test rows or
    test images), and how many published points were reproduced."""
    dead = all_collapsed(agg)
    axis_title = AXIS_TITLES.get(axis or "", axis or "the axis")
    runs = int(runs_per_point(agg).sum())
    seeds = int(agg["test_accuracy_count"].max())
    finite = agg["axis_value"].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v))
    values = sorted({float(v) for v in agg.loc[finite, "axis_value"]})
    parts = [
        f"{runs} finished run(s), up to {seeds} seed(s) a point, in {agg['label'].nunique()} series"
        + (f" over {axis_title} = {', '.join(format_axis_value(v) for v in values)}." if values else ".")
    ]
    learned = agg[~dead & agg["test_accuracy_mean"].notna()]
    private = learned[(learned["guarantee"] == "covered") & finite[learned.index]]
    best = [
        f"{format_axis_value(value)} → {_point(part.loc[part['test_accuracy_mean'].idxmax()])}"
        for value, part in private.groupby("axis_value", sort=True)
    ]
    if best:
        parts.append(f"Best private result (features and labels protected), by {axis_title}: " + "; ".join(best) + ".")
    reference = learned[learned["guarantee"] == "none"]
    if len(reference):
        parts.append(f"Non-private reference: {100 * reference['test_accuracy_mean'].max():.2f} %.")
    if dead.any():
        parts.append(
            f"{int(dead.sum())} point(s) where every run collapsed (the model never learned) are drawn as grey "
            "crosses and are not results."
        )
    partly = partly_collapsed(agg)
    if partly.any():
        lost, total = int(agg.loc[partly, "collapsed"].sum()), int(agg.loc[partly, "runs"].sum())
        parts.append(
            f"At {int(partly.sum())} point(s) some runs collapsed ({lost} of their {total} runs): each such point "
            "is the mean of the runs that learned, drawn with an open marker: the accuracy of a run that learns, "
            "not of every run."
        )
    if blind := no_signal_note(agg):
        parts.append(blind)
    pending = sum(statuses[s] for s in ("queued", "running", "interrupted"))
    failed = sum(statuses[s] for s in ("failed", "cancelled"))
    if pending or failed:
        parts.append(f"Not in this report: {pending} run(s) still queued or running and {failed} failed or cancelled.")
    if left_out:
        parts.append(
            f"Also not in it: {left_out} finished run(s) with no reading on these test rows or test images (stored "
            "before runs recorded one)."
        )
    if comparison is not None and len(comparison):
        verdicts = Counter(comparison["verdict"])
        parts.append(
            f"Against the papers: {verdicts['reproduced']} of {len(comparison)} published point(s) reproduced "
            f"within {REPRODUCED_WITHIN_PTS:g} points, {verdicts['not reproduced']} not, "
            f"{verdicts['above the paper']} above the paper, {verdicts['pending'] + verdicts['collapsed (no result)']} "
            "without a result yet."
        )
    return " ".join(parts)


def _results_table(agg: pd.DataFrame) -> pd.DataFrame:
    """The aggregate as a reader sees it: accuracy in %, counts, collapsed runs, guarantee, the certified ε (the
    smallest rigorous bound of the point's runs) and the ε columns."""
    table = pd.DataFrame(
        {
            "series": agg["label"],
            "method": agg["method"],
            "axis value": agg["axis_value"].map(format_axis_value),
            "test accuracy (%)": (100 * agg["test_accuracy_mean"]).round(2),
            "± std": (100 * agg["test_accuracy_std"]).map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
            "seeds": agg["test_accuracy_count"].astype(int),
            "collapsed runs": agg["collapsed"].astype(int),
            "guarantee": agg["guarantee"],
            "δ": agg["delta"].map(lambda v: "" if v is None or pd.isna(v) else f"{v:.3g}"),
        }
    )
    if "certified_epsilon" in agg.columns:  # the smallest rigorous bound of each point, and whose
        table["certified ε"] = pd.to_numeric(agg["certified_epsilon"], errors="coerce").map(
            lambda v: "" if pd.isna(v) else format_axis_value(float(f"{v:.4g}"))
        )
        table["certified by"] = agg["certified_by"].fillna("")
    for column in epsilon_columns(agg):
        table[f"ε {column.removeprefix('epsilon_')}"] = pd.to_numeric(agg[column], errors="coerce").map(
            lambda v: "" if pd.isna(v) else format_axis_value(float(f"{v:.4g}"))
        )
    return table


def _collapsed_table(rows: list[dict], axis: str | None) -> pd.DataFrame:
    """One line per (series, axis value, reason) of the runs that did not learn."""
    seen: Counter = Counter()
    for row in rows:
        result = row.get("result") or {}
        if result.get("collapsed"):
            config = row.get("config") or {}
            value = axis_value(RunConfig.from_dict(config), axis) if axis else None
            seen[
                (config.get("label"), "" if value is None else format_axis_value(value), result.get("collapse_reason"))
            ] += 1
    return pd.DataFrame(
        [{"series": s, "axis value": v, "runs": n, "why": why} for (s, v, why), n in seen.items()],
        columns=["series", "axis value", "runs", "why"],
    )


def _settings(
    store: ResultStore,
    stored: StoredSweep,
    agg: pd.DataFrame,
    axis: str | None,
    rows: list[dict],
    statuses,
    test_rows: str,
    test_inputs: tuple[str, str],
) -> dict:
    """The report's "Settings" table: which sweep and store, axis, series, datasets, models, epochs, run counts,
    which test rows the accuracy is measured on and through which test loader (``test_inputs``: (the one read,
    the sweep's own))."""
    spec = stored.spec
    configs = [row.get("config") or {} for row in rows]
    settings = {
        "sweep": f"{stored.name} (#{stored.id})",
        "results store": Path(store.path).name,
        "axis": AXIS_TITLES.get(axis or "", axis or "—"),
        "series": ", ".join(dict.fromkeys(str(label) for label in agg["label"])),
        "datasets": ", ".join(sorted({str(c.get("dataset")) for c in configs})),
        "models": ", ".join(sorted({str(c.get("model")) for c in configs})),
        "epochs": ", ".join(str(e) for e in sorted({int(c.get("epochs") or 0) for c in configs})),
        "runs": ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())),
        "test rows": "every row of the test split" if test_rows == "all" else f"the {test_rows} rows of the test split",
        "test images": _test_images(*test_inputs),
    }
    if spec is not None and spec.description:
        settings["what the sweep is"] = spec.description
    return settings


def _test_images(read: str, own: str) -> str:
    """The settings' "test images" line: the loader the accuracy is read through, and whether it is the sweep's."""
    how = TEST_INPUTS_TITLES.get(read, read)
    if read == own:
        return how
    return f"{how} (the same trained models as the sweep's own reading, {TEST_INPUTS_TITLES.get(own, own)})"


def sweep_report(
    store: ResultStore,
    sweep: int | str,
    *,
    metric: str = "test_accuracy",
    epsilon_column: str | None = None,
    test_rows: str | None = None,
    test_inputs: str | None = None,
    against: str = "axis",
    beside: list[int | str] | tuple[int | str, ...] = (),
) -> str:
    """The report of one stored sweep; ``epsilon_column`` (an accountant, e.g. "pld-poisson") goes on a second axis;
    ``against`` ("axis" or "certified", :func:`~dpmix_core.views.accuracy_figure.sweep_figure`) what its figure draws
    the accuracy against, ``beside`` other sweeps (ids or names) drawn with it on the certified axis;
    ``test_rows`` ("all", "even", "odd"; None: what the sweep's spec reports) picks the test rows of the accuracy,
    ``test_inputs`` (``TEST_INPUTS``; None: the sweep's) the test loader its trained models are read through.

    ValueError (one line): unknown sweep, no finished run yet, or an epsilon the sweep does not have.
    """
    stored = read_stored_sweep(store, sweep)
    view = view_sweep(store, stored, test_rows=test_rows, test_inputs=test_inputs)
    agg, axis, title = view.agg, view.axis, view.title
    if agg.empty:
        raise ValueError(f"sweep {stored.name!r} has no finished run yet: nothing to report.")
    if epsilon_column is not None:
        choices = [c.removeprefix("epsilon_") for c in epsilon_columns(agg)]
        if epsilon_column.removeprefix("epsilon_") not in choices:
            raise ValueError(
                f"no epsilon {epsilon_column!r} in sweep {stored.name!r}: "
                f"choose one of {', '.join(choices) or '(none)'}."
            )
        epsilon_column = "epsilon_" + epsilon_column.removeprefix("epsilon_")
    if metric not in ("test_accuracy", "test_mse"):
        raise ValueError(f"metric must be test_accuracy or test_mse. Found {metric!r}.")
    rows = list(stored.rows)
    statuses = Counter({status: n for status, n in store.counts(run_ids=stored.run_ids).items() if n})
    published, comparison = view.published, view.comparison  # the papers' own numbers (reference points have none)
    settings = _settings(store, stored, agg, axis, rows, statuses, view.test_rows, (view.test_inputs, view.own_inputs))
    # a quick preset: its full protocol's stored runs, point by point, read like the report
    check = view.check
    full_points = check.table if check is not None and check.full_runs else None
    figure, caption = sweep_figure(
        agg,
        axis,
        against=against,
        metric=metric,
        epsilon_column=epsilon_column,
        published=published,
        full_protocol=full_points,
        name=stored.name,
        overlay=overlay_aggregates(store, list(beside)) if beside else None,
    )
    sections = [
        Section(
            "In plain language",
            sweep_reading(agg, axis, statuses, comparison, left_out=view.left_out),
        ),
        Section(
            "Accuracy versus privacy",
            figure=figure.update_layout(height=REPORT_FIGURE_HEIGHT),  # the title names the sweep; room for the legend
            caption="Error bars: ±1 standard deviation over seeds. Dotted lines: runs the axis does not move "
            f"(e.g. non-private). {MARKERS_CAPTION} Open stars: the papers' numbers; grey markers "
            "named 'published, not ours': other methods' published results." + (f" {caption}" if caption else ""),
        ),
    ]
    if len(comparison):
        sections.append(
            Section(
                "Published vs ours",
                table=comparison,
                caption=f"A gap of more than {REPRODUCED_WITHIN_PTS:g} points below the paper counts as not "
                "reproduced; docs/REPRODUCTION.md says why where we miss.",
            )
        )
    if picks := view.best_axis:
        name = axis_column(picks[0].axis)
        sections.append(
            Section(
                f"Best {name} per series",
                table=best_axis_table(picks),
                caption=" ".join([best_axis_caption(name), *best_axis_notes(picks, name)]),
            )
        )
    if check is not None:
        sections.append(
            Section(
                "Quick vs its full protocol",
                check.sentence(),
                table=full_points,
                caption=f"A quick run takes a minute or less; the target is {QUICK_WITHIN_PTS:g} points or less at "
                "each point. The full protocol's runs count whichever sweep ran them.",
            )
        )
    sections.append(Section("Every point", table=_results_table(agg), caption="Mean over finished seeds."))
    sections.append(
        Section(
            "How to read each ε",
            table=epsilon_readings(agg, rows),
            caption="Each ε column is the mean over a point's runs, at the δ in the table above. Rows whose "
            "guarantee reads 'none' have no privacy; 'not covered' means no accountant bounds that release.",
        )
    )
    collapsed = _collapsed_table(rows, axis)
    if len(collapsed):
        sections.append(Section("Runs that did not learn", table=collapsed))
    return html_report(f"Trade-off sweep: {title}", sections, settings=settings)
