"""Page "Privacy audit": evidence that the release behaves as its accountants claim."""

from __future__ import annotations

import streamlit as st

from app_pages.shared.widgets import (
    DATA_FILE_HELP,
    controls_area,
    count_box,
    data_file_upload,
    feature_bounds,
    headline_area,
    keep_state,
    loaded_or_stop,
    table_download,
)
from dpmix_core.audit import AuditConfig, audit_mechanism, run_audit
from dpmix_core.audit.membership import default_members, job_config
from dpmix_core.audit.reidentification import nearest_records
from dpmix_core.data.choice import (
    app_dataset,
    available_datasets,
    default_choice,
    describe_dataset,
    needs_feature_range,
)
from dpmix_core.experiments.audits import attack_data_upload, membership_attack, submit_membership_attack
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.views.exports import image_grid_png
from dpmix_core.views.inputs import format_count
from dpmix_core.views.privacy_scale import format_epsilon
from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

K = "aud_"


@st.cache_data(show_spinner=False, ttl=60)
def cached_datasets() -> dict[str, str]:
    return available_datasets()


@st.cache_resource(show_spinner="Loading data…", max_entries=4)  # bounded: uploads are not kept forever
def cached_dataset(
    upload: bytes | None, filename: str | None, name: str | None, label_column: str | None, categories: tuple = ()
):
    return app_dataset(upload, filename, name, label_column, categories=categories)


@st.cache_resource(show_spinner="Keeping your file for the attack…", max_entries=4)
def cached_attack_data(
    upload: bytes, filename: str, label_column: str | None, feature_range, categories: tuple = ()
) -> dict:
    return attack_data_upload(upload, filename, label_column, feature_range, categories=categories)


@st.cache_data(show_spinner="Auditing…", max_entries=64)
def cached_audit(config: AuditConfig):
    return run_audit(config)


@st.cache_data(show_spinner="Searching nearest records…", max_entries=32)
def cached_reid(_dataset, dataset_key: str, config: SynthesisConfig, points: int):
    return nearest_records(_dataset, config, points=points, k=3, seed=config.seed)


def _use_shared() -> None:
    """Copy the release last set on the Privacy accountant or Mixed samples page into these controls."""
    shared: SharedRelease = st.session_state[SHARED_RELEASE_KEY]
    for key, value in {"l": shared.l, "T": shared.T, "n": shared.n}.items():
        st.session_state[K + key] = format_count(value)  # typed as text: checked on the page, never clamped
    st.session_state[K + "sx"] = max(shared.sigma_x, 1e-4)
    st.session_state[K + "sy"] = max(shared.sigma_y, 1e-4)
    if shared.l <= 10**5:  # the attack and re-identification boxes stop at 10^5
        st.session_state[K + "mia_l"] = format_count(shared.l)  # a typed count (text)
        st.session_state[K + "re_l"] = shared.l
    st.session_state[K + "re_sigma"] = shared.sigma_x
    if (mechanism := audit_mechanism(shared.mechanism)) is not None:
        st.session_state[K + "mech"] = mechanism


def _empirical() -> None:
    st.markdown(
        "We plant one very unusual record (a *canary*), run the release mechanism thousands of times with and "
        "without it, and see how well a statistical test can tell the two apart. How often the test is fooled "
        "gives a **lower bound** on ε that holds with the stated confidence. Accountants give **upper bounds**. "
        "If the lower bound ever exceeded a guaranteed upper bound, the implementation or the accountant would be "
        "wrong."
    )
    c1, c2, c3 = controls_area().columns(3)  # collapsed when presenting: the headline gets the screen
    # defaults that demo well: the correct mechanism is consistent with a lower bound above 0 (about 0.5 against
    # a guarantee of 3.3), and the 'buggy' switch (0.3 or 0.1 x noise) is caught
    keep_state({K + key: value for key, value in {"n": "5", "l": "1", "T": "1", "sx": 4.0, "sy": 4.0}.items()})
    mechanism = c1.selectbox(
        "Mechanism",
        ["dpmix", "poisson"],
        key=K + "mech",
        help="dpmix: sampling without replacement, replace-one; poisson: add/remove-one",
    )
    n = count_box(c1, "n (records)", K + "n", minimum=2, maximum=10**7)
    l = count_box(c1, "ℓ (Poisson: m)", K + "l", minimum=1, maximum=10**6)
    T = count_box(c2, "T (points released)", K + "T", minimum=1, maximum=10**7)
    sx = c2.number_input("σx", min_value=1e-4, format="%.4f", key=K + "sx")
    sy = c2.number_input("σy", min_value=1e-4, format="%.4f", key=K + "sy")
    trials = c3.select_slider("Trials per dataset", [1000, 3000, 10000, 30000, 100000], value=10000, key=K + "trials")
    scale = c3.select_slider(
        "Noise actually added (× σ) — simulate a buggy implementation", [0.1, 0.3, 1.0], value=1.0, key=K + "scale"
    )
    seed = c3.number_input("Seed", min_value=0, max_value=2**32 - 1, value=0, key=K + "seed")
    if n is None or l is None or T is None:
        return  # "invalid: …" is under the control; no audit of other numbers than those on screen
    try:
        result = cached_audit(
            AuditConfig(
                mechanism=mechanism, n=n, l=l, T=T, sigma_x=sx, sigma_y=sy, trials=trials, noise_scale=scale, seed=seed
            )
        )
    except ValueError as exc:
        st.error(str(exc))
        return
    headline = headline_area("audit")
    m1, m2, m3 = headline.columns(3)
    m1.metric(f"Empirical ε lower bound ({result.confidence:.0%} confidence)", f"{result.epsilon_lower_bound:.3f}")
    m2.metric("Smallest guaranteed ε (upper bound)", format_epsilon(result.smallest_upper_bound, upper_bound=True))
    m3.metric("Verdict", "VIOLATION" if result.violation else "consistent")
    (headline.error if result.violation else headline.success)(result.reading)
    bounds = [
        {
            "accountant": r.accountant,
            "ε": format_epsilon(r.epsilon, upper_bound=r.upper_bound),
            "guarantee": r.guarantee,
            "assumptions": r.assumptions,
        }
        for r in result.accountant_results
    ]
    st.dataframe(bounds, hide_index=True, width="stretch")
    table_download(bounds, K + "bounds", "audit_accountant_bounds")
    st.caption(
        f"Test: {result.test}. False-positive rate {result.fpr:.4f} (≤ {result.fpr_upper:.4f}), "
        f"false-negative rate {result.fnr:.4f} (≤ {result.fnr_upper:.4f}), threshold chosen on "
        f"{result.trials - result.evaluation_trials:,} runs and evaluated on {result.evaluation_trials:,} "
        f"independent runs per dataset; {result.seconds:.2f} s."
    )


