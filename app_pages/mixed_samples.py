"""Page "Mixed samples": what the released points look like, next to the records they mix."""

from __future__ import annotations

import streamlit as st

from app_pages.shared.widgets import (
    DATA_FILE_HELP,
    controls_area,
    count_box,
    data_file_upload,
    delta_box,
    feature_bounds,
    keep_state,
    loaded_or_stop,
    private_ranges_box,
    real_check,
    table_download,
    thumbnail_px,
)
from dpmix_core.data import cache_dir, one_hot_features, public_zscore_constants
from dpmix_core.data.choice import (
    app_dataset,
    available_datasets,
    default_choice,
    describe_dataset,
    needs_feature_range,
)
from dpmix_core.experiments.release_files import ReleaseDownloads, release_downloads, upload_held_out
from dpmix_core.synthesis.pipeline import (
    MECHANISM_DESCRIPTIONS,
    SynthesisConfig,
    calibration_accountants,
    release_refusal,
)
from dpmix_core.synthesis.previews import PREVIEW_MECHANISMS, mixing_preview
from dpmix_core.synthesis.private_ranges import ranges_refusal
from dpmix_core.synthesis.public_constants import (
    stored_zscore_constants,
    test_split_constants_file,
    zscore_constants_from_bytes,
)
from dpmix_core.views.exports import preview_png
from dpmix_core.views.privacy_scale import format_epsilon
from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

K = "mix_"


# defaults that demo well: a release with moderate protection (rdp-wor eps ~ 4.4 on the embedded sample)
DEFAULTS = {
    "mechanism": "class-centric",
    "l": "32",  # counts and delta are typed as text: 1e6 parses exactly, a bad entry is refused, never clamped
    "prep": "zscore",
    "protect_labels": True,
    "T": "1000",
    "sigma_x": 0.2,
    "ratio": 1.0,
    "delta": "1e-05",
    "use_target": False,
    "target": 8.0,
    "accountant": "rdp-wor",
    "seed": 0,
    "clip": 1.0,
    "features": "pixels",
    "dpmix_prep": "unit",
    "z_source": "one",
}
FEATURE_LABELS = {
    "pixels": "pixels (‖x‖ clipped to Cx = 1)",
    "scattering": "ScatterNet features (DPFMix feature mixing)",
}


@st.cache_data(show_spinner=False, ttl=60)
def cached_datasets() -> dict[str, str]:
    return available_datasets()


@st.cache_resource(show_spinner="Loading data…", max_entries=4)  # bounded: uploads are not kept forever
def cached_dataset(
    upload: bytes | None,
    filename: str | None,
    name: str | None,
    label_column: str | None = None,
    test_fraction: float | None = None,
    categories: tuple = (),
):
    return app_dataset(upload, filename, name, label_column, test_fraction, categories)


@st.cache_data(
    show_spinner="Mixing… (feature mixing, the first time: ScatterNet features of every record)", max_entries=64
)
def cached_preview(_dataset, dataset_key: str, config: SynthesisConfig):
    return mixing_preview(_dataset, config)


@st.cache_data(show_spinner=False, max_entries=4)
def cached_held_out(upload: bytes, label_column: str | None, fraction: float, categories: tuple, _dataset) -> dict:
    return upload_held_out(upload, label_column, fraction, _dataset.n_test, categories)  # what the card says


@st.cache_data(show_spinner="Preparing the export…", max_entries=4)
def cached_export(_dataset, dataset_key: str, config: SynthesisConfig, held_out: dict | None) -> ReleaseDownloads:
    return release_downloads(_dataset, config, held_out)


@st.cache_data(show_spinner="Computing the public per-feature constants…", max_entries=8)
def cached_constants_file(_dataset, dataset_key: str, upload: bytes | None, filename: str | None) -> tuple[str, str]:
    """(path, what they are) of the per-feature constants (an upload, else the test split's even rows), kept by
    their sha256."""
    folder = cache_dir() / "zscore-constants"
    if upload is None:
        path, constants = test_split_constants_file(_dataset, "even", folder)
    else:
        constants = zscore_constants_from_bytes(upload, filename or "upload").fitting(
            _dataset.feature_dim, repr(filename)
        )
        path = stored_zscore_constants(constants, folder)
    return str(path), f"{constants.dim} per-feature means and stds: {constants.source}; sha256 {constants.sha256[:12]}…"


