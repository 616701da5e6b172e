"""Page "Privacy accountant": epsilon of a mixing release under every accountant, live."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pandas as pd
import streamlit as st

from app_pages.shared.widgets import (
    chart,
    controls_area,
    count_box,
    delta_box,
    headline_area,
    keep_state,
    real_check,
    table_download,
)
from dpmix_core.privacy.accountants import MixingSetting, equal_class_sizes, get_accountant
from dpmix_core.privacy.budget import compose_budget, mixing_item
from dpmix_core.privacy.calibration import calibrate_sigma, max_points
from dpmix_core.privacy.release import PRIVATE_NORMALISATION
from dpmix_core.privacy.statement import privacy_statement
from dpmix_core.views.accounting_presets import ACCOUNTING_PRESETS
from dpmix_core.views.background import shared_background
from dpmix_core.views.budget import (
    budget_table,
    dp_pca_budget_item,
    dpsgd_budget_item,
    label_budget_item,
    ranges_budget_item,
)
from dpmix_core.views.exports import latex_text
from dpmix_core.views.figures import CURVE_CAPTION, epsilon_curve_figure, fdp_tradeoff_figure, profile_figure
from dpmix_core.views.html_report import accountant_report
from dpmix_core.views.inputs import format_count, format_real
from dpmix_core.views.privacy_scale import DEPLOYMENTS, format_epsilon, headline
from dpmix_core.views.release_card import card_data_note, read_card_upload, with_card_data
from dpmix_core.views.reports import (
    NO_ACCOUNTANT,
    RELEASE_MODELS,
    ReleaseReading,
    accountant_info,
    curve_anchor,
    curve_waiting_text,
    epsilon_curves,
    epsilon_table,
    model_accountants,
    no_headline_text,
    release_reading,
)
from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

K = "acc_"  # session-state prefix of this page's widgets
SOLVE_SIGMA, SOLVE_T = "σ (least noise for this T)", "T (most points at this σ)"
DEFAULTS = {
    "n": "60000",  # counts and delta are typed as text: 1e9 and 1.5e-5 parse exactly, nothing is clamped
    "l": "256",
    "T": "10000",
    "sigma_x": 0.0711,
    "ratio": 1.0,
    "delta": "1e-05",
    "dx": "784",
    "dy": "10",
    "clip": 1.0,
    "clip_x": 1.0,
    "clip_y": 1.0,
    "class_centric": False,
    "classes": "10",
    "protect_labels": True,
    "private_norm": False,
    "pld_accuracy": 0.2,
    "b_sgd_n": "60000",  # the budget's DP-SGD item (kept while another kind of item is shown)
    "b_sgd_b": "256",
}


@st.cache_data(show_spinner=False, max_entries=512)
def cached_table(setting: MixingSetting, delta: float, pld_accuracy: float, model: str) -> pd.DataFrame:
    return epsilon_table(setting, delta, pld_accuracy=pld_accuracy, model=model)


@st.cache_data(show_spinner="Calibrating…", max_entries=128)
def cached_calibration(name: str, setting: MixingSetting, target: float, delta: float, ratio: float):
    return calibrate_sigma(get_accountant(name), setting, target_epsilon=target, delta=delta, sigma_ratio=ratio)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_model_accountants(setting: MixingSetting, model: str) -> dict[str, MixingSetting]:
    return model_accountants(setting, model)


@st.cache_data(show_spinner="Searching T…", max_entries=64)
def cached_point_budget(name: str, setting: MixingSetting, target: float, delta: float):
    return max_points(get_accountant(name), setting, target_epsilon=target, delta=delta)


def _init_state() -> None:
    keep_state({K + key: value for key, value in DEFAULTS.items()})


def _setting_values(s: MixingSetting, *, sigma_ratio: float, delta: float, model: str) -> dict:
    """The controls' values (by key, without the prefix) that describe ``s``."""
    return {
        "n": format_count(s.n),
        "l": format_count(s.l),
        "T": format_count(s.T),
        "sigma_x": s.sigma_x,
        "ratio": sigma_ratio,
        "delta": format_real(delta),
        "dx": format_count(s.dx),
        "dy": format_count(s.dy),
        "clip": s.clip or 1.0,
        "clip_x": s.clip_x,
        "clip_y": s.clip_y,
        "class_centric": s.class_sizes is not None,
        "classes": format_count(len(s.class_sizes or ()) or 10),
        "protect_labels": s.protect_labels,
        "private_norm": s.not_covered is not None,
        "model": model,
    }