def _membership(dataset, data_key: str, own: dict) -> None:
    st.markdown(
        "Can an attacker tell whether a person's record was used, by looking at the **trained model**? The "
        "loss-threshold attack (Yeom et al. 2018) guesses *member* when the model's loss on a record is low. "
        "AUC 0.5 means no better than a coin flip; a large train–test accuracy gap is a warning sign."
    )
    c1, c2, c3 = st.columns(3)
    keep_state({K + "mia_l": "16", K + "mia_T": "2000"})
    l = count_box(c1, "ℓ (records per point)", K + "mia_l", maximum=10**5)
    T = count_box(c1, "T (points released)", K + "mia_T", maximum=10**6)
    eps_text = c2.text_input("ε values (comma-separated)", "8, 1", key=K + "mia_eps")
    if st.session_state.get(K + "mia_data") != data_key:  # new data: as many members as it can pair
        st.session_state[K + "mia_data"] = data_key
        st.session_state[K + "mia_members"] = default_members(dataset.n_train)
    members = c2.number_input("Member records", min_value=50, max_value=100_000, step=50, key=K + "mia_members")
    epochs = c3.number_input(
        "Training epochs (more = more overfitting)", min_value=1, max_value=2000, value=100, key=K + "mia_epochs"
    )
    seed = c3.number_input("Seed", min_value=0, max_value=2**32 - 1, value=0, key=K + "mia_seed")
    if l is None or T is None:
        return  # "invalid: ..." is under the box
    try:
        config = job_config(
            l=l,
            T=T,
            epsilons=tuple(float(v) for v in eps_text.split(",") if v.strip()),
            members=members,
            epochs=epochs,
            seed=seed,
            records=dataset.n_train,
            **own,
        )
    except ValueError as exc:
        st.error(str(exc) if "could not convert" not in str(exc) else f"ε values must be numbers: {eps_text!r}.")
        return
    st.button("Run the attack in the background", on_click=_submit_attack, args=(config,), key=K + "mia_run")
    run_id = st.session_state.get(K + "mia_job")
    if run_id is None:
        st.caption("Trains one small model per row in a background worker (seconds on the embedded sample).")
        return

    @st.fragment(run_every=1.5)
    def attack_status() -> None:
        run = membership_attack(run_id)
        if run is None or run.status in ("queued", "running"):
            st.info(f"Attack {run.status if run else 'queued'}…")
            return
        if run.status != "done":
            st.error(f"The attack run {run.status}: {run.error_summary}")
            return
        st.dataframe(
            run.result["rows"],
            hide_index=True,
            width="stretch",
            column_order=["label", "epsilon", "AUC", "advantage", "train acc", "test acc", "gap"],
        )
        table_download(run.result["rows"], K + "mia", "membership_inference")
        st.caption(
            "ε per row from the release's applicable accountants (upper bounds), for a release made from "
            "the member records only. Non-members are other records of the same training split."
        )

    attack_status()


def _submit_attack(config: dict) -> None:
    """Button callback: the attack trains models, so it runs as a background job, never in this thread."""
    st.session_state[K + "mia_job"] = submit_membership_attack(config)


