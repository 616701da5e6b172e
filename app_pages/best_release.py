"""Page "Best release": for a privacy budget, search the Poisson mixing release (m, T, λ) of one's own file or of a
dataset's ScatterNet features, in a background job; show the choice, its certified ε and its accuracy."""

from __future__ import annotations

import json

import streamlit as st

from app_pages.shared.widgets import (
    OWN_FILE,
    dataset_or_own_file,
    feature_bounds,
    held_out_data_file,
    keep_state,
    private_ranges_box,
    table_download,
)
from dpmix_core.data.choice import available_datasets, needs_feature_range
from dpmix_core.experiments.best_release import OWN_DATA_MODELS, SELECTIONS, dataset_space, default_space
from dpmix_core.experiments.best_release_jobs import (
    TRIAL_COLUMNS,
    best_release_run,
    chosen_release_files,
    page_search,
    search_plan,
    submit_best_release,
)
from dpmix_core.runtime.store import ResultStore, StoreError
from dpmix_core.training.names import FEATURE_MODELS
from dpmix_core.views.inputs import parse_counts, parse_real, parse_reals

K = "br_"
SELECTION_TITLES = {
    "private": "held-out records, privately",
    "pooled": "every release's held-out points",
    "own": "each release's own held-out points",
}


def store() -> ResultStore:
    return ResultStore()  # DPMIX_STORE or ~/.cache/dpmix/results.sqlite


@st.cache_data(show_spinner=False, ttl=60)
def cached_datasets() -> dict[str, str]:
    return available_datasets()


INVALID = object()  # what _typed returns for text the library refused (its "invalid: …" is under the box)


def _typed(col, label: str, key: str, parse, help_text: str | None = None):
    """Text parsed by the library, or INVALID (with "invalid: …" under the box)."""
    text = col.text_input(label, key=K + key, help=help_text)
    try:
        return parse(text)
    except ValueError as exc:
        col.error(str(exc))
        return INVALID


def _submit(search) -> None:
    """Button callback: the search trains models, so it runs as a background job, never in this thread."""
    try:
        st.session_state[K + "job"] = submit_best_release(search, store())
        st.session_state[K + "submit_error"] = None
    except (ValueError, StoreError) as exc:
        st.session_state[K + "submit_error"] = str(exc)


def _search():
    """The widgets, and the search they describe (None, with the reason shown, while they do not describe one)."""
    dataset = dataset_or_own_file("Data", K + "dataset", cached_datasets())
    own, feature_range, ranges_on, range_epsilon = None, None, False, None
    if dataset == OWN_FILE:
        own = held_out_data_file(
            K + "own_",
            str(store().path.parent / "data"),
            missing="Upload a .csv or .npz: its columns are mixed, and its held-out records score the choice.",
        )
        if own is None:
            return None
        if needs_feature_range(own.dataset):
            feature_range = feature_bounds(K + "own_", own.dataset)
            ranges_on, range_epsilon = private_ranges_box(K + "own_")
            if ranges_on and range_epsilon is None:
                return None
        grid, data_key = default_space(own.dataset.n_train), own.options["data_sha256"]
    else:
        grid, data_key = dataset_space(dataset), dataset
    defaults = {"m": grid.mix_degrees, "T": grid.num_points}
    grid_text = {K + name: ", ".join(map(str, values)) for name, values in defaults.items()}
    if st.session_state.get(K + "grid_for") != data_key:  # new data: the grid starts from its own defaults
        st.session_state[K + "grid_for"] = data_key
        st.session_state.update(grid_text)
    keep_state(grid_text)  # a visit to another page drops them: back at the defaults, never blank
    keep_state({K + "eps": "4", K + "delta": "1e-5", K + "lambda": "0.5, 1", K + "sel_eps": ""})
    c1, c2, c3 = st.columns(3)
    eps = _typed(
        c1, "Target ε (everything published)", "eps", lambda t: parse_real(t, name="ε", minimum=0, strict_minimum=True)
    )
    delta = _typed(c1, "δ", "delta", lambda t: parse_real(t, name="δ", minimum=0.0, maximum=0.5, strict_minimum=True))
    m = _typed(c2, "m (expected records per point)", "m", lambda t: parse_counts(t, name="m", maximum=10**7))
    T = _typed(c2, "T (points released)", "T", lambda t: parse_counts(t, name="T", maximum=10**7))
    ratios = _typed(c2, "λ = σy / σx", "lambda", lambda t: parse_reals(t, name="λ", minimum=0.0, strict_minimum=True))
    models = OWN_DATA_MODELS if own is not None else FEATURE_MODELS
    model = c3.selectbox(
        "Model every candidate trains",
        models,
        index=models.index("corrected-lsq"),
        key=K + "model" + ("_own" if own is not None else ""),
        help="corrected-lsq: least squares in closed form, corrected for each release's published noise "
        "(seconds a candidate). The others train by gradient (minutes).",
    )
    selection_key = K + "selection" + ("_own" if own is not None else "")  # a file starts from its own default
    keep_state({selection_key: "private" if own is not None else "pooled"})
    selection = c3.selectbox(
        "Choose on",
        SELECTIONS,
        format_func=SELECTION_TITLES.get,
        key=selection_key,
        help="held-out records, privately: each candidate's model classifies the even rows of the held-out records "
        "(your file's, or the dataset's test split) and the exponential mechanism picks (its ε is part of the "
        "target); the accuracy shown is on the odd rows. The other two read released points only (no ε), whose "
        "labels are mixtures' plurality classes.",
    )
    sel_eps = None
    if selection == "private":
        sel_eps = _typed(
            c3,
            "ε of the choice (empty: 10 % of the target)",
            "sel_eps",
            lambda t: None if not t.strip() else parse_real(t, name="ε of the choice", minimum=0, strict_minimum=True),
        )
    if any(value is INVALID for value in (eps, delta, m, T, ratios, sel_eps)):
        return None
    try:
        return page_search(
            target_epsilon=eps,
            delta=delta,
            mix_degrees=m,
            num_points=T,
            sigma_ratios=ratios,
            model=model,
            selection=selection,
            selection_epsilon=sel_eps,
            dataset=dataset,
            own=own,
            feature_range=feature_range,
            range_epsilon=range_epsilon if ranges_on else None,
        )
    except ValueError as exc:
        st.error(str(exc))
        return None


