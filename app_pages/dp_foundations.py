"""Page "DP foundations": sensitivity, Laplace vs Gaussian, Analyze-Gauss DP-PCA — live teaching demos on MNIST."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.shared.widgets import chart, keep_state, loaded_or_stop, table_download
from dpmix_core.data import Dataset, default_dataset
from dpmix_core.teaching import (
    BOUNDS_HIGHS,
    CLIPPED_MODELS,
    EFFECT_MODELS,
    LABEL_ADJACENCY,
    REPLACE_ONE_LONG,
    BoundsLesson,
    HistogramComparison,
    LabelChangeExample,
    MeanImageComparison,
    MixingEffects,
    PCAComparison,
    bounds_figure,
    bounds_lesson,
    dp_histograms,
    dp_mean_images,
    effect_model,
    gaussian_method_for,
    histogram_figure,
    label_accuracy_figure,
    label_change_example,
    label_noise_scale,
    label_noise_scales,
    label_release_accuracy,
    label_scale_figure,
    mean_images_figure,
    mixing_effects,
    mixing_effects_figure,
    noise_std,
    pca_comparison,
    pca_grid_figure,
    release_table,
    survey_ages,
)
from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

K = "fnd_"  # session-state prefix of this page's widgets
DEFAULTS = {
    "seed": 0,
    "old_label": 3,
    "new_label": 8,
    "label_eps": 1.0,
    "eps": 2.0,
    "delta": 1e-5,
    "calibration": "auto",
    "digit": 3,
    "mix_model": "poisson",
    "bounds_n": 1000,
    "bounds_eps": 1.0,
    "bounds_share": 0.1,
}
# where the mixing lesson starts for each release model: a published release
UNIT_CLIP = {"mix_cx": 1.0, "mix_cy": 1.0}
MIX_STARTS = {
    "poisson": {
        "mix_n": 60000,
        "mix_m": 64,
        "mix_T": 60000,
        "mix_sx": 0.0263,
        "mix_sy": 0.0263,
        "mix_delta": 1e-5,
        **UNIT_CLIP,
    },
    "without-replacement": {
        "mix_n": 60000,
        "mix_m": 256,
        "mix_T": 10000,
        "mix_sx": 0.0711,
        "mix_sy": 0.0711,
        "mix_delta": 1 / 60000,
    },
    "without-replacement-clipped": {
        "mix_n": 60000,
        "mix_m": 64,
        "mix_T": 60000,
        "mix_sx": 0.0581,
        "mix_sy": 0.0581,
        "mix_delta": 1e-5,
        **UNIT_CLIP,
    },
}  # DPFMix Table 3 (pld-poisson eps = 1 at delta = 1e-5); thesis 4.1 (lee2019 eps = 15 at delta = 1/n); DPFMix
# Table 1's uniform row on clipped records (rdp-wor eps = 2 at delta = 1e-5, the accountant page's preset)
MIX_START_TEXT = {
    "poisson": "DPFMix Table 3's release (MNIST, m = 64, T = 60,000, noise calibrated to ε = 1 with pld-poisson)",
    "without-replacement": "the thesis §4.1 release (MNIST pixels, ℓ = 256, T = 10,000, σ = 0.0711: ε = 15 by lee2019)",
    "without-replacement-clipped": "DPFMix Table 1's uniform row on records clipped to ‖x‖, ‖y‖ ≤ 1 (MNIST, m = 64, "
    "T = 60,000, σ = 0.0581: ε = 2 by rdp-wor)",
}


LABEL_EPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
CURVE_EPS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
STAT_EPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
DELTAS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)
CALIBRATIONS = {
    "auto": "auto: classic if ε < 1, else analytic",
    "classic": "classic (Dwork & Roth; ε < 1 only)",
    "analytic": "analytic (Balle & Wang 2018)",
}
PCA_EPS, PCA_DELTA, PCA_K, PCA_MAX = (10.0, 2.0, 0.1), 1e-5, 10, 5000
MIX_M = (1, 4, 16, 64, 256, 1024, 4096)
MIX_T = (1, 10, 100, 1000, 10000, 60000, 600000)
SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


@st.cache_resource(show_spinner="Loading the dataset…", max_entries=1)
def load_data() -> Dataset:
    return default_dataset()


@st.cache_data(show_spinner=False, max_entries=128)
def cached_example(old: int, new: int, num_classes: int) -> LabelChangeExample:
    return label_change_example(old, new, num_classes)


@st.cache_data(show_spinner=False, max_entries=8)
def cached_scales(num_classes: int) -> pd.DataFrame:
    return label_noise_scales(CURVE_EPS, num_classes)


@st.cache_data(show_spinner="Adding Laplace noise to the labels…", max_entries=64)
def cached_accuracy(seed: int) -> pd.DataFrame:
    ds = load_data()
    return label_release_accuracy(ds.y_train, num_classes=ds.num_classes, epsilons=CURVE_EPS, seed=seed)


@st.cache_data(show_spinner="Computing DP mean images…", max_entries=128)
def cached_mean_images(digit: int, eps: float, delta: float, calibration: str, seed: int) -> MeanImageComparison:
    ds = load_data()
    return dp_mean_images(
        ds.x_train,
        ds.y_train,
        label=digit,
        epsilon=eps,
        delta=delta,
        calibration=calibration,
        num_classes=ds.num_classes,
        seed=seed,
    )


@st.cache_data(show_spinner=False, max_entries=128)
def cached_histograms(eps: float, delta: float, calibration: str, seed: int) -> HistogramComparison:
    ds = load_data()
    return dp_histograms(
        ds.y_train, num_classes=ds.num_classes, epsilon=eps, delta=delta, calibration=calibration, seed=seed
    )


@st.cache_data(show_spinner="Running Analyze-Gauss DP-PCA…", max_entries=32)
def cached_pca(seed: int) -> PCAComparison:
    return pca_comparison(
        load_data().x_train, epsilons=PCA_EPS, num_components=PCA_K, delta=PCA_DELTA, max_samples=PCA_MAX, seed=seed
    )


def _init_state() -> None:
    keep_state({K + key: value for key, value in DEFAULTS.items()})
    keep_state({K + key: value for key, value in (UNIT_CLIP | MIX_STARTS[st.session_state[K + "mix_model"]]).items()})


def _mix_model_changed() -> None:
    """Switching the release model starts again at that model's published release."""
    for key, value in MIX_STARTS[st.session_state[K + "mix_model"]].items():
        st.session_state[K + key] = value