def _new_draw() -> None:
    st.session_state[K + "seed"] += 1


keep_state({K + key: value for key, value in DEFAULTS.items()})

st.title("Mixed samples")
st.write(
    "Each released point averages ℓ records and adds noise. Compare the records, their noise-free "
    "average and what is actually released."
)

datasets = cached_datasets()
name = None
if len(datasets) > 1:  # another official dataset on disk (DPMIX_DATA_DIR, the cache, /usr/share/datasets)
    st.session_state.setdefault(K + "dataset", default_choice(datasets))
    name = st.selectbox("Data", list(datasets), format_func=datasets.get, key=K + "dataset")
with st.expander("Use your own data (CSV with a label column, or .npz with x and y)"):
    upload, label_column, categories = data_file_upload(
        K, help_text=DATA_FILE_HELP + " The release's card says which class each label column holds."
    )
    if upload is not None and name is not None:
        st.caption("The uploaded file is used instead of the data picked above; remove it to go back.")
    hold = None  # a share of the upload's records held out of the release, to score models on later
    if upload is not None and st.checkbox(
        "Hold out a share of the records: never mixed nor released, to score models on them later",
        key=K + "hold",
        help="The release and its ε then cover the other records only; its card names the held-out ones (by the "
        "file's SHA-256 and the split), so that on Train & trade-offs → Models on a release file you can score models "
        "on them by uploading this file with the release.",
    ):
        hold = st.slider("Held-out share", 0.05, 0.5, 0.2, step=0.05, key=K + "hold_fraction")
dataset = loaded_or_stop(
    cached_dataset,
    upload.getvalue() if upload else None,
    upload.name if upload else None,
    name,
    label_column,
    hold,
    categories,
)
st.caption(f"Data: {describe_dataset(dataset)}")
dataset_key = f"{upload.file_id}:{label_column}:{hold}:{categories}" if upload else dataset.source
held_out = (
    None
    if upload is None or hold is None
    else cached_held_out(upload.getvalue(), label_column, hold, categories, dataset)
)
public_z = public_zscore_constants(dataset.name)
if st.session_state.get(K + "data_key") != dataset_key:  # new data: z-scoring only where public constants exist
    st.session_state[K + "data_key"] = dataset_key
    # the new data's documented constants, or empty for an upload (never the previous dataset's)
    st.session_state[K + "z_mean"], st.session_state[K + "z_std"] = public_z if public_z else (None, None)
    if public_z is None and st.session_state[K + "prep"] == "zscore":
        st.session_state[K + "prep"] = "unit"
feature_range = feature_bounds(K, dataset) if needs_feature_range(dataset) else None
ranges_on, range_epsilon = private_ranges_box(K) if feature_range is not None else (False, None)

c1, c2, c3 = controls_area().columns(3)  # collapsed when presenting
mechanism = c1.selectbox("Mechanism", PREVIEW_MECHANISMS, key=K + "mechanism")
c1.caption(MECHANISM_DESCRIPTIONS[mechanism])
feature_choice = mechanism == "poisson" and dataset.x_train.ndim >= 3  # images: DPFMix mixes ScatterNet features
if feature_choice:
    c1.selectbox(
        "What is mixed",
        list(FEATURE_LABELS),
        key=K + "features",
        format_func=FEATURE_LABELS.get,
        help="ScatterNet (J = 2, L = 8) maps each record to its features with a public, data-independent "
        "extractor; each record's features are group-normalised on their own, clipped and mixed (DPFMix App. E). "
        "The first use computes the features of the whole dataset once (about a minute on a laptop; cached on disk).",
    )