def _apply_preset() -> None:
    preset = ACCOUNTING_PRESETS.get(st.session_state[K + "preset"])
    if preset is None:
        return
    s = preset.setting
    st.session_state.pop(K + "card", None)  # a preset replaces a loaded card
    values = _setting_values(s, sigma_ratio=preset.sigma_ratio, delta=preset.delta, model=preset.release_model)
    if preset.target_epsilon is not None and preset.calibrate_with is not None:
        cal = cached_calibration(preset.calibrate_with, s, preset.target_epsilon, preset.delta, preset.sigma_ratio)
        values["sigma_x"] = cal.sigma_x
    for key, value in values.items():
        st.session_state[K + key] = value


def _load_card() -> None:
    """Uploader callback: the card's release into the controls (its class sizes and feature transform kept aside,
    :func:`with_card_data`), or its one-line reason under the uploader."""
    ss = st.session_state
    upload = ss.get(K + "card_file")
    ss.pop(K + "card", None)
    ss[K + "card_error"] = None
    if upload is None:
        return
    try:
        card = read_card_upload(upload.getvalue(), upload.name)
    except ValueError as exc:
        ss[K + "card_error"] = f"{upload.name}: {exc}"
        return
    values = _setting_values(card.setting, sigma_ratio=card.sigma_ratio, delta=card.delta, model=card.model)
    for key, value in values.items():
        ss[K + key] = value
    ss[K + "preset"] = "Custom"
    ss[K + "card"] = (upload.name, card.setting, card.chosen_note)


def _card_loader() -> None:
    with st.expander("Open a release's privacy card (FILE.card.json, or the release FILE.npz)"):
        st.file_uploader(
            "Privacy card or release",
            type=["json", "npz"],
            key=K + "card_file",
            on_change=_load_card,
            help="As synthesize and the Mixed samples page write them. The card must verify (its ε recomputed from "
            "its own parameters); its release then fills the controls, and every what-if starts from it.",
        )
        if err := st.session_state.get(K + "card_error"):
            st.error(err)


def _apply_calibrated(sigma_x: float) -> None:
    st.session_state[K + "sigma_x"] = sigma_x


def _apply_points(T: int) -> None:
    st.session_state[K + "T"] = format_count(T)


def _controls() -> tuple[MixingSetting | None, float]:
    _card_loader()
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
    n = count_box(c1, "n — records in the private dataset", K + "n", maximum=10**12)
    l = count_box(c1, "ℓ — records mixed per point (Poisson: expected m)", K + "l", maximum=10**9)
    T = count_box(c2, "T — synthetic points released", K + "T", maximum=10**12)
    c2.number_input("σx — feature noise std", step=0.01, format="%.4f", key=K + "sigma_x")
    sigma_x = real_check(c2, st.session_state[K + "sigma_x"], "σx", minimum=0.0)
    c3.number_input("λ = σy / σx", step=0.1, format="%.3f", key=K + "ratio")
    ratio = real_check(c3, st.session_state[K + "ratio"], "λ", minimum=0.0)
    delta = delta_box(c3, K + "delta")
    with st.expander("Data bounds, class-centric mixing and PLD precision"):
        b1, b2, b3 = st.columns(3)
        dx = count_box(b1, "dx — feature dimension ([0,1]^dx, DPMix)", K + "dx", maximum=10**9)
        dy = count_box(b1, "dy — label dimension ([0,1]^dy, DPMix)", K + "dy", maximum=10**7)
        # no min_value: a browser keeps the old value of an out-of-range entry; the release refuses it visibly
        b2.number_input("c — L2 clip (DP-CDA, z-scored)", step=0.1, key=K + "clip")
        b2.number_input("Cx — feature clip (DPFMix)", step=0.1, key=K + "clip_x")
        b2.number_input("Cy — label clip (DPFMix)", step=0.1, key=K + "clip_y")
        b3.checkbox("Class-centric mixing (ℓ records of one class)", key=K + "class_centric")
        classes = count_box(b3, "K — equal classes", K + "classes", maximum=10**6)
        b3.checkbox(
            "Protect labels (replace-one; off: DP-CDA's same-class swap, features only)",
            key=K + "protect_labels",
            help="Class-centric only. Off reproduces the DP-CDA paper's reading: a neighbour swaps a "
            "record within its class, so the record's label is not protected.",
        )
        b3.checkbox(
            "Normalised with statistics of the private data",
            key=K + "private_norm",
            help="e.g. z-scored with the private mean/std: one record then moves every released point, "
            "so no accountant covers the release; ε is shown for reference only.",
        )
        b3.slider("PLD relative accuracy (smaller = finer grid, slower)", 0.02, 1.0, step=0.02, key=K + "pld_accuracy")
    ss = st.session_state
    if None in (n, l, T, sigma_x, ratio, delta, dx, dy, classes):
        return None, 0.0  # the "invalid: …" message sits under its control; nothing computed from other inputs
    st.caption(f"σy = λ·σx = {ratio * sigma_x:.4g}")
    try:
        class_sizes = equal_class_sizes(n, classes) if ss[K + "class_centric"] else None
        setting = MixingSetting(
            n=n,
            l=l,
            T=T,
            sigma_x=sigma_x,
            sigma_y=ratio * sigma_x,
            dx=dx,
            dy=dy,
            clip=ss[K + "clip"],
            clip_x=ss[K + "clip_x"],
            clip_y=ss[K + "clip_y"],
            class_sizes=class_sizes,
            protect_labels=ss[K + "protect_labels"] or class_sizes is None,
            not_covered=PRIVATE_NORMALISATION if ss[K + "private_norm"] else None,
        )
        if (card := ss.get(K + "card")) is not None:
            setting, kept = with_card_data(setting, card[1])
            st.caption(card_data_note(card[0], setting, kept))
            if card[2]:  # chosen by a search, or bounds released with it: what covers everything published
                st.warning(card[2])
        if setting.class_sizes is not None:
            get_accountant("lee2019").release_for(setting)  # validates l against the class size
    except ValueError as exc:
        st.error(f"invalid: {exc}")
        return None, 0.0
    return setting, delta