def _new_draw() -> None:
    st.session_state[K + "seed"] = int(st.session_state[K + "seed"]) + 1


def _header(ds: Dataset) -> int:
    shape = "×".join(str(s) for s in ds.x_train.shape[1:])
    st.info(
        f"**Data:** {ds.source}. **n = {ds.n_train:,}** training images of {shape} pixels, "
        f"{ds.num_classes} classes. Every number on this page is computed on these images (lesson 5's on synthetic "
        "ages)."
    )
    c1, c2, c3 = st.columns([1.2, 1.2, 3.6], vertical_alignment="bottom")
    c1.number_input(
        "Noise seed",
        min_value=0,
        step=1,
        key=K + "seed",
        help="The same seed reproduces every noisy draw on this page.",
    )
    c2.button(
        "New draw",
        key=K + "new_draw",
        icon=":material/casino:",
        on_click=_new_draw,
        help="Seed + 1: fresh noise everywhere.",
    )
    c3.caption("All noise below is drawn from this seed: a demo is reproducible, and *New draw* shows another outcome.")
    return int(st.session_state[K + "seed"])


def _labels_section(ds: Dataset, seed: int) -> None:
    k = ds.num_classes
    st.header("1 · Sensitivity: why one-hot labels need less noise")
    st.markdown(
        "The **sensitivity** Δf is the most one person can move the output: "
        "Δf = max ‖f(D) − f(D′)‖₁ over neighbouring datasets D, D′. The **Laplace mechanism** adds noise "
        "Lap(b) with scale **b = Δf / ε** to every coordinate and is ε-DP. Here the images are public and "
        "only the labels are private (*label DP*): neighbours differ in one person's label, so **how the label "
        "is written down sets Δf**."
    )
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.subheader("Worked example: one person's label changes")
        a, b = st.columns(2)
        a.selectbox("True label", list(range(k)), key=K + "old_label")
        b.selectbox("…changed to", list(range(k)), key=K + "new_label")
        try:
            ex = cached_example(st.session_state[K + "old_label"], st.session_state[K + "new_label"], k)
        except ValueError as exc:
            st.error(str(exc))
        else:
            st.dataframe(ex.table(), hide_index=True, width="stretch")
            table_download(ex.table(), K + "label_example", "label_change_example")
            st.markdown(
                f"- **One-hot:** a 1 becomes 0 and a 0 becomes 1, so the L1 distance is **2 for every pair of "
                f"classes** → Δf = {ex.one_hot_sensitivity:g}.\n"
                f"- **A number 0…{k - 1}:** here |{ex.old_label} − {ex.new_label}| = {ex.number_distance:g}, but "
                f"DP must cover the worst pair (0 ↔ {k - 1}) → Δf = **{ex.number_sensitivity:g}**."
            )
    with right:
        st.subheader("Noise for your ε")
        eps = st.select_slider(
            "ε (privacy budget)", options=LABEL_EPS, key=K + "label_eps", format_func=lambda e: f"{e:g}"
        )
        b_hot = label_noise_scale(eps, "one-hot", k)
        b_num = label_noise_scale(eps, "regression", k)
        m1, m2 = st.columns(2)
        m1.metric("One-hot: b = 2/ε", f"{b_hot:.3g}")
        m2.metric(
            f"Regression: b = {k - 1}/ε",
            f"{b_num:.3g}",
            delta=f"×{b_num / b_hot:.3g} the noise",
            delta_color="inverse",
        )
        st.caption(
            f"At ε = {eps:g} each of the {k} one-hot coordinates gets Laplace noise of scale {b_hot:.3g}; "
            f"the single number label gets scale {b_num:.3g} on a 0…{k - 1} range. "
            f"Both are pure ε-DP for the labels; adjacency: {LABEL_ADJACENCY}."
        )
    c1, c2 = st.columns(2)
    settings = {"ε": eps, "classes": k, "training labels": ds.n_train, "seed": seed}
    with c1:
        chart(label_scale_figure(cached_scales(k), current=eps), K + "chart_label_scale", settings)
    with c2:
        chart(label_accuracy_figure(cached_accuracy(seed), current=eps, n=ds.n_train), K + "chart_label_acc", settings)
    st.caption(
        f"Right: `laplace_label_release` on all {ds.n_train:,} training labels at each ε (one draw, seed {seed}). "
        "One-hot labels are read back by argmax; number labels are clamped to the range and rounded. Both are "
        "post-processing, so ε is unchanged. A chance guess is right 10 % of the time."
    )


