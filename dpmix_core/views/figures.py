"""Presentation-ready plotly figures (used by the app and by report scripts)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

__all__ = ["epsilon_curve_figure", "AXIS_TITLES"]

AXIS_TITLES = {
    "sigma": "noise σx (std of feature noise)",
    "T": "T (number of synthetic points released)",
    "l": "ℓ (records mixed per point; Poisson: expected m)",
}
_COLORS = {
    "lee2019": "#1f77b4",
    "dpcda": "#2ca02c",
    "gdp-clt": "#ff7f0e",
    "rdp-poisson": "#9467bd",
    "pld-poisson": "#d62728",
    "rdp-wor": "#17becf",
    "rdp-wor (clipped)": "#8c564b",
}


def epsilon_curve_figure(curves: pd.DataFrame, axis: str, *, delta: float, current: float | None = None) -> go.Figure:
    """epsilon vs one knob, log-log, one line per accountant; approximations dashed."""
    fig = go.Figure()
    for name, part in curves.groupby("accountant", sort=False):
        finite = part[part["epsilon"].map(lambda e: math.isfinite(e) and e > 0)]
        dashed = not bool(part["upper_bound"].iloc[0])
        fig.add_trace(
            go.Scatter(
                x=finite[axis],
                y=finite["epsilon"],
                mode="lines",
                name=f"{name}{' (approx.)' if dashed else ''}",
                line={"color": _COLORS.get(name), "dash": "dash" if dashed else "solid", "width": 2.5},
            )
        )
    if current is not None:
        fig.add_vline(x=current, line={"color": "grey", "dash": "dot"}, annotation_text="current")
    fig.update_layout(
        xaxis={"title": AXIS_TITLES.get(axis, axis), "type": "log"},
        yaxis={"title": f"ε at δ = {delta:.2g}", "type": "log"},
        font={"size": 15},
        legend={"title": "accountant"},
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        height=430,
    )
    return fig