@st.cache_data(show_spinner=False, max_entries=64)
def cached_reading(setting: MixingSetting, delta: float, model: str, pld_accuracy: float, with_curves: bool = False):
    return release_reading(setting, delta, model, pld_accuracy=pld_accuracy, with_curves=with_curves)


def _headline(setting: MixingSetting, delta: float) -> ReleaseReading | None:
    """One headline for the release model the user picks: its tightest rigorous ε, in words."""
    model = st.radio(
        "Release model",
        list(RELEASE_MODELS),
        format_func=RELEASE_MODELS.get,
        key=K + "model",
        horizontal=False,
        help="Rows of the table below with other assumptions describe other releases; the headline speaks for one.",
    )
    if setting.not_covered is not None:
        st.warning(
            f"No ε on this page is an upper bound for this release — not covered: {setting.not_covered}. "
            "Use public normalisation constants (or [0,1] features) for a release the accountants cover."
        )
        return None
    reading = cached_reading(setting, delta, model, st.session_state[K + "pld_accuracy"])
    if reading.accountant is None:
        st.warning(no_headline_text(reading))
        return reading
    h = headline(reading.epsilon, delta, reading.accountant)
    c1, c2 = headline_area("epsilon").columns([1, 3], vertical_alignment="center")
    c1.metric(f"ε at δ = {delta:.2g}", h.epsilon_text, help=f"{reading.accountant}, {reading.guarantee}, rounded up")
    c2.markdown(
        f"**{h.title}** ({reading.accountant}, {reading.guarantee}).  \n{h.odds[0].upper() + h.odds[1:]}; {h.test}."
    )
    return reading


def _table(setting: MixingSetting, delta: float) -> None:
    table = cached_table(setting, delta, st.session_state[K + "pld_accuracy"], st.session_state[K + "model"])
    shown = table.drop(columns=["epsilon", "reference", "upper_bound"])
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_config={
            "assumptions": st.column_config.TextColumn(width="large"),
            "ε": st.column_config.TextColumn(width="medium"),
        },
    )
    st.caption(
        "Every accountant, each on the release its paper analyses (column 'release analysed'): the chosen "
        "release model's rows come first; the others bound another release (other sampling or data bounds), "
        "not this one, and say so."
    )
    table_download(table.drop(columns=["ε"]), K + "table", "dpmix_epsilon_table")