def _stats_controls(k: int) -> tuple[float, float, str, int]:
    c1, c2, c3, c4 = st.columns([3, 2, 3, 1.2], gap="medium")
    eps = c1.select_slider(
        "ε (same for both mechanisms)", options=STAT_EPS, key=K + "eps", format_func=lambda e: f"{e:g}"
    )
    delta = c2.select_slider("δ (Gaussian only)", options=DELTAS, key=K + "delta", format_func=lambda d: f"{d:.0e}")
    calibration = c3.radio(
        "Gaussian calibration",
        list(CALIBRATIONS),
        key=K + "calibration",
        format_func=CALIBRATIONS.get,
        help="The classic σ = Δ₂·√(2 ln(1.25/δ))/ε is only proven for ε < 1; the analytic Gaussian mechanism "
        "finds the smallest σ that gives (ε, δ)-DP for any ε.",
    )
    digit = c4.selectbox("Digit", list(range(k)), key=K + "digit")
    return eps, delta, calibration, digit


def _stats_section(ds: Dataset, seed: int) -> None:
    st.header("2 · Laplace vs Gaussian mechanism")
    st.markdown(
        "**Laplace** adds Lap(Δ₁/ε) per coordinate and gives **pure ε-DP** (δ = 0). **Gaussian** adds N(0, σ²) "
        "with σ set by the **L2** sensitivity Δ₂ and gives **(ε, δ)-DP**: the ε-guarantee may fail with "
        "probability δ. Same ε, two statistics of very different dimension:"
    )
    eps, delta, calibration, digit = _stats_controls(ds.num_classes)
    try:
        method = gaussian_method_for(eps, calibration)
        means = cached_mean_images(digit, eps, delta, calibration, seed)
        hist = cached_histograms(eps, delta, calibration, seed)
    except ValueError as exc:
        st.error(str(exc))
        return
    auto = " (auto: classic for ε < 1, analytic for ε ≥ 1, where the classic bound is not proven)"
    auto = auto if calibration == "auto" else ""
    st.caption(f"Gaussian σ certified by the **{method}** analysis{auto}. Noise seed {seed}.")
    name = ds.label_names[digit]
    st.subheader(f"(a) DP mean image of digit {name} — {means.dim:,} numbers")
    settings = {"ε": eps, "δ": delta, "Gaussian calibration": method, "digit": name, "seed": seed}
    chart(mean_images_figure(means, label_name=name), K + "chart_means", settings)
    lap_sd, gau_sd = noise_std(means.laplace.release), noise_std(means.gaussian.release)
    st.markdown(
        f"Noise std per pixel: Laplace **{lap_sd:.3g}** vs Gaussian **{gau_sd:.3g}**. For an average of n images "
        f"in [0, 1]ᵈ, Δ₁ = d/n grows with d but Δ₂ = √d/n only with √d: "
        f"**{'Gaussian' if gau_sd < lap_sd else 'Laplace'} adds less noise here**."
    )
    st.subheader(f"(b) DP class histogram — {ds.num_classes} numbers")
    chart(histogram_figure(hist, label_names=ds.label_names), K + "chart_hist", settings)
    lap_sd, gau_sd = noise_std(hist.laplace.release), noise_std(hist.gaussian.release)
    st.markdown(
        f"Noise std per count: Laplace **{lap_sd:.3g}** vs Gaussian **{gau_sd:.3g}**. Changing one label moves "
        f"one count down and another up: Δ₁ = 2 and Δ₂ = √2 are close in low dimension, and the Gaussian's "
        f"δ-calibration costs more than the L2 norm saves: **{'Laplace' if lap_sd < gau_sd else 'Gaussian'} adds "
        "less noise here**."
    )
    st.subheader("What was released, and with which guarantee")
    table = release_table(means.rows() + hist.rows())
    st.dataframe(
        table.drop(columns=["description"]),
        hide_index=True,
        width="stretch",
        column_config={
            "ε": st.column_config.NumberColumn(format="%g"),
            "noise std per coordinate": st.column_config.NumberColumn(format="%.4g"),
            "adjacency": st.column_config.TextColumn(width="large"),
        },
    )
    table_download(table, K + "release_table", "dp_releases")
    st.caption(
        f"Adjacency: {REPLACE_ONE_LONG}. Each guarantee holds by construction: the noise is calibrated to the "
        "sensitivity under that adjacency. Under add/remove-one adjacency the sensitivities would differ."
    )
    with st.expander("Exact release descriptions and processing notes (from dpmix_core)"):
        for text in table["description"]:
            st.markdown(f"- {text}")
        notes = {n for stat in (means.laplace, means.gaussian, hist.laplace, hist.gaussian) for n in stat.notes}
        st.caption("Processing: " + "; ".join(sorted(notes)) + ". Post-processing never changes ε or δ.")
        st.caption(
            f"The mean image is released for the images of class {name} only, treating their count as public; "
            "in a real release that count would itself need a share of the privacy budget (e.g. from the histogram)."
        )


