"""The accuracy-versus-privacy figure of a sweep (Train & trade-offs, ``bench/make_reproduction_figures.py``).

One line per series with ±1 std error bars; runs the axis does not move as dotted reference lines; collapsed
points (the model never learned) as grey crosses, never as results; points where only some runs collapsed as open
markers (their mean is over the runs that learned, and the hover says how many were left out); the papers' own
numbers as open stars and
other methods' published results ("published, not ours") as grey labelled markers; optionally each series'
ε on a second axis, or every point against its certified ε instead of the sweep's axis (:func:`sweep_figure`).
Pure plotly: it reads an aggregate (``experiments.results.aggregate``), computes nothing.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from dpmix_core.experiments.certified_axis import CERTIFIED_AXIS, on_certified_epsilon, overlaid
from dpmix_core.experiments.results import all_collapsed, collapsed_note, partly_collapsed
from dpmix_core.experiments.spec import Published
from dpmix_core.experiments.trade_offs import AXIS_TITLES
from dpmix_core.privacy.release import PRIVATE_NORMALISATION, Protects

__all__ = [
    "AGAINST",
    "CERTIFIED_CAPTION",
    "against_title",
    "COLLAPSED_MARKER",
    "MARKERS_CAPTION",
    "PARTLY_COLLAPSED_NAME",
    "REFERENCE_PREFIX",
    "axis_ticks",
    "epsilon_columns",
    "sweep_figure",
    "trade_off_figure",
    "wrap_title",
]


def epsilon_columns(agg: pd.DataFrame) -> list[str]:
    """The aggregate's epsilon columns worth a second axis: accountants with at least one finite value."""
    return [
        c
        for c in agg.columns
        if c.startswith("epsilon_")
        and c != "epsilon_none"
        and pd.to_numeric(agg[c], errors="coerce").map(lambda v: math.isfinite(v) if v == v else False).any()
    ]


# what a sweep's accuracy is drawn against: its own axis, or each point's certified epsilon (certified_axis)
AGAINST = ("axis", "certified")
CERTIFIED_CAPTION = (
    "On the certified-ε axis each private point sits at the smallest rigorous upper bound its runs recorded for "
    "their own release (the table's certified_epsilon and certified_by columns), whatever accountant calibrated "
    "it; open stars stay at the ε the paper printed, under the paper's own accountant."
)


def sweep_figure(
    agg: pd.DataFrame,
    axis: str | None,
    *,
    against: str = "axis",
    title: str = "",
    metric: str = "test_accuracy",
    epsilon_column: str | None = None,
    published: tuple[Published, ...] = (),
    full_protocol: pd.DataFrame | None = None,
    name: str = "",
    overlay: Mapping[str, pd.DataFrame] | None = None,
) -> tuple[go.Figure, str]:
    """(:func:`trade_off_figure` of a sweep, a caption for what it adds to the markers'): against its own ``axis``
    (the caption: :func:`full_protocol_caption`), or, with
    ``against="certified"``, against each point's certified epsilon (:func:`on_certified_epsilon`). There the
    second epsilon axis and the full protocol's diamonds (both along the sweep's axis) are not drawn, nor are the
    papers' points of a sweep whose axis is not an epsilon; the caption says so and names the points left out.
    ``overlay`` ({sweep name: aggregate}, ``sweep_view.overlay_aggregates``): other sweeps drawn beside this one
    (``name``) on the certified axis, every series named after its sweep (:func:`overlaid`); the papers' points are
    then this sweep's only. ValueError: ``against`` not one of :data:`AGAINST`, or an overlay against the axis."""
    if against not in AGAINST:
        raise ValueError(f"against must be one of {', '.join(AGAINST)}. Found {against!r}.")
    if overlay and against != "certified":
        raise ValueError("other sweeps share only the certified-ε axis with this one: draw against 'certified'.")
    if against == "axis":
        figure = trade_off_figure(
            agg,
            axis,
            title=title,
            metric=metric,
            epsilon_column=epsilon_column,
            published=published,
            full_protocol=full_protocol,
        )
        return figure, full_protocol_caption(full_protocol)
    if overlay:
        agg = overlaid({name or "this sweep": agg, **overlay})
        title = f"{title} and {len(overlay)} other sweep(s), on one certified-ε axis" if title else title
        published = tuple(
            p if p.reference else replace(p, series=f"{name or 'this sweep'}: {p.series}") for p in published
        )
    points = on_certified_epsilon(agg)
    on_epsilon = (axis or "").endswith("epsilon")
    figure = trade_off_figure(
        points.agg, CERTIFIED_AXIS, title=title, metric=metric, published=published if on_epsilon else ()
    )
    dropped = [] if on_epsilon or not published else ["the papers' points (on the sweep's own axis) are not drawn"]
    if epsilon_column is not None or full_protocol is not None:
        dropped.append("the second ε axis and the full protocol's diamonds belong to the sweep's own axis")
    beside = (
        [f"Beside {name or 'this sweep'}: {', '.join(overlay)} (each series named after its sweep)."] if overlay else []
    )
    caption = " ".join([CERTIFIED_CAPTION, *beside, *(f"{d[0].upper()}{d[1:]}." for d in dropped), points.sentence()])
    return figure, caption.strip()