features = st.session_state[K + "features"] if feature_choice else "pixels"
l_value = count_box(
    c1, "ℓ — records per point (Poisson: expected m)", K + "l", maximum=10**6, disabled=mechanism == "local"
)
T_value = count_box(c2, "T — points in the full release (ε is for all T)", K + "T", maximum=10**8)
c2.checkbox("Calibrate σ to a target ε", key=K + "use_target")
use_target = st.session_state[K + "use_target"]
target_value = sigma_value = None
if use_target:
    c2.number_input("Target ε", step=0.5, key=K + "target")
    target_value = real_check(c2, st.session_state[K + "target"], "target ε", minimum=1e-3)
    if ranges_on and None not in (target_value, range_epsilon):
        if (refusal := ranges_refusal(range_epsilon, target_value)) is not None:
            c2.error(f"invalid: {refusal}")
            target_value = None
    options = calibration_accountants(mechanism)  # those of the mechanism's sampling: another would refuse it
    if st.session_state[K + "accountant"] not in options:
        st.session_state[K + "accountant"] = options[0]
    c2.selectbox(
        "Accountant",
        options,
        key=K + "accountant",
        disabled=ranges_on,
        help="With the bounds narrowed privately, σ is calibrated so that the ranges and the points together stay "
        "within the target (their composition, the ε shown below)."
        if ranges_on
        else None,
    )
else:
    c2.number_input("σx — feature noise std", step=0.01, format="%.4f", key=K + "sigma_x")
    sigma_value = real_check(c2, st.session_state[K + "sigma_x"], "σx", minimum=0.0)
c3.number_input("λ = σy / σx", step=0.1, key=K + "ratio")
ratio_value = real_check(c3, st.session_state[K + "ratio"], "λ", minimum=1e-6)
delta_value = delta_box(c3, K + "delta")
PREP_LABELS = {
    "unit": "[0,1] pixels (thesis §4.2)",
    "zscore": "z-score with public constants + L2 clip c (DP-CDA)",
    "zscore-private": "z-score with the private data's statistics (not covered)",
}
if mechanism == "class-centric":
    c3.selectbox("Features", list(PREP_LABELS), key=K + "prep", format_func=PREP_LABELS.get)
    c3.checkbox(
        "Protect labels (replace-one)",
        key=K + "protect_labels",
        help="Off: the DP-CDA paper's reading (a neighbour swaps a record within its class); the record's "
        "label is then not protected, and every ε says so.",
    )
DPMIX_PREP_LABELS = {
    "unit": "[0,1] pixels (DPMix, thesis §4.1)",
    "clip": "records clipped to ‖x‖ ≤ 1, ‖y‖ ≤ 1 (DPFMix App. E.3's DPMix)",
}
if mechanism == "dpmix":
    c3.selectbox(
        "Records",
        list(DPMIX_PREP_LABELS),
        key=K + "dpmix_prep",
        format_func=DPMIX_PREP_LABELS.get,
        help="DPFMix runs DPMix for its uniform-sampling row on records clipped to unit L2 norm ('If not "
        "specified, we set Cx = Cy = 1'): a record then moves a point by 2/ℓ instead of √d/ℓ, so the same ε "
        "needs about a tenth of the noise.",
    )
prep = {"class-centric": st.session_state[K + "prep"], "dpmix": st.session_state[K + "dpmix_prep"]}.get(
    mechanism, "unit"
)
if prep in ("zscore", "zscore-private"):
    c3.number_input("c — L2 clip after z-scoring", min_value=1e-6, step=0.1, key=K + "clip")
Z_SOURCES = {
    "one": "one mean and std for every feature",
    "test": "per feature: the test split's even rows",
    "file": "per feature: from a file (.npz)",
}
z_sources = [s for s in Z_SOURCES if s != "test" or dataset.x_test is not None]  # uploads may lack a test split
if st.session_state[K + "z_source"] not in z_sources:
    st.session_state[K + "z_source"] = "one"
constants_file = None
if prep == "zscore":
    c3.selectbox(
        "Public constants",
        z_sources,
        key=K + "z_source",
        format_func=Z_SOURCES.get,
        help="DP-CDA z-scores every pixel with its own mean and std. Taken from the private training set, that "
        "is not covered; taken from public data (the test split's even rows, or your file of per-feature mean "
        "and std), it is, and it is the per-pixel z-score of the paper.",
    )