def _attacker(setting: MixingSetting, reading: ReleaseReading | None, delta: float) -> None:
    if reading is None or reading.accountant is None:
        st.info("No rigorous bound, so no guarantee about attacks on this release.")
        return
    if not st.toggle(
        "Show the attacker's curves (recomputed on every change, about 0.3 s)", value=False, key=K + "attacker"
    ):
        return
    reading = cached_reading(setting, delta, reading.model, st.session_state[K + "pld_accuracy"], True)
    if reading.profile is None:
        return
    st.markdown(
        'What the best possible attacker can do. Asked *"was this person\'s record used?"*, every test '
        "trades false alarms (α) against misses (β); differential privacy keeps β above the red curve. "
        "The closer to the dotted diagonal, the closer to a coin flip."
    )
    c1, c2 = st.columns(2)
    settings = _settings(setting, delta)
    with c1:
        chart(
            fdp_tradeoff_figure(
                reading.alphas,
                reading.beta_bound,
                reading.gdp_beta,
                mu=reading.gdp_mu,
                title="Trade-off curve of the best membership test",
            ),
            K + "chart_tradeoff",
            settings,
        )
    with c2:
        chart(
            profile_figure(
                reading.profile.epsilons,
                reading.profile.deltas,
                delta=delta,
                epsilon=reading.epsilon,
                title="Privacy profile δ(ε)",
            ),
            K + "chart_profile",
            settings,
        )
    st.caption(
        f"Curves from the release's {reading.profile.method}; the headline ε comes from "
        f"{reading.accountant}. Gaussian DP with the same δ at that ε is shown for reference."
    )


@st.fragment(run_every=0.4)
def _wait_for_curve(key: tuple, along: str) -> None:
    """Polls while the curve is computed in the background; a full (cached, fast) rerun draws it, or asks
    again if the request is no longer known (dropped as least recently used while many sessions asked)."""
    background = shared_background()
    if background.ready(key) or not background.known(key):
        st.rerun()
    st.info(curve_waiting_text(along, background.ahead_of(key)))


def _curves(setting: MixingSetting, delta: float) -> None:
    ratio = st.session_state[K + "ratio"]
    pld_accuracy = st.session_state[K + "pld_accuracy"]
    labels = {"σx": "sigma", "T": "T", "ℓ": "l"}
    choice = st.radio("ε as a function of", list(labels), horizontal=True, key=K + "axis")
    axis = labels[choice]
    # keyed by what the curve depends on: moving the knob within a decade only moves the marker; a new curve
    # is computed in the background worker process, so the table and headline above never wait for it
    anchor = curve_anchor(setting, axis)
    model = st.session_state[K + "model"]
    key = ("epsilon_curves", anchor, delta, axis, ratio, pld_accuracy, model)
    session = st.session_state.setdefault(K + "session", uuid.uuid4().hex)  # this browser tab, for the queue
    future = shared_background().request(
        key,
        epsilon_curves,
        anchor,
        delta,
        axis=axis,
        sigma_ratio=ratio,
        pld_accuracy=pld_accuracy,
        model=model,
        group=session,
    )
    if not future.done():
        with st.container(height=450, border=True):
            _wait_for_curve(key, choice)
        return
    if (error := future.exception()) is not None:
        st.error(f"The curve could not be computed: {error}")
        return
    current = {"sigma": setting.sigma_x, "T": setting.T, "l": setting.l}[axis]
    chart(
        epsilon_curve_figure(future.result(), axis, delta=delta, current=current),
        K + "chart_curve",
        _settings(setting, delta),
    )
    st.caption(CURVE_CAPTION)


def _settings(setting: MixingSetting, delta: float) -> dict:
    """What a chart of this release shows, printed under it when presenting."""
    return {
        "n": setting.n,
        "ℓ": setting.l,
        "T": setting.T,
        "σx": setting.sigma_x,
        "σy": setting.sigma_y,
        "δ": delta,
        "class-centric": setting.class_sizes is not None,
    }


def _add_to_budget(item) -> None:
    st.session_state.setdefault(K + "budget", [])
    st.session_state[K + "budget"] = [*st.session_state[K + "budget"], item]