def against_title(against: str, axis: str | None) -> str:
    """How a choice of :data:`AGAINST` reads beside a sweep on ``axis``: "certified ε", "target ε", "ℓ", ..."""
    if against == "certified":
        return "certified ε"
    if axis == "target_epsilon":
        return "target ε (each series' accountant)"
    return AXIS_TITLES.get(axis or "", axis or "the sweep's axis").split(" (")[0]


def _certified_hover(points: pd.DataFrame) -> list[str] | None:
    """On the certified axis, each point's bound and the accountant that gives it (a rigorous upper bound). Read
    from ``certified_epsilon``, not the x: series that all sit at one bound are drawn side by side, x their names."""
    if "certified_by" not in points.columns or "certified_epsilon" not in points.columns:
        return None
    return [
        f"certified ε ≤ {float(value):.4g} by {by} (rigorous upper bound)" if by else ""
        for value, by in zip(points["certified_epsilon"], points["certified_by"].fillna(""), strict=True)
    ]


def _error_bars(std: pd.Series) -> list[float]:
    return [0.0 if (v is None or (isinstance(v, float) and math.isnan(v))) else float(v) for v in std]


def _guarantee_mark(part: pd.DataFrame) -> dict:
    """A distinct look for series whose epsilon is not a bound (x markers, dotted) or protects features only."""
    text = " ".join(str(g) for g in part.get("guarantee", pd.Series(dtype=str)).dropna())
    if PRIVATE_NORMALISATION in text:
        return {"suffix": " [ε not covered: private normalisation]", "symbol": "x", "dash": "dot", "size": 11}
    if Protects.FEATURES_ONLY.value in text:
        return {"suffix": " [ε: features only]", "symbol": "diamond-open", "dash": "dashdot", "size": 10}
    return {"suffix": "", "symbol": "circle", "dash": "solid", "size": 8}


COLLAPSED_MARKER = {"symbol": "x-thin", "size": 14, "color": "#888", "line": {"width": 2, "color": "#888"}}
PARTLY_COLLAPSED_NAME = "open marker: some runs collapsed (mean of the others)"  # legend entry
FULL_PROTOCOL_CAPTION = (
    "Open diamonds: the full protocol's finished runs in this store (mean ± 1 std), which this quick previews."
)
MARKERS_CAPTION = (
    "Grey crosses: every run of the point collapsed (no result). Open markers: some of its runs collapsed; "
    "the point is the mean of the runs that learned (hover for how many were left out)."
)