def _pca_section(ds: Dataset, seed: int) -> None:
    st.header("3 · Analyze-Gauss DP-PCA")
    st.markdown(
        "Analyze-Gauss (Dwork, Talwar, Thakurta & Zhang 2014) releases the second-moment matrix A = XᵀX/n plus a "
        "symmetric Gaussian noise matrix; the principal components are the top eigenvectors of the noisy matrix "
        "(post-processing, so no extra privacy cost). Each row below is one release; the first row is exact PCA of "
        "the same matrix, for comparison."
    )
    pca = cached_pca(seed)
    sub = "all" if pca.n_used == pca.n_total else f"a fixed uniform subsample of {pca.n_used:,} of the {pca.n_total:,}"
    st.caption(
        f"Using {sub} training images (n = {pca.n_used:,}), δ = {PCA_DELTA:.0e}, noise seed {seed}. "
        "Calibration per row: classic for ε < 1, analytic (Balle & Wang 2018) for ε ≥ 1."
    )
    chart(pca_grid_figure(pca), K + "chart_pca", {"n": pca.n_used, "δ": PCA_DELTA, "seed": seed})
    st.dataframe(pca.table(), hide_index=True, width="stretch")
    table_download(pca.table(), K + "pca_table", "dp_pca_components")
    lam = pca.exact_eigenvalues
    levels = ", ".join(
        f"{pca.noise_spectral_norm(i):.2g} at ε = {rel.epsilon:g}" for i, rel in enumerate(pca.releases) if rel
    )
    st.markdown(
        f"**Why the rows degrade:** the exact eigenvalues run from λ₁ = {lam[0]:.2g} down to "
        f"λ{str(len(lam)).translate(SUBSCRIPTS)} = "
        f"{lam[-1]:.2g}, while the noise matrix has spectral norm ≈ 2σ√d: {levels}. A component whose eigenvalue "
        "sits below that level tends to drown in the noise. More data helps: the sensitivity √2/n, hence σ, "
        "shrinks with n."
    )
    st.markdown(
        f"**Sensitivity convention** (as in `dpmix_core/mechanisms/pca.py`): pixels are scaled to [0, 1] and each "
        f"image is clipped to ‖x‖ ≤ 1; with n public and **replace-one** adjacency, swapping one image changes "
        f"A = XᵀX/n by at most **√2/n = {pca.releases[1].sensitivity:.3g}** in Frobenius norm (tight; the triangle "
        "inequality gives a looser 2/n). The paper states Δ = 1 for XᵀX under add/remove-one. "
        "Guarantee: (ε, δ)-DP by construction for the n images used; no amplification by subsampling is claimed."
    )
    st.caption(
        "Each image has its own grey scale (black = most negative, white = most positive); an eigenvector's sign is "
        "arbitrary, so each is flipped to make its largest-magnitude pixel white. 'Variance captured' compares the DP "
        "components with the exact top-10 on the private data: an evaluation for teaching, not part of the release."
    )