if prep == "zscore" and st.session_state[K + "z_source"] != "one":
    z_upload = None
    if st.session_state[K + "z_source"] == "file":
        z_upload = c3.file_uploader("Constants (.npz with arrays mean and std)", type=["npz"], key=K + "z_file")
    if z_upload is not None or st.session_state[K + "z_source"] == "test":
        try:
            constants_file, constants_text = cached_constants_file(
                dataset, dataset_key, z_upload.getvalue() if z_upload else None, z_upload.name if z_upload else None
            )
        except ValueError as exc:
            c3.error(str(exc))
            st.stop()
        c3.caption(constants_text)
    else:
        c3.info("Upload a file of per-feature public constants, or choose another source.")
        st.stop()
elif prep == "zscore":
    keep_state(dict(zip((K + "z_mean", K + "z_std"), public_z or (None, None))))  # shown again: not blank
    z1, z2 = c3.columns(2)
    z1.number_input(
        "public mean",
        value=None,  # the session state holds the dataset's constants
        key=K + "z_mean",
        help="A constant that does not depend on the private data (built-in datasets: the documented "
        "normalisation constants, in pixel units).",
    )
    z2.number_input("public std", value=None, min_value=1e-9, key=K + "z_std")
if prep == "zscore-private":
    c3.error(
        "Not covered: normalisation constants computed from the private data move every released point. "
        "No ε below is an upper bound."
    )
c3.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=K + "seed")
c3.button("New draw (next seed)", on_click=_new_draw, key=K + "redraw")

ss = st.session_state
if None in (l_value, T_value, ratio_value, delta_value, target_value if use_target else sigma_value) or (
    ranges_on and range_epsilon is None
):
    st.stop()  # the "invalid: …" message is under its control; nothing computed from other inputs is shown
try:
    config = SynthesisConfig(
        mechanism=mechanism,
        l=l_value,
        T=T_value,
        sigma_x=None if use_target else sigma_value,
        sigma_ratio=ratio_value,
        target_epsilon=target_value if use_target else None,
        accountant=ss[K + "accountant"] if use_target else None,
        delta=delta_value,
        clip=ss[K + "clip"],
        preprocessing=prep,
        protect_labels=mechanism != "class-centric" or ss[K + "protect_labels"],
        seed=ss[K + "seed"],
        feature_range=feature_range,
        features=features,
        range_epsilon=range_epsilon if ranges_on else None,
        exact_features=one_hot_features(dataset.feature_names, dataset.categories),
        # empty fields: the dataset's documented constants, or the library's one-line refusal for an upload
        zscore_constants=(ss[K + "z_mean"], ss[K + "z_std"])
        if prep == "zscore"
        and constants_file is None
        and ss.get(K + "z_mean") is not None
        and ss.get(K + "z_std") is not None
        else None,
        zscore_constants_file=constants_file,
    )
    preview = cached_preview(dataset, dataset_key, config)
except ValueError as exc:
    st.error(str(exc))
    st.stop()

used = preview.config
st.session_state[SHARED_RELEASE_KEY] = SharedRelease(
    page="Mixed samples",
    n=dataset.n_train,
    l=used.mix_degree,
    T=used.T,
    sigma_x=used.sigma_x,
    sigma_y=used.sigma_y,
    delta=used.delta,
    mechanism=used.mechanism,
    clip=used.record_clip,
)
st.subheader("Privacy of the full release")
st.write(f"σx = {used.sigma_x:.4g}, σy = {used.sigma_y:.4g}, T = {used.T:,} points, δ = {used.delta:.2g}.")
epsilon_rows = [
    {
        "accountant": e.accountant,
        "ε": format_epsilon(e.epsilon, upper_bound=e.upper_bound),
        "guarantee": e.guarantee,
        "assumptions": e.assumptions,
        "note": e.reason or "",
    }
    for e in preview.epsilons
]
st.dataframe(epsilon_rows, hide_index=True, width="stretch")
table_download(epsilon_rows, K + "eps_table", f"dpmix_{used.mechanism}_epsilons")