def _budget(reading: ReleaseReading | None, delta: float) -> None:
    st.markdown(
        "Releasing the same dataset more than once spends privacy each time. Add this release and the "
        "others you made from the same records; the total is their exact composition (Rényi DP), "
        "not the sum of the ε's."
    )
    items = st.session_state.get(K + "budget", [])
    if reading is not None and reading.release is not None:
        name = (
            f"{RELEASE_MODELS[reading.model].split(' (')[0]}: ℓ = {reading.release.mix_degree}, "
            f"T = {reading.release.num_points:,}, σx = {reading.release.sigma_x:.3g}"
        )
        st.button(
            "Add this release to the budget",
            key=K + "budget_add",
            on_click=lambda: _add_to_budget(mixing_item(name, reading.release)),
        )
    with st.expander("Add another kind of release of the same data"):
        kind = st.radio(
            "Kind",
            ["DP-PCA", "label-only Laplace", "DP-SGD model", "private feature ranges"],
            horizontal=True,
            key=K + "b_kind",
            help="Private feature ranges: the noisy histograms a table's release spends a share of its ε on where "
            "only loose public bounds are known (Narrow the bounds privately; --private-ranges).",
        )
        b1, b2, b3, b4 = st.columns(4)
        try:
            if kind == "DP-PCA":
                e = b1.number_input("ε", min_value=1e-3, max_value=1e3, value=1.0, key=K + "b_pca_eps")
                item = dp_pca_budget_item(epsilon=e, delta=delta)
            elif kind == "label-only Laplace":
                e = b1.number_input("ε", min_value=1e-3, max_value=1e3, value=1.0, key=K + "b_lab_eps")
                item = label_budget_item(epsilon=e)
            elif kind == "private feature ranges":
                e = b1.number_input("ε of the ranges", min_value=1e-3, max_value=1e3, value=0.1, key=K + "b_rng_eps")
                release = None if reading is None else reading.release  # the ranges go with it: its adjacency
                item = ranges_budget_item(epsilon=e, delta=delta, release=release)
            else:
                n = count_box(b1, "n — training records", K + "b_sgd_n", maximum=10**9)
                b = count_box(b2, "batch size", K + "b_sgd_b", maximum=10**7)
                ep = b3.number_input("epochs", min_value=1, max_value=1000, value=10, key=K + "b_sgd_e")
                z = b4.number_input("noise multiplier z", min_value=0.1, max_value=100.0, value=1.0, key=K + "b_sgd_z")
                # a refused count ("invalid: ..." under its box) offers nothing to add
                item = (
                    None
                    if n is None or b is None
                    else dpsgd_budget_item(n=n, batch_size=b, epochs=ep, noise_multiplier=z)
                )
        except ValueError as exc:
            st.error(str(exc))
        else:
            if item is not None:
                st.button(f"Add: {item.name}", key=K + "budget_add_other", on_click=lambda: _add_to_budget(item))
    if not items:
        st.caption("The budget is empty.")
        return
    try:
        budget = cached_budget(items, tuple(repr(i) for i in items), delta)
    except ValueError as exc:
        st.error(str(exc))
        return
    st.metric(
        f"Total ε at δ = {delta:.2g} for {budget.relation} adjacency", format_epsilon(budget.epsilon, upper_bound=True)
    )
    st.dataframe(budget_table(budget), hide_index=True, width="stretch")
    table_download(budget_table(budget), K + "budget_table", "dpmix_privacy_budget")
    for note in budget.notes:
        st.warning(note)
    st.button("Clear the budget", key=K + "budget_clear", on_click=lambda: st.session_state.pop(K + "budget", None))


@st.cache_data(show_spinner="Composing…", max_entries=64)
def cached_budget(_items: list, items_key: tuple[str, ...], delta: float):
    return compose_budget(_items, delta)


@st.cache_data(show_spinner="Writing the report…", max_entries=8)
def cached_report(setting: MixingSetting, delta: float, model: str, pld_accuracy: float) -> str:
    return accountant_report(setting, delta, model, pld_accuracy=pld_accuracy)


def _report(setting: MixingSetting, delta: float) -> None:
    st.subheader("Share")
    if st.button(
        "Prepare a one-file HTML report (settings, plain-language reading, privacy statement, table, figures)",
        key=K + "report",
    ):
        page = cached_report(setting, delta, st.session_state[K + "model"], st.session_state[K + "pld_accuracy"])
        st.download_button(
            "Download the report (.html, opens offline)",
            data=page.encode(),
            file_name="dpmix_privacy_report.html",
            mime="text/html",
            key=K + "report_download",
        )