def full_protocol_points(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a quick-vs-full table (QuickVsFull.table) the chart draws as open diamonds: a full-protocol
    number at a finite axis value (eps = inf has no place on the axis; a point whose full runs all collapsed has
    no number)."""
    known = table.dropna(subset=["full (%)", "axis value"])
    # .astype(bool): an empty mask of another dtype would select columns, not rows (pandas), and lose them all
    return known[known["axis value"].map(lambda v: math.isfinite(float(v))).astype(bool)]


def full_protocol_caption(table: pd.DataFrame | None) -> str:
    """FULL_PROTOCOL_CAPTION where the chart draws a full-protocol point (:func:`full_protocol_points`), else ""."""
    return FULL_PROTOCOL_CAPTION if table is not None and len(full_protocol_points(table)) else ""


def _solid(symbol: str) -> str:
    """A plotly marker symbol's filled shape ("diamond-open" -> "diamond"), to be drawn white with a coloured edge."""
    return symbol.removesuffix("-open")


def _published_by_series(published: tuple[Published, ...], *, reference: bool) -> dict[str, list[Published]]:
    """The drawable (finite axis value) published points of one kind, grouped by series in order."""
    out: dict[str, list[Published]] = {}
    for p in published:
        if math.isfinite(p.value) and p.reference is reference:
            out.setdefault(p.series, []).append(p)
    return out


def _published_trace(points: list[Published], **style: Any) -> go.Scatter:
    """Published points as a plotly trace: axis value vs accuracy in %, styled by the caller."""
    return go.Scatter(x=[p.value for p in points], y=[100 * p.accuracy for p in points], **style)


REFERENCE_PREFIX = "published, not ours — "  # legend of other methods' published points (the frontier)
REFERENCE_SYMBOLS = ("diamond", "square", "triangle-up", "pentagon")


def trade_off_figure(
    agg: pd.DataFrame,
    axis: str | None,
    *,
    title: str = "",
    metric: str = "test_accuracy",
    epsilon_column: str | None = None,
    published: tuple[Published, ...] = (),
    full_protocol: pd.DataFrame | None = None,
) -> go.Figure:
    """Accuracy (or MSE) vs the sweep axis: one line per series with ±1 std error bars.

    ``full_protocol`` (a quick sweep's :attr:`~dpmix_core.experiments.quick_vs_full.QuickVsFull.table`): the full
    protocol's stored means (±1 std) at the quick's points, as open diamonds in the series' colour named
    "full protocol — ...", so the preview and what it previews sit on one chart.

    ``published`` points (the papers' numbers) are drawn as open stars, one trace per series; reference
    points (other methods' published results, ``Published.reference``) as grey labelled markers named
    "published, not ours — ...".
    Points whose runs all collapsed (did not learn) are grey thin crosses named "(collapsed)".

    Runs the axis does not move (non-private, or a baseline on a sigma axis) are
    drawn as horizontal reference lines. With ``epsilon_column`` the mean epsilon
    of the mixing series goes on a second y-axis (e.g. accuracy vs sigma, eps on the right).
    A sweep at a single axis value without published points (e.g. models on one release file) has no curve:
    its series are drawn side by side on a categorical axis instead.
    """
    fig = go.Figure()
    mean, std = f"{metric}_mean", f"{metric}_std"
    percent = metric == "test_accuracy"
    scale = 100.0 if percent else 1.0
    # .astype(bool): an empty mask of another dtype would select columns, not rows (pandas), and lose them all
    finite = agg[agg["axis_value"].map(lambda v: v is not None and not pd.isna(v) and math.isfinite(v)).astype(bool)]
    single = finite["axis_value"].nunique() == 1 and not published and len(finite) > 0
    if single:  # one point per series: the series are the x-axis
        value = finite["axis_value"].iloc[0]
        finite = finite.assign(axis_value=finite["label"].astype(str))
    flat = agg[~agg.index.isin(finite.index)]
    palette = plotly.colors.qualitative.Plotly
    colors: dict[str, str] = {}
    any_partly = False
    for label, part in finite.groupby("label", sort=False):
        part = part.sort_values("axis_value")
        colors[str(label)] = palette[len(colors) % len(palette)]
        mark = _guarantee_mark(part)
        dead = all_collapsed(part)
        learned = part[~dead]
        partly = partly_collapsed(learned)
        any_partly = any_partly or bool(partly.any())
        if len(learned):
            fig.add_trace(
                go.Scatter(
                    x=learned["axis_value"],
                    y=learned[mean] * scale,
                    name=str(label) + mark["suffix"],
                    mode="lines+markers",
                    error_y={"type": "data", "array": [v * scale for v in _error_bars(learned[std])], "visible": True},
                    line={"width": 2.5, "color": colors[str(label)], "dash": mark["dash"]},
                    marker={"size": mark["size"], "symbol": mark["symbol"]},
                    hovertext=_certified_hover(learned) if axis == CERTIFIED_AXIS else None,
                )
            )
        if len(learned) and partly.any():  # hollow on top of the line's own marker; the hover says how many
            fig.add_trace(
                go.Scatter(
                    x=learned.loc[partly, "axis_value"],
                    y=learned.loc[partly, mean] * scale,
                    name=str(label),
                    mode="markers",
                    showlegend=False,
                    marker={
                        "size": mark["size"] + 2,
                        "symbol": _solid(mark["symbol"]),
                        "color": "white",
                        "line": {"width": 2, "color": colors[str(label)]},
                    },
                    hovertext=[collapsed_note(row) for _, row in learned[partly].iterrows()],
                )
            )
        if dead.any():  # never a normal point: a grey thin cross, named as collapsed
            fig.add_trace(
                go.Scatter(
                    x=part.loc[dead, "axis_value"],
                    y=part.loc[dead, mean] * scale,
                    name=f"{label} (collapsed)",
                    mode="markers",
                    marker=dict(COLLAPSED_MARKER),
                    hovertext=["collapsed: the model did not learn (constant predictor or chance accuracy)"]
                    * int(dead.sum()),
                )
            )
    if any_partly:  # the legend explains the hollow points (a presenter's audience has no hover)
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=PARTLY_COLLAPSED_NAME,
                marker={"symbol": "circle", "size": 10, "color": "white", "line": {"width": 2, "color": "#444"}},
            )
        )
    for _, row in flat.iterrows():
        if pd.isna(row[mean]):
            continue
        dead = bool(all_collapsed(pd.DataFrame([row])).iloc[0])
        value = row["axis_value"]  # None: a run the axis does not move; infinite: the axis' limit (e.g. eps = inf)
        at_limit = isinstance(value, int | float) and math.isinf(value)
        name = AXIS_TITLES.get(axis or "", axis or "").split(" (")[0]  # "ε", "PCA ε", "noise σx"
        where = f" ({name} = {'∞' if value > 0 else '−∞'})" if at_limit else ""
        fig.add_hline(
            y=row[mean] * scale,
            line={"dash": "dot", "color": "#aaa" if dead else "#444"},
            annotation_text=f"{row['label']}{where}{' (collapsed)' if dead else ''}: "
            f"{row[mean] * scale:.1f}{'%' if percent else ''}",
            annotation_position="top left",
        )
    if percent:
        by_series, references = (
            _published_by_series(published, reference=False),
            _published_by_series(published, reference=True),
        )
        for k, (series, points) in enumerate(references.items()):
            fig.add_trace(
                _published_trace(
                    points,
                    mode="markers+text",
                    name=f"{REFERENCE_PREFIX}{series}",
                    text=[f"{series} ({p.source})" for p in points],
                    textposition="bottom right",
                    textfont={"size": 10, "color": "#777"},
                    marker={"symbol": REFERENCE_SYMBOLS[k % len(REFERENCE_SYMBOLS)], "size": 11, "color": "#777"},
                    hovertext=[f"published, not ours: {p.source}" for p in points],
                )
            )
        for series, points in by_series.items():
            style = {"symbol": "star-open", "size": 15, "line": {"width": 2}, "color": colors.get(series, "#444")}
            fig.add_trace(
                _published_trace(
                    points,
                    mode="markers",
                    name=f"published — {series}",
                    marker=style,
                    hovertext=[p.source for p in points],
                )
            )
    if percent and full_protocol is not None:
        for series, part in full_protocol_points(full_protocol).groupby("series", sort=False):
            fig.add_trace(
                go.Scatter(
                    x=[str(series)] * len(part) if single else part["axis value"],
                    y=part["full (%)"],
                    name=f"full protocol — {series}",
                    mode="markers",
                    error_y={"type": "data", "array": part["full ± std"].fillna(0.0).tolist(), "visible": True},
                    marker={"symbol": "diamond-open", "size": 13, "line": {"width": 2}},
                    marker_color=colors.get(str(series), "#444"),
                    hovertext=[f"full protocol: {n} finished run(s) in this store" for n in part["full seeds"]],
                )
            )
    if epsilon_column and epsilon_column in finite.columns:
        for label, part in finite.groupby("label", sort=False):
            part = part.sort_values("axis_value")
            if part[epsilon_column].notna().any():
                fig.add_trace(
                    go.Scatter(
                        x=part["axis_value"],
                        y=part[epsilon_column],
                        yaxis="y2",
                        name=f"ε ({epsilon_column.removeprefix('epsilon_')}) — {label}",
                        mode="lines",
                        line={"dash": "dash", "width": 2},
                    )
                )
        fig.update_layout(
            yaxis2={
                "title": "ε",
                "overlaying": "y",
                "side": "right",
                "type": "log",
                "showgrid": False,
                "tickmode": "linear",  # 1-2-5 steps (10, 20, 50, 100): not ticks synced to the accuracy grid (14, 26, 49)
                "dtick": "D2",
                "tickformat": ",.6~g",  # 100 and 1,000, not 1e+2
                "minor": {"showgrid": False},
            }
        )
    log_x = axis in ("sigma", "l", "T") or (axis or "").endswith("epsilon")
    x_title = AXIS_TITLES.get(axis or "", axis or "")
    xaxis: dict[str, Any] = {"title": x_title, "type": "log" if log_x else "linear"}
    if single:
        xaxis = {"title": f"series, all at {x_title} = {value:g}", "type": "category"}
    elif axis == CERTIFIED_AXIS:  # bounds such as 1.0033 and 1.52 are no tick labels: 1-2-5 steps, as the ε axis
        xaxis.update({"dtick": "D2", "tickformat": ",.6~g", "minor": {"showgrid": False}})
    elif len(finite):
        xaxis.update(axis_ticks([float(v) for v in finite["axis_value"]] + [p.value for p in published]))
    lines = wrap_title(title)
    extra_lines = lines.count("<br>")
    fig.update_layout(  # the title hangs from the top (below the modebar), so more lines push the plot down
        title={"text": lines, "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": TITLE_PAD_PX}},
        xaxis=xaxis,
        yaxis={"title": "test accuracy (%)" if percent else "test MSE", "type": "linear" if percent else "log"},
        font={"size": 15},
        legend={"orientation": "h", "y": -0.25},
        margin={"l": 10, "r": 10, "t": TITLE_PAD_PX + TITLE_LINE_PX * (extra_lines + 1) + 8, "b": 10},
        height=480 + TITLE_LINE_PX * extra_lines,
    )
    return fig


TITLE_WIDTH = 70  # characters per title line at the figure's font size: a longer title is wrapped, never cut
TITLE_LINE_PX = 21  # the top margin one title line needs (the title font is 1.2 x 15 px, line height 1.3 em)
TITLE_PAD_PX = 36  # above the title: room for the modebar
MAX_LABELLED_TICKS = 12


def wrap_title(title: str, width: int = TITLE_WIDTH) -> str:
    """The title broken at spaces into lines of at most ``width`` characters (plotly's ``<br>``), words kept whole."""
    return "<br>".join(textwrap.wrap(title, width=width, break_long_words=False, break_on_hyphens=False))


def axis_ticks(values: list[float]) -> dict[str, Any]:
    """Ticks at the sweep's own axis values (e.g. ε = 1, 2, 4, 8) instead of plotly's log-decade labels.

    With more than ``MAX_LABELLED_TICKS`` distinct values (or none finite) plotly's own ticks are kept.
    """
    ticks = sorted({v for v in values if math.isfinite(v)})
    if not ticks or len(ticks) > MAX_LABELLED_TICKS:
        return {}
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{v:g}" for v in ticks]}