def _reidentification(dataset, key: str, feature_range) -> None:
    st.markdown(
        "For a few released points, the closest real training records. With little mixing and little noise the "
        "nearest record is the source itself — a recognisable person. With more records mixed and more noise "
        "the nearest record is no closer than any other."
    )
    c1, c2, c3 = st.columns(3)
    mechanism = c1.selectbox("Mechanism", ["local", "dpmix", "class-centric"], key=K + "re_mech")
    keep_state({K + "re_l": 4, K + "re_sigma": 0.05})
    l = c1.number_input("ℓ", min_value=1, max_value=10**5, key=K + "re_l", disabled=mechanism == "local")
    sigma = c2.number_input("σx = σy", min_value=0.0, format="%.3f", key=K + "re_sigma")
    points = c2.number_input("Released points to inspect", min_value=1, max_value=24, value=6, key=K + "re_points")
    seed = c3.number_input("Seed", min_value=0, max_value=2**32 - 1, value=0, key=K + "re_seed")
    try:
        config = SynthesisConfig(
            mechanism=mechanism,
            l=l,
            T=10000,
            sigma_x=sigma,
            preprocessing="unit",
            feature_range=feature_range,
            seed=seed,
        )
        result = cached_reid(dataset, key, config, points)
    except ValueError as exc:
        st.error(str(exc))
        return
    st.metric(
        "Released points that match one training record (nearest ≪ typical distance)", f"{result.leaked_fraction:.0%}"
    )
    if not result.images:  # rows of numbers: each released point, then the records nearest to it
        rows = result.rows(dataset.feature_names, dataset.label_names)
        st.dataframe(rows, hide_index=True, width="stretch")
        table_download(rows, K + "re_rows", "dpmix_reidentification")
    for i in range(len(result.released) if result.images else 0):
        cols = st.columns([1, 3])
        cols[0].image(result.released[i].clip(0, 1), width=84, caption="released")
        cols[1].image(
            [img.clip(0, 1) for img in result.neighbours[i]],
            width=84,
            caption=[f"d={d:.2f}" for d in result.distances[i]],
        )
    if result.images:
        grid = [[result.released[i], *result.neighbours[i]] for i in range(len(result.released))]
        st.download_button(
            "Images (PNG): each released point, then its nearest training records",
            lambda: image_grid_png(grid),  # drawn when clicked
            "dpmix_reidentification.png",
            "image/png",
            key=K + "re_png",
            on_click="ignore",
        )
    st.caption(
        f"Distances in {result.space}; typical nearest-neighbour distance between training records "
        f"{result.reference_distance:.2f}. ε of the full release (T = 10,000; rigorous upper bounds): "
        + ", ".join(f"{k} {format_epsilon(v)}" for k, v in result.epsilon.items())
    )


st.title("Privacy audit")
st.write(
    "Accountants promise an upper bound on ε. This page looks for evidence from the other side: attacks "
    "on the mechanism, on models trained from the release, and on the released points themselves."
)
datasets = cached_datasets()
name = None
if len(datasets) > 1:  # another official dataset on disk (DPMIX_DATA_DIR, the cache, /usr/share/datasets)
    st.session_state.setdefault(K + "dataset", default_choice(datasets))
    name = st.selectbox(
        "Data",
        list(datasets),
        format_func=datasets.get,
        key=K + "dataset",
        help="The records the membership attack and re-identification run on.",
    )
own_box = st.expander("Use your own data (CSV with a label column, or .npz with x and y)")
with own_box:
    upload, label_column, categories = data_file_upload(
        K + "own_",
        help_text=DATA_FILE_HELP + " The membership attack and re-identification then run on it; the ε check "
        "plants its canary in data of its own.",
    )
    if upload is not None and name is not None:
        st.caption("The uploaded file is used instead of the data picked above; remove it to go back.")
dataset = loaded_or_stop(
    cached_dataset,
    upload.getvalue() if upload else None,
    upload.name if upload else None,
    name,
    label_column,
    categories,
)
dataset_key = f"{upload.file_id}:{label_column}:{categories}" if upload else dataset.source
feature_range = None
if upload is not None and needs_feature_range(dataset):
    with own_box:  # below the upload: float features are scaled to [0,1] with bounds known without the data
        feature_range = feature_bounds(K + "own_", dataset)
if isinstance(shared := st.session_state.get(SHARED_RELEASE_KEY), SharedRelease):
    st.button(
        f"Use the release set on {shared.label()}",
        on_click=_use_shared,
        key=K + "use_shared",
        help="Copies n, ℓ, T and σ (and the mechanism, DPMix or Poisson). Each tab then runs its own mechanism on its "
        "own data (the ε check: a canary among 16 features), so every ε here is of that release.",
    )
tab1, tab2, tab3 = st.tabs(["Empirical ε check", "Membership inference", "Re-identification"])
with tab1:
    _empirical()
with tab2:
    st.caption(f"Data: {describe_dataset(dataset)}")
    own: dict = {} if upload is not None or name is None else {"dataset": name}
    if upload is not None:
        try:
            own = cached_attack_data(upload.getvalue(), upload.name, label_column, feature_range, categories)
        except ValueError as exc:
            st.error(str(exc))
    if upload is None or own:
        _membership(dataset, dataset_key, own)
with tab3:
    st.caption(f"Data: {describe_dataset(dataset)}")
    _reidentification(dataset, f"{dataset_key}:{feature_range}", feature_range)