@st.cache_data(show_spinner="Accounting for each stage…", max_entries=64)
def cached_effects(
    model: str, n: int, m: int, T: int, sigma_x: float, sigma_y: float, delta: float, clip: tuple[float, float]
) -> MixingEffects:
    clips = {"clip_x": clip[0], "clip_y": clip[1]}
    return mixing_effects(n=n, m=m, T=T, sigma_x=sigma_x, sigma_y=sigma_y, delta=delta, model=model, **clips)


def _use_shared_release() -> None:
    """Copy the release last set on the Privacy accountant or Mixed samples page into the lesson's controls."""
    shared: SharedRelease = st.session_state[SHARED_RELEASE_KEY]
    model = effect_model(shared.mechanism, shared.clip)
    if model is None:  # the button is not offered then; a stale click does nothing
        return
    st.session_state[K + "mix_model"] = model
    values = {"mix_n": shared.n, "mix_m": shared.l, "mix_T": shared.T, "mix_delta": shared.delta}
    values |= {"mix_sx": max(shared.sigma_x, 1e-4), "mix_sy": max(shared.sigma_y, 1e-4)}  # the boxes' minimum
    if shared.clip is not None:
        values |= {"mix_cx": shared.clip[0], "mix_cy": shared.clip[1]}
    for key, value in values.items():
        st.session_state[K + key] = value


def _mixing_section() -> None:
    st.header("4 · Why mixing is private: averaging, subsampling, composition")
    st.markdown(
        "A mixing release publishes T points, each the average of m records plus Gaussian noise. Three effects set "
        "its ε. The chart accounts for **the same noise** on smaller releases, one effect at a time."
    )
    model = st.radio(
        "Release model",
        list(EFFECT_MODELS),
        format_func=lambda name: EFFECT_MODELS[name][1],
        horizontal=True,
        key=K + "mix_model",
        on_change=_mix_model_changed,
    )
    st.caption(f"It starts at {MIX_START_TEXT[model]}.")
    if isinstance(shared := st.session_state.get(SHARED_RELEASE_KEY), SharedRelease):
        if effect_model(shared.mechanism, shared.clip) is None:
            st.caption(
                f"The release set on {shared.label()} (DP-CDA's or class-centric mixing) is not one of this lesson's "
                "release models, so it is not copied here: the same numbers would describe another release, with "
                "another ε."
            )
        else:
            st.button(f"Use the release set on {shared.label()}", on_click=_use_shared_release, key=K + "mix_shared")
    c1, c2, c3, c4, c5 = st.columns(5)
    n = c1.number_input("n — records (public)", min_value=1, max_value=10**9, step=1000, key=K + "mix_n")
    m_options = sorted({*MIX_M, int(st.session_state[K + "mix_m"])})  # a copied release's m is offered too
    m = c2.select_slider("m — records averaged per point", m_options, key=K + "mix_m")
    T = c3.select_slider("T — points released", sorted({*MIX_T, int(st.session_state[K + "mix_T"])}), key=K + "mix_T")
    sigma_x = c4.number_input("σx", min_value=1e-4, max_value=100.0, format="%.4f", step=0.005, key=K + "mix_sx")
    sigma_y = c5.number_input("σy", min_value=1e-4, max_value=100.0, format="%.4f", step=0.005, key=K + "mix_sy")
    clip = (1.0, 1.0)
    if model in CLIPPED_MODELS:
        d1, d2, _ = st.columns([1, 1, 3])
        cx = d1.number_input("Cx — ‖x‖ clip (public)", min_value=1e-4, max_value=1e4, step=0.1, key=K + "mix_cx")
        cy = d2.number_input("Cy — ‖y‖ clip (public)", min_value=1e-4, max_value=1e4, step=0.1, key=K + "mix_cy")
        clip = (float(cx), float(cy))
    delta = float(st.session_state[K + "mix_delta"])
    try:
        effects = cached_effects(model, int(n), int(m), int(T), float(sigma_x), float(sigma_y), delta, clip)
    except ValueError as exc:
        st.error(str(exc))
        return
    settings = {"n": n, "m": m, "T": T, "σx": sigma_x, "σy": sigma_y, "δ": delta, "accountant": effects.accountant}
    _lesson_output(
        mixing_effects_figure(effects),
        "mixing",
        settings | ({"Cx": clip[0], "Cy": clip[1]} if model in CLIPPED_MODELS else {}),
        effects.sentences(),
        effects.table(),
        "mixing_effects",
    )
    st.caption(
        f"Every bar is a rigorous upper bound from {effects.accountant} at δ = {delta:.3g}, for "
        f"{effects.release.describe()}. z is the noise multiplier: noise std over one record's influence on a point "
        "(DPFMix Lemma 2.2). The Privacy accountant page gives every accountant's ε of the full release."
    )