if preview.statement:
    with st.expander("Privacy statement of this release (as its card states it, for a release note)"):
        st.write(preview.statement)
for caveat in preview.caveats:
    st.warning(f"Caveat: {caveat}.")

st.subheader("Per class: records → noise-free mixture → released point")
st.caption(preview.display_note)
for cls in preview.classes if not preview.images else ():
    st.markdown(f"**class {cls.label}**")
    rows = cls.rows(dataset.feature_names, dataset.categories)
    st.dataframe(rows, hide_index=True, width="stretch")
    table_download(rows, K + f"class_{cls.label}", f"dpmix_preview_class_{cls.label}")
thumb = thumbnail_px()
for cls in preview.classes if preview.images else ():
    cols = st.columns([4, 2, 2])
    cols[0].image(list(cls.originals), width=thumb, caption=[f"class {cls.label}"] + [""] * (len(cls.originals) - 1))
    if len(cls.clean):
        cols[1].image(list(cls.clean), width=thumb, caption=["noise-free"] + [""] * (len(cls.clean) - 1))
        cols[2].image(list(cls.noisy), width=thumb, caption=["released"] + [""] * (len(cls.noisy) - 1))
    else:
        cols[1].caption("no point led by this class in this draw")
if preview.images:
    st.download_button(
        "Images (PNG): per class, records → noise-free mixtures → released points",
        lambda: preview_png(preview),  # drawn when clicked
        f"dpmix_{used.mechanism}_preview_seed{used.seed}.png",
        "image/png",
        key=K + "preview_png",
        on_click="ignore",
    )

with st.expander("What was done to the data (from the mechanism)"):
    for note in preview.notes:
        st.markdown(f"- {note}")

st.subheader("Export")
too_big = release_refusal(used, dataset)  # over DPMIX_MAX_MEMORY / DPMIX_MAX_SECONDS: refused before any work
if too_big is not None:
    st.error(too_big)
if st.button("Prepare the full release for download", key=K + "prepare", disabled=too_big is not None):
    files = cached_export(dataset, dataset_key, used, held_out)
    stem = f"dpmix_{used.mechanism}_T{used.T}_seed{used.seed}"
    st.download_button(
        f"Download {used.T:,} points (.npz with privacy card)",
        data=files.npz,
        file_name=f"{stem}.npz",
        mime="application/octet-stream",
        key=K + "download",
        on_click="ignore",
    )
    if files.table_csv is not None and files.table_card is not None:
        cols = st.columns(2)
        cols[0].download_button(
            "… or as your table (CSV: your columns, in your units)",
            data=files.table_csv,
            file_name=f"{stem}.csv",
            mime="text/csv",
            key=K + "download_table",
            on_click="ignore",
        )
        cols[1].download_button(
            "… and its privacy card (keep it beside the CSV)",
            data=files.table_card,
            file_name=f"{stem}.card.json",
            mime="application/json",
            key=K + "download_table_card",
            on_click="ignore",
        )
        st.caption(
            "The CSV: your label column (the class with the largest released score), your feature columns mapped back "
            "from [0,1] with the public bounds (value × (high − low) + low: post-processing, ε unchanged; noise is not "
            "clipped, so a value can fall outside its column's bounds; a text column is its most likely category, "
            "then its shares), then the released label scores. It is the same release as the .npz, in your units."
        )
    st.caption(
        "Whoever receives the file can train models on it (*Train & trade-offs* → *Models on a release file*, or "
        "`python -m dpmix_core train --release FILE`) and recompute its card's ε (`python -m dpmix_core verify FILE`)."
    )
    if held_out is not None:
        st.caption(
            f"It mixes {dataset.n_train:,} records of your file; the other {held_out['records']:,} were held out and "
            "never released, and its card names them. To score models on them: *Train & trade-offs* → *Models on a "
            "release file* with this release and your file (or `train --release FILE --data-file YOURS`)."
        )
