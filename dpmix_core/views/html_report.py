"""One-click reports: a self-contained HTML file (settings, plain-language reading, epsilon table, figures,
library versions) for a stakeholder deck or an e-mail. No Streamlit; the pages offer it as a download and
``python -m dpmix_core report`` writes it.
"""

from __future__ import annotations

import html
import importlib.metadata
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime

import pandas as pd
import plotly.graph_objects as go

import dpmix_core
from dpmix_core.privacy.accountants import MixingSetting
from dpmix_core.privacy.statement import privacy_statement
from dpmix_core.views.figures import CURVE_CAPTION, epsilon_curve_figure, fdp_tradeoff_figure, profile_figure
from dpmix_core.views.privacy_scale import headline
from dpmix_core.views.reports import (
    RELEASE_MODELS,
    curve_anchor,
    epsilon_curves,
    epsilon_table,
    model_accountants,
    no_headline_text,
    release_reading,
)

__all__ = ["Section", "html_report", "accountant_report", "library_versions"]

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; max-width: 1100px; margin: 2em auto;
       color: #222; line-height: 1.45; }
h1 { font-size: 2em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; font-size: 0.92em; display: block; overflow-x: auto; } th, td { border: 1px solid #ddd;
padding: 4px 8px; text-align: left; vertical-align: top; } th { background: #f5f5f5; }
td:first-child { min-width: 14em; } /* a row's name stays readable; a wide table scrolls sideways instead */
.headline { font-size: 1.25em; background: #f4f8ff; border-left: 4px solid #1f77b4; padding: 0.8em 1em; }
.settings { color: #555; font-size: 0.9em; } footer { margin-top: 3em; color: #777; font-size: 0.85em; }
"""


@dataclass(frozen=True)
class Section:
    """A heading and its body: plain text (escaped), then a table and/or a figure, then a caption."""

    heading: str
    text: str = ""
    table: pd.DataFrame | None = None
    figure: go.Figure | None = None
    caption: str = ""


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "dpmix_core": dpmix_core.__version__}
    for name in ("numpy", "scipy", "pandas", "plotly", "dp-accounting", "streamlit", "torch"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def html_report(title: str, sections: Sequence[Section], *, settings: dict | None = None) -> str:
    """A self-contained HTML document (plotly.js inlined once, so it opens offline)."""
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<p class='settings'>DPMix Studio {html.escape(dpmix_core.__version__)} · {stamp}</p>")
    if settings:
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in settings.items()
        )
        parts.append(f"<h2>Settings</h2><table>{rows}</table>")
    plotly_included = False
    for s in sections:
        parts.append(f"<h2>{html.escape(s.heading)}</h2>")
        if s.text:
            cls = " class='headline'" if s.heading == "In plain language" else ""
            parts.append(f"<p{cls}>{html.escape(s.text)}</p>")
        if s.table is not None:
            parts.append(s.table.to_html(index=False, escape=True, border=0, na_rep=""))
        if s.figure is not None:
            parts.append(s.figure.to_html(full_html=False, include_plotlyjs="inline" if not plotly_included else False))
            plotly_included = True
        if s.caption:
            parts.append(f"<p class='settings'>{html.escape(s.caption)}</p>")
    versions = ", ".join(f"{k} {v}" for k, v in library_versions().items())
    parts.append(f"<footer>Libraries: {html.escape(versions)}.</footer></body></html>")
    return "".join(parts)


def accountant_report(
    setting: MixingSetting,
    delta: float,
    model: str,
    *,
    pld_accuracy: float = 0.2,
    about: Mapping[str, str] | None = None,
    note: str | None = None,
) -> str:
    """The Privacy accountant page as a report: headline, privacy statement, every accountant's epsilon, curves,
    attacker view. ``about``: lines for the settings table first (e.g. the release file it was read from); ``note``:
    what the release's epsilon does not cover by itself (a card's search or private ranges), shown first."""
    reading = release_reading(setting, delta, model, pld_accuracy=pld_accuracy)
    table = epsilon_table(setting, delta, pld_accuracy=pld_accuracy, model=model)
    table = table.drop(columns=[c for c in ("epsilon", "reference", "upper_bound") if c in table.columns])
    # the settings of the release the headline speaks for (rdp-wor's bounds follow the model: clip_records, clip)
    shown = model_accountants(setting, model).get(reading.accountant or "", setting)
    settings: dict[str, object] = dict(about or {})
    settings.update({f.name: getattr(shown, f.name) for f in fields(shown)})
    settings.update(delta=delta, release_model=RELEASE_MODELS[model])
    printed = (
        f"n = {setting.n:,}, ℓ = {setting.l}, T = {setting.T:,}, σx = {setting.sigma_x:.4g}, "
        f"σy = {setting.sigma_y:.4g}, δ = {delta:.2g}"
    )
    sections = [] if note is None else [Section("What this ε does not cover", note)]
    if reading.accountant is None:
        sections.append(Section("In plain language", no_headline_text(reading)))
    else:
        h = headline(reading.epsilon, delta, reading.accountant)
        sections.append(Section("In plain language", h.text()))
    if reading.release is not None and reading.result is not None:
        sections.append(Section("Privacy statement", privacy_statement(reading.release, reading.result)))
    sections.append(
        Section(
            "Every accountant",
            table=table,
            caption="Each accountant on the release its paper analyses (column 'release analysed'): the "
            "report's release model first; the other rows bound another release, not this one, and say so.",
        )
    )
    anchor = curve_anchor(setting, "sigma")
    ratio = setting.sigma_y / setting.sigma_x if setting.sigma_x > 0 else 1.0
    if math.isfinite(ratio) and ratio * 100 * anchor.sigma_x < 1e300:  # the grid sweeps sigma_x to 10x its decade
        curves = epsilon_curves(anchor, delta, axis="sigma", sigma_ratio=ratio, pld_accuracy=pld_accuracy, model=model)
        figure = epsilon_curve_figure(curves, "sigma", delta=delta, current=setting.sigma_x)
        sections.append(Section("ε as a function of the noise", figure=figure, caption=f"{printed}. {CURVE_CAPTION}"))
    else:
        sections.append(
            Section(
                "ε as a function of the noise",
                f"Not drawn: σy / σx = {ratio:.3g} would put σy beyond the floating-point range along the curve.",
            )
        )
    if reading.profile is not None:
        sections.append(
            Section(
                "What an attacker can do",
                figure=fdp_tradeoff_figure(
                    reading.alphas,
                    reading.beta_bound,
                    reading.gdp_beta,
                    mu=reading.gdp_mu,
                    title="Trade-off curve of the best membership test",
                ),
                caption=printed,
            )
        )
        sections.append(
            Section(
                "Privacy profile",
                figure=profile_figure(
                    reading.profile.epsilons, reading.profile.deltas, delta=delta, epsilon=reading.epsilon, title="δ(ε)"
                ),
                caption=f"{reading.profile.method}; {printed}",
            )
        )
    return html_report("Privacy of a random-mixing release", sections, settings=settings)