def _lesson_output(fig, name: str, settings: dict, sentences: list[str], table: pd.DataFrame, file: str) -> None:
    """A lesson's chart (key ``chart_<name>``), its sentences as bullets, and its table with downloads."""
    chart(fig, K + "chart_" + name, settings)
    for sentence in sentences:
        st.markdown(f"- {sentence}")
    st.dataframe(table, hide_index=True, width="stretch")
    table_download(table, K + name + "_table", file)


@st.cache_data(show_spinner="Drawing the noise…", max_entries=32)
def cached_bounds(n: int, eps: float, share: float, seed: int) -> BoundsLesson:
    return bounds_lesson(survey_ages(n, seed), epsilon=eps, range_share=share, seed=seed)


def bounds_text() -> str:
    return f"{BOUNDS_HIGHS[0]:,.0f} to {BOUNDS_HIGHS[-1]:,.0f}"


def _bounds_section(seed: int) -> None:
    st.header("5 · Public bounds: why they set the noise, and finding tighter ones privately")
    st.markdown(
        "A DP mean of n ages known to lie in **public bounds** (0, H) moves by at most H / n when one person's age "
        "is swapped for another, so its noise grows with H, however young the people are. A form's bounds (an age "
        "*between 0 and 1,000*) can be far wider than the ages. The fix this app uses on your own tables (*Narrow "
        "the bounds privately*): spend a share of ε on finding where the values lie, with noisy histograms, then "
        "clip to that range and spend the rest on the mean."
    )
    c1, c2, c3 = st.columns(3)
    n = c1.select_slider("n — ages in the survey", [100, 300, 1000, 3000, 10000, 30000], key=K + "bounds_n")
    eps = c2.select_slider("ε of everything released", [0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0], key=K + "bounds_eps")
    share = c3.select_slider(
        "share of ε for the range", [0.05, 0.1, 0.2, 0.3, 0.5], key=K + "bounds_share", format_func="{:.0%}".format
    )
    lesson = cached_bounds(int(n), float(eps), float(share), seed)
    settings = {"n": n, "ε": eps, "δ": lesson.delta, "range share": share, "public upper bounds": bounds_text()}
    _lesson_output(bounds_figure(lesson), "bounds", settings, lesson.sentences(), lesson.table(), "public_bounds")
    st.caption(
        f"Synthetic ages (mean 45, sd 12, seed {seed}); the true mean is {lesson.true_mean:.2f}. Each error is over "
        f"{lesson.draws} draws of all the noise (the range's and the mean's); replace-one adjacency, n public."
    )


_init_state()
st.title("DP foundations")
st.write(
    "Five live demos of the building blocks behind every private release: how **sensitivity** sets the noise, "
    "the **Laplace vs Gaussian** mechanisms, **differentially private PCA**, **why mixing is private**, and why "
    "**public bounds** matter. Move a slider and watch the noise."
)
dataset = loaded_or_stop(load_data)
noise_seed = _header(dataset)
_labels_section(dataset, noise_seed)
st.divider()
_stats_section(dataset, noise_seed)
st.divider()
_pca_section(dataset, noise_seed)
st.divider()
_mixing_section()
st.divider()
_bounds_section(noise_seed)