def _calibrate(setting: MixingSetting, delta: float) -> None:
    model = st.session_state[K + "model"]
    analysed = cached_model_accountants(setting, model)
    if not analysed:
        st.info(f"Nothing to calibrate: {NO_ACCOUNTANT}.")
        return
    st.caption(f"For the chosen release model: {RELEASE_MODELS[model]}.")
    with st.form(K + "calibrate_form"):
        c1, c2, c3 = st.columns(3)
        target = c1.number_input("Target ε", min_value=1e-3, value=2.0, step=0.5, key=K + "target")
        name = c2.selectbox(
            "Accountant",
            list(analysed),
            key=f"{K}cal_accountant_{model}",  # one box per model: another model's pick is never shown here
            help="The accountants of the chosen release model (pick another model above for the others).",
        )
        solve_for = c3.radio(
            "Solve for",
            [SOLVE_SIGMA, SOLVE_T],
            key=K + "solve_for",
            help="σ: the least noise for this T. T: the most points this noise allows (σ, n, ℓ as set above).",
        )
        submitted = st.form_submit_button("Solve")
    if not submitted:
        return
    setting = analysed[name]  # the what-if as this accountant analyses the chosen model's release
    if solve_for == SOLVE_T:
        _solve_points(name, setting, target, delta)
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
        f"{name}: σx = **{cal.sigma_x:.5g}**, σy = **{cal.sigma_y:.5g}** give ε = {format_epsilon(cal.result.epsilon, upper_bound=cal.result.upper_bound)} "
        f"≤ {target:g} at δ = {delta:.2g} ({cal.result.guarantee})."
    )
    st.button("Use this σ above", on_click=_apply_calibrated, args=(cal.sigma_x,), key=K + "apply_sigma")


def _solve_points(name: str, setting: MixingSetting, target: float, delta: float) -> None:
    try:
        budget = cached_point_budget(name, replace(setting, T=1), target, delta)  # cached without the T it finds
    except ValueError as exc:
        st.error(str(exc))
        return
    st.success(
        f"{name}: at σx = {setting.sigma_x:.4g}, σy = {setting.sigma_y:.4g} at most **T = {budget.T:,}** points "
        f"keep ε = {format_epsilon(budget.result.epsilon, upper_bound=budget.result.upper_bound)} ≤ {target:g} at δ = {delta:.2g} "
        f"({budget.result.guarantee})."
    )
    for note in (budget.note, budget.result.reason):
        if note:
            st.caption(f"Note: {note}.")
    st.button("Use this T above", on_click=_apply_points, args=(budget.T,), key=K + "apply_T")


def _statement(reading: ReleaseReading | None) -> None:
    if reading is None or reading.result is None or reading.release is None:
        st.info("No accountant gives a rigorous bound for this release model: there is no guarantee to state.")
        return
    st.markdown(
        "A paragraph for a paper's methods section or a data-release note: the headline's release (the release "
        "model chosen above) and its accountant's guarantee, in words. Copy it with the icon at its corner."
    )
    text = privacy_statement(reading.release, reading.result)
    st.code(text, language=None, wrap_lines=True)
    with st.container(horizontal=True):
        st.download_button(
            "Statement (text)",
            text.encode(),
            "privacy_statement.txt",
            "text/plain",
            key=K + "stmt_txt",
            on_click="ignore",
        )
        st.download_button(
            "Statement (LaTeX)",
            latex_text(text).encode(),
            "privacy_statement.tex",
            "text/x-tex",
            key=K + "stmt_tex",
            on_click="ignore",
        )


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
    deployments = pd.DataFrame([{"who": d.who, "ε": d.epsilon, "what": d.what} for d in DEPLOYMENTS])
    st.dataframe(deployments, hide_index=True, width="stretch")
    table_download(deployments, K + "deployments", "published_epsilons")
    st.caption("Published values for context only: local vs central DP and per-day vs total budgets differ in meaning.")


_init_state()
st.title("Privacy accountant")
st.write(
    "How much privacy does a mixed synthetic dataset give? Set the release below; every accountant "
    "answers with ε, the assumptions it makes, and whether its number is a guarantee."
)
with controls_area():
    setting, delta = _controls()
if setting is not None:
    st.session_state[SHARED_RELEASE_KEY] = SharedRelease.of_model(  # the headline's release model
        "Privacy accountant", setting, delta, st.session_state.get(K + "model", "dpmix")
    )
    reading = _headline(setting, delta)
    _table(setting, delta)
    tab_curves, tab_attack, tab_budget, tab_cal, tab_statement, tab_explain, tab_context = st.tabs(
        [
            "Curves",
            "What an attacker can do",
            "Privacy budget",
            "Calibrate σ or T for a target ε",
            "Privacy statement",
            "What each accountant does",
            "What ε means",
        ]
    )
    with tab_budget:
        _budget(reading, delta)
    with tab_curves:
        _curves(setting, delta)
    with tab_attack:
        _attacker(setting, reading, delta)
    with tab_cal:
        _calibrate(setting, delta)
    with tab_statement:
        _statement(reading)
    with tab_explain:
        _explanations()
    with tab_context:
        _context()
    _report(setting, delta)