def _result(payload: dict) -> None:
    c = payload["chosen"]
    cand = c["candidate"]
    rows = "odd held-out rows (never read before the choice)" if payload["chosen_test_rows"] == "odd" else "test set"
    m1, m2, m3 = st.columns([2, 1, 1])
    m1.metric("Chosen release", f"m = {cand['m']}, T = {cand['T']:,}, λ = {cand['sigma_ratio']:g}")
    m2.metric("Accuracy", f"{100 * payload['chosen_test_accuracy']:.1f} %", help=f"On the {rows}.")
    m3.metric(
        "ε of everything published",
        f"{payload['search_epsilon']:.3g}",
        help=f"Rigorous upper bound at δ = {payload['search']['delta']:g}: the candidate releases (and private "
        "feature ranges, where the bounds were narrowed) composed with the rdp-poisson accountant, plus the private "
        "choice's ε where it read held-out records (exponential mechanism). Each candidate's own ε (pld-poisson, an "
        "upper bound) is in the table.",
    )
    st.markdown(
        f"**Release:** σx = {c['sigma_x']:.4g}, σy = {c['sigma_y']:.4g}; accuracy on the {rows}.  \n"
        f"**Privacy:** {payload['search_epsilon_note']}.  \n**How it was chosen:** {payload['selection']}."
    )
    if payload.get("chosen_warning"):
        st.warning(f"Not a result: {payload['chosen_warning']}.")
    st.dataframe(payload["rows"], hide_index=True, width="stretch", column_order=TRIAL_COLUMNS)
    table_download(payload["rows"], K + "rows", "best_release_trials")
    if (files := chosen_release_files(payload)) is not None:
        npz, card = files
        c1, c2 = st.columns(2)
        c1.download_button(
            "The chosen release (.npz)",
            npz.read_bytes,  # read when clicked
            npz.name,
            "application/octet-stream",
            key=K + "npz",
            on_click="ignore",
            type="primary",
        )
        c2.download_button(
            "Its privacy card (.card.json)",
            card.read_bytes,
            card.name,
            "application/json",
            key=K + "card",
            on_click="ignore",
        )
        st.caption(
            "The release is the chosen candidate's own (its seed and σ: the same points, no further ε). Its card says "
            "it was chosen and gives the ε of everything published; keep the two files together."
        )
    st.download_button(
        "The whole search (JSON)",
        json.dumps({k: v for k, v in payload.items() if k != "rows"}, indent=1),
        "best_release.json",
        "application/json",
        key=K + "json",
        on_click="ignore",
    )


st.title("Best release for a budget")
st.markdown(
    "For a target ε, try several Poisson mixing releases — m records per point on average, T points, noise ratio "
    "λ — each calibrated so that **all of them together (rdp-poisson composition), and the choice, stay within "
    "the target** (each one's own ε is certified by the exact PLD); train a model on each and keep the best. On your own file the choice reads its held-out records privately; "
    "on a dataset, the releases' own held-out points."
)
search = _search()
if search is not None:
    plan, refusal = search_plan(search)
    st.caption(plan)
    if refusal:
        st.error(refusal)
    else:
        st.button("Search in the background", type="primary", on_click=_submit, args=(search,), key=K + "run")
if err := st.session_state.get(K + "submit_error"):
    st.error(err)
run_id = st.session_state.get(K + "job")
if run_id is not None:

    @st.fragment(run_every=1.5)
    def search_status() -> None:
        run = best_release_run(run_id, store())
        if run is None or run.status in ("queued", "running"):
            step = run.progress.get("phase") if run is not None else None
            st.info(f"Search {run.status if run else 'queued'}…" + (f" {step}" if step else ""))
            return
        if run.status != "done":
            st.error(f"The search {run.status}: {run.error_summary}")
            return
        _result(run.result)

    search_status()
