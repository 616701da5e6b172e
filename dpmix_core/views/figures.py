"""Presentation-ready plotly figures (used by the app and by report scripts)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from dpmix_core.privacy.accountants import ENORMOUS_EPSILON

__all__ = ["CURVE_CAPTION", "epsilon_curve_figure", "profile_figure", "fdp_tradeoff_figure", "AXIS_TITLES"]

AXIS_TITLES = {
    "sigma": "noise σx (std of feature noise, in feature units)",
    "T": "T (synthetic points released, count)",
    "l": "ℓ (records mixed per point, count; Poisson: expected m)",
}
CURVE_TITLES = {"sigma": "ε as the noise σx changes", "T": "ε as the number of points T grows", "l": "ε as ℓ grows"}
_COLORS = {
    "lee2019": "#1f77b4",
    "dpcda": "#2ca02c",
    "gdp-clt": "#ff7f0e",
    "rdp-poisson": "#9467bd",
    "pld-poisson": "#d62728",
    "rdp-wor": "#17becf",
    "rdp-wor (clipped)": "#8c564b",
}


# Under every epsilon-curve figure (page and HTML report): what each line style means
CURVE_CAPTION = (
    "Solid: rigorous upper bounds for the chosen release. Dashed: the CLT approximation, or every ε of a release no "
    "accountant covers. Thin dotted: an accountant of another release (other sampling or data bound), for "
    "comparison: no bound for this one. Missing points: ε infinite or above 10⁶ (no noise, or too little for the "
    "bound to hold)."
)


def epsilon_curve_figure(curves: pd.DataFrame, axis: str, *, delta: float, current: float | None = None) -> go.Figure:
    """epsilon vs one knob, log-log, one line per accountant; approximations dashed, and thin and dotted the
    accountants of another release than the chosen one (``chosen`` False in ``curves``; no column: all chosen)."""
    fig = go.Figure()
    for name, part in curves.groupby("accountant", sort=False):
        # infinite or enormous epsilons (no noise, or a bound that diverges) are left out: they would stretch
        # the axis to 1e200 and protect nothing anyway
        finite = part[part["epsilon"].map(lambda e: math.isfinite(e) and 0 < e <= ENORMOUS_EPSILON)]
        dashed = not bool(part["upper_bound"].iloc[0])
        other = "chosen" in part and not bool(part["chosen"].iloc[0])
        tags = [tag for tag, on in (("approx.", dashed), ("another release", other)) if on]
        fig.add_trace(
            go.Scatter(
                x=finite[axis],
                y=finite["epsilon"],
                mode="lines",
                name=_tagged(str(name), tags),
                opacity=0.75 if other else 1.0,
                line={
                    "color": _COLORS.get(name),
                    "dash": "dot" if other else "dash" if dashed else "solid",
                    "width": 1.5 if other else 2.5,
                },
            )
        )
    if current is not None and current > 0:
        # a line in data coordinates plus a label in paper coordinates at the line's (log10) x: add_vline's own
        # annotation drifts away from the line on log axes
        fig.add_shape(
            type="line",
            x0=current,
            x1=current,
            y0=0,
            y1=1,
            xref="x",
            yref="paper",
            line={"color": "grey", "dash": "dot", "width": 2},
        )
        fig.add_annotation(
            x=math.log10(current),
            y=1.0,
            xref="x",
            yref="paper",
            text="current",
            showarrow=False,
            yanchor="bottom",
            font={"color": "grey"},
        )
    fig.update_layout(
        title=f"{CURVE_TITLES.get(axis, f'ε vs {axis}')} (δ = {delta:.2g})",
        xaxis={"title": AXIS_TITLES.get(axis, axis), "type": "log"},
        yaxis={"title": f"ε at δ = {delta:.2g} (privacy loss, nats)", "type": "log", "exponentformat": "power"},
        font={"size": 15},
        legend={"title": "accountant"},
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        height=430,
    )
    return fig


def _tagged(name: str, tags: list[str]) -> str:
    """A legend name with its tags in brackets: "pld-poisson (another release)", "rdp-wor (clipped; approx.)"."""
    if not tags:
        return name
    if name.endswith(")"):
        return f"{name[:-1]}; {', '.join(tags)})"
    return f"{name} ({', '.join(tags)})"


def fdp_tradeoff_figure(alphas, beta_bound, gdp_beta, *, mu: float, title: str) -> go.Figure:
    """f-DP trade-off: the best membership test's type II error vs its type I error (Dong, Roth & Su 2022)."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=alphas,
            y=[1 - a for a in alphas],
            mode="lines",
            name="perfect privacy (random guess)",
            line={"color": "#999", "dash": "dot"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=alphas,
            y=beta_bound,
            mode="lines",
            name="this release (rigorous lower bound)",
            line={"color": "#d62728", "width": 3},
            fill="tozeroy",
            fillcolor="rgba(214,39,40,0.08)",
        )
    )
    if math.isfinite(mu):
        fig.add_trace(
            go.Scatter(
                x=alphas,
                y=gdp_beta,
                mode="lines",
                name=f"Gaussian DP, μ = {mu:.3g} (reference)",
                line={"color": "#1f77b4", "dash": "dash"},
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "type I error α (false alarms: 'used' when it was not)", "range": [0, 1]},
        yaxis={"title": "type II error β (missed: 'not used' when it was)", "range": [0, 1]},
        font={"size": 15},
        height=430,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def profile_figure(epsilons, deltas, *, delta: float, epsilon: float, title: str) -> go.Figure:
    """The privacy profile delta(eps) on a log scale, with the headline (eps, delta) marked."""
    fig = go.Figure()
    pts = [(e, d) for e, d in zip(epsilons, deltas) if d > 0]
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines",
            name="δ(ε), upper bound",
            line={"color": "#d62728", "width": 3},
        )
    )
    if math.isfinite(epsilon):
        fig.add_trace(
            go.Scatter(
                x=[epsilon],
                y=[delta],
                mode="markers+text",
                name="headline",
                text=[f"(ε = {epsilon:.3g}, δ = {delta:.2g})"],
                textposition="top right",
                marker={"size": 12, "color": "#111"},
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "ε"},
        yaxis={"title": "δ(ε)", "type": "log", "exponentformat": "power"},
        font={"size": 15},
        height=430,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        showlegend=False,
    )
    return fig
