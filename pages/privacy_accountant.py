"""Page "Privacy accountant": epsilon of a mixing release under every accountant, live."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpmix_core.accountants import ACCOUNTANTS, MixingSetting, get_accountant
from dpmix_core.calibration import calibrate_sigma
from dpmix_core.figures import epsilon_curve_figure
from dpmix_core.presets import ACCOUNTING_PRESETS
from dpmix_core.privacy_scale import DEPLOYMENTS, odds_ratio_text
from dpmix_core.reports import (
    accountant_info,
    epsilon_curves,
    epsilon_table,
    format_epsilon,
    tightest_guarantees,
)

K = "acc_"  # session-state prefix of this page's widgets
DEFAULTS = {
    "n": 60000, "l": 256, "T": 10000, "sigma_x": 0.0711, "ratio": 1.0, "delta": 1e-5,
    "dx": 784, "dy": 10, "clip": 1.0, "clip_x": 1.0, "clip_y": 1.0,
    "class_centric": False, "classes": 10, "label_change": False, "pld_accuracy": 0.2,
}


@st.cache_data(show_spinner=False, max_entries=512)
def cached_table(setting: MixingSetting, delta: float, pld_accuracy: float) -> pd.DataFrame:
    return epsilon_table(setting, delta, pld_accuracy=pld_accuracy)


@st.cache_data(show_spinner="Computing curves…", max_entries=64)
def cached_curves(setting: MixingSetting, delta: float, axis: str, ratio: float, pld_accuracy: float) -> pd.DataFrame:
    return epsilon_curves(setting, delta, axis=axis, sigma_ratio=ratio, pld_accuracy=pld_accuracy)


@st.cache_data(show_spinner="Calibrating…", max_entries=128)
def cached_calibration(name: str, setting: MixingSetting, target: float, delta: float, ratio: float):
    return calibrate_sigma(get_accountant(name), setting, target_epsilon=target, delta=delta, sigma_ratio=ratio)


def _init_state() -> None:
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(K + key, value)


def _apply_preset() -> None:
    preset = ACCOUNTING_PRESETS.get(st.session_state[K + "preset"])
    if preset is None:
        return
    s = preset.setting
    values = {
        "n": s.n, "l": s.l, "T": s.T, "sigma_x": s.sigma_x, "ratio": preset.sigma_ratio, "delta": preset.delta,
        "dx": s.dx, "dy": s.dy, "clip": s.clip or 1.0, "clip_x": s.clip_x, "clip_y": s.clip_y,
        "class_centric": s.class_sizes is not None, "classes": len(s.class_sizes or ()) or 10,
        "label_change": s.label_may_change,
    }
    if preset.target_epsilon is not None and preset.calibrate_with is not None:
        cal = cached_calibration(preset.calibrate_with, s, preset.target_epsilon, preset.delta, preset.sigma_ratio)
        values["sigma_x"] = cal.sigma_x
    for key, value in values.items():
        st.session_state[K + key] = value


def _apply_calibrated(sigma_x: float) -> None:
    st.session_state[K + "sigma_x"] = sigma_x


def _controls() -> tuple[MixingSetting | None, float]:
    st.selectbox(
        "Start from a published setting",
        ["Custom", *ACCOUNTING_PRESETS],
        key=K + "preset",
        on_change=_apply_preset,
        help="Loads n, ℓ, T, σ, δ and the data bounds of a paper's experiment.",
    )
    if (preset := ACCOUNTING_PRESETS.get(st.session_state[K + "preset"])) is not None:
        st.caption(f"{preset.source}. {preset.note}")
    c1, c2, c3 = st.columns(3)
    c1.number_input("n — records in the private dataset", min_value=1, max_value=10**10, step=1000, key=K + "n")
    c1.number_input("ℓ — records mixed per point (Poisson: expected m)", min_value=1, max_value=10**7, step=1,
                    key=K + "l")
    c2.number_input("T — synthetic points released", min_value=1, max_value=10**9, step=1000, key=K + "T")
    c2.number_input("σx — feature noise std", min_value=0.0, step=0.01, format="%.4f", key=K + "sigma_x")
    c3.number_input("λ = σy / σx", min_value=0.0, step=0.1, format="%.3f", key=K + "ratio")
    c3.number_input("δ", min_value=1e-15, max_value=0.5, step=1e-6, format="%.2e", key=K + "delta")
    with st.expander("Data bounds, class-centric mixing and PLD precision"):
        b1, b2, b3 = st.columns(3)
        b1.number_input("dx — feature dimension ([0,1]^dx, DPMix)", min_value=1, max_value=10**7, step=1, key=K + "dx")
        b1.number_input("dy — label dimension ([0,1]^dy, DPMix)", min_value=1, max_value=10**6, step=1, key=K + "dy")
        b2.number_input("c — L2 clip (DP-CDA, z-scored)", min_value=1e-6, step=0.1, key=K + "clip")
        b2.number_input("Cx — feature clip (DPFMix)", min_value=1e-6, step=0.1, key=K + "clip_x")
        b2.number_input("Cy — label clip (DPFMix)", min_value=1e-6, step=0.1, key=K + "clip_y")
        b3.checkbox("Class-centric mixing (ℓ records of one class)", key=K + "class_centric")
        b3.number_input("K equal classes", min_value=1, max_value=10**5, step=1, key=K + "classes")
        b3.checkbox("Neighbours may differ in a label", key=K + "label_change")
        b3.slider(
            "PLD relative accuracy (smaller = finer grid, slower)", 0.02, 1.0, step=0.02, key=K + "pld_accuracy"
        )
    ss = st.session_state
    ratio = ss[K + "ratio"]
    st.caption(f"σy = λ·σx = {ratio * ss[K + 'sigma_x']:.4g}")
    try:
        classes = ss[K + "classes"]
        class_sizes = None
        if ss[K + "class_centric"]:
            if ss[K + "n"] % classes:
                raise ValueError(f"n = {ss[K + 'n']} does not split into K = {classes} equal classes.")
            class_sizes = (ss[K + "n"] // classes,) * classes
        setting = MixingSetting(
            n=ss[K + "n"], l=ss[K + "l"], T=ss[K + "T"], sigma_x=ss[K + "sigma_x"],
            sigma_y=ratio * ss[K + "sigma_x"], dx=ss[K + "dx"], dy=ss[K + "dy"], clip=ss[K + "clip"],
            clip_x=ss[K + "clip_x"], clip_y=ss[K + "clip_y"], class_sizes=class_sizes,
            label_may_change=ss[K + "label_change"],
        )
        if class_sizes is not None:
            get_accountant("lee2019").release_for(setting)  # validates l against the class size
    except ValueError as exc:
        st.error(str(exc))
        return None, ss[K + "delta"]
    return setting, ss[K + "delta"]


def _table(setting: MixingSetting, delta: float) -> None:
    table = cached_table(setting, delta, st.session_state[K + "pld_accuracy"])
    st.dataframe(
        table.drop(columns=["epsilon", "reference"]),
        hide_index=True,
        width="stretch",
        column_config={"assumptions": st.column_config.TextColumn(width="large")},
    )
    lines = [
        f"- **{row['ε']}** ({row['accountant']}) for {row['assumptions']}: {odds_ratio_text(row['epsilon'])}."
        for _, row in tightest_guarantees(table).iterrows()
    ]
    st.info(
        f"Tightest guaranteed ε at δ = {delta:.2g}, per release model (rows with different assumptions "
        "describe different releases and are not interchangeable):\n" + "\n".join(lines)
    )


def _curves(setting: MixingSetting, delta: float) -> None:
    ratio = st.session_state[K + "ratio"]
    labels = {"σx": "sigma", "T": "T", "ℓ": "l"}
    choice = st.radio("ε as a function of", list(labels), horizontal=True, key=K + "axis")
    axis = labels[choice]
    curves = cached_curves(setting, delta, axis, ratio, st.session_state[K + "pld_accuracy"])
    current = {"sigma": setting.sigma_x, "T": setting.T, "l": setting.l}[axis]
    st.plotly_chart(epsilon_curve_figure(curves, axis, delta=delta, current=current), width="stretch")
    st.caption("Solid: rigorous upper bounds. Dashed: the CLT approximation. Missing points: ε = ∞ (no noise).")


def _calibrate(setting: MixingSetting, delta: float) -> None:
    with st.form(K + "calibrate_form"):
        c1, c2 = st.columns(2)
        target = c1.number_input("Target ε", min_value=1e-3, value=2.0, step=0.5, key=K + "target")
        name = c2.selectbox("Accountant", list(ACCOUNTANTS), key=K + "cal_accountant")
        submitted = st.form_submit_button("Calibrate σ")
    if not submitted:
        return
    ratio = st.session_state[K + "ratio"]
    if ratio <= 0:
        st.error("λ must be > 0 to calibrate.")
        return
    try:
        cal = cached_calibration(name, setting, target, delta, ratio)
    except ValueError as exc:
        st.error(str(exc))
        return
    st.success(
        f"{name}: σx = **{cal.sigma_x:.5g}**, σy = **{cal.sigma_y:.5g}** give ε = {format_epsilon(cal.result.epsilon)} "
        f"≤ {target:g} at δ = {delta:.2g} ({cal.result.guarantee})."
    )
    st.button("Use this σ above", on_click=_apply_calibrated, args=(cal.sigma_x,), key=K + "apply_sigma")


def _explanations() -> None:
    for info in accountant_info():
        with st.expander(f"{info.name} — {info.title} · {info.guarantee}"):
            st.write(info.explanation)
            st.latex(info.formula)
            st.caption(f"Sampling: {info.sampling}; adjacency: {info.adjacency}. Reference: {info.reference}.")


def _context() -> None:
    st.markdown(
        "**How to read ε.** Smaller is more private. Rough rule of thumb: ε ≤ 1 strong, ≤ 3 moderate, "
        "≤ 10 weak, above ~20 little formal protection. δ is the small probability that the guarantee fails; "
        "keep it well below 1/n."
    )
    st.dataframe(
        pd.DataFrame([{"who": d.who, "ε": d.epsilon, "what": d.what} for d in DEPLOYMENTS]),
        hide_index=True,
        width="stretch",
    )
    st.caption("Published values for context only: local vs central DP and per-day vs total budgets differ in meaning.")


_init_state()
st.title("Privacy accountant")
st.write(
    "How much privacy does a mixed synthetic dataset give? Set the release below; every accountant "
    "answers with ε, the assumptions it makes, and whether its number is a guarantee."
)
setting, delta = _controls()
if setting is not None:
    st.session_state["shared_release"] = {  # plain key: survives page switches (widget state does not)
        "page": "Privacy accountant", "n": setting.n, "l": setting.l, "T": setting.T,
        "sigma_x": setting.sigma_x, "sigma_y": setting.sigma_y, "delta": delta,
    }
    _table(setting, delta)
    tab_curves, tab_cal, tab_explain, tab_context = st.tabs(
        ["Curves", "Calibrate σ for a target ε", "What each accountant does", "What ε means"]
    )
    with tab_curves:
        _curves(setting, delta)
    with tab_cal:
        _calibrate(setting, delta)
    with tab_explain:
        _explanations()
    with tab_context:
        _context()
