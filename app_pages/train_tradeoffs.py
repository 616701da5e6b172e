"""Page "Train & trade-offs": launch sweeps as background jobs, watch them, plot accuracy vs privacy."""

from __future__ import annotations

import streamlit as st

from app_pages.shared.widgets import (
    OWN_FILE,
    chart,
    dataset_or_own_file,
    feature_bounds,
    held_out_data_file,
    keep_state,
    private_ranges_box,
    table_download,
)
from dpmix_core.data import TEST_ROWS, cache_dir, load_dataset
from dpmix_core.data.choice import available_datasets, needs_feature_range
from dpmix_core.experiments.best_axis import TUNABLE_AXES, AxisPick, best_axis_caption, best_axis_notes
from dpmix_core.experiments.presets import DEMO_PRESET, get_preset, preset_names
from dpmix_core.experiments.quick_vs_full import QUICK_WITHIN_PTS, QuickVsFull
from dpmix_core.experiments.release_files import (
    CardCheck,
    ReleaseFile,
    held_out_records,
    held_out_upload,
    save_release_upload,
    verify_card,
)
from dpmix_core.experiments.results import no_signal_note
from dpmix_core.experiments.run_data import OwnData
from dpmix_core.experiments.runtime_estimate import RuntimeEstimate, estimate_sweep_runtime
from dpmix_core.experiments.solve_epsilon import CERTIFIED, epsilon_choices, solvable_series, solve_epsilon
from dpmix_core.experiments.spec import SweepSpec, spec_file_name, spec_file_text
from dpmix_core.experiments.sweep_view import SweepView, overlay_aggregates, view_sweep
from dpmix_core.experiments.trade_offs import (
    AUTO_ACCOUNTANT,
    REPRODUCED_WITHIN_PTS,
    TEST_INPUTS_TITLES,
    SettledCells,
    StoredSweep,
    axis_column,
    best_axis_table,
    cancel_runs,
    custom_spec,
    default_sweep,
    launch_sweep,
    pump_local,
    read_stored_sweep,
    release_file_spec,
    release_model_choices,
    resume_runs,
    run_table,
    runs_the_data_can_make,
    settled_cells,
    spec_problem,
    sweep_activity,
    sweep_axis,
    sweep_choices,
    sweep_id_from_query,
    sweep_jobs,
    sweep_results,
    sweep_run_ids,
    sweep_test_inputs,
    sweep_test_rows,
    waiting_without_worker,
    with_dataset,
)
from dpmix_core.privacy.accountants import ACCOUNTANTS
from dpmix_core.runtime.jobs import default_max_parallel
from dpmix_core.runtime.store import ResultStore, StoreError
from dpmix_core.synthesis.public_constants import test_split_constants_file
from dpmix_core.training.names import CLOSED_FORM_MODELS, LOSSES, MODELS
from dpmix_core.training.protocols import OWN_DATA_LINEAR, PROTOCOLS, train_epochs
from dpmix_core.views.accuracy_figure import AGAINST, MARKERS_CAPTION, against_title, epsilon_columns, sweep_figure
from dpmix_core.views.inputs import parse_count, parse_real
from dpmix_core.views.release_card import release_summary
from dpmix_core.views.sweep_report import sweep_report

K = "tr_"
ACTIVE = ("queued", "running")
AXES = {"σx": "sigma", "ℓ": "l", "T": "T", "target ε": "target_epsilon"}
RECORDS = {  # what the class-centric series mix
    "unit": "[0,1] pixels (the thesis)",
    "zscore": "z-scored with the dataset's public mean and std, ‖x‖ ≤ 1 (DP-CDA)",
    "zscore-test-even": "z-scored per pixel, constants from the test split's even rows (read on the odd rows)",
}
BUILDER_DEFAULTS = {  # "Build your own": what it starts from (kept through runs that do not draw it: keep_state)
    "mechs": ["class-centric"],
    "records": "unit",
    "axis": "σx",
    "values": "0.2, 0.7, 1.5, 3.0",
    "baselines": ["non-private"],
    "l": "16",
    "T": "4000",
    "sigma": "0.7",
    "accountant": AUTO_ACCOUNTANT,
    "delta": "1e-05",
    "loss": "ce",
    "repeats": 2,
}


def store() -> ResultStore:
    return ResultStore()  # DPMIX_STORE or ~/.cache/dpmix/results.sqlite; cheap, no connection kept


@st.cache_data(show_spinner=False, ttl=60)
def cached_datasets() -> dict[str, str]:
    return available_datasets()


@st.cache_data(show_spinner="Computing per-pixel constants from the test split's even rows…", max_entries=4, ttl=600)
def cached_test_constants(dataset: str) -> tuple[str, str]:
    """(file, what it holds) of the per-pixel public constants of ``dataset``'s test split, even rows."""
    path, constants = test_split_constants_file(load_dataset(dataset), "even", cache_dir() / "zscore-constants")
    return str(path), f"{constants.dim} per-pixel means and stds: {constants.source}; sha256 {constants.sha256[:12]}…"


@st.cache_resource(show_spinner="Reading the sweep…", max_entries=2)  # its runs with their histories: a few MB a sweep
def stored_sweep(path: str, sweep: int, version: tuple) -> StoredSweep:
    """One read of a sweep's runs, shared by every view of it until the store changes (``version``)."""
    return read_stored_sweep(ResultStore(path), sweep)


@st.cache_data(show_spinner="Reading the other sweeps…", max_entries=4)
def overlay_views(path: str, sweeps: tuple[int, ...], version: tuple) -> dict:
    """{name: aggregate} of the sweeps drawn beside the one shown, each read as its own view reads it."""
    return overlay_aggregates(ResultStore(path), list(sweeps))


@st.cache_data(show_spinner="Reading the sweep…", max_entries=16)
def sweep_view(path: str, sweep: int, version: tuple, test_rows: str, test_inputs: str | None) -> SweepView:
    """The sweep as the results panel shows it, on these test rows through these test images: a click that
    changes nothing in the store (the metric, a second ε axis, a row half seen before) reads nothing."""
    return view_sweep(
        ResultStore(path), stored_sweep(path, sweep, version), test_rows=test_rows, test_inputs=test_inputs
    )


@st.cache_data(show_spinner=False, max_entries=4)
def run_cells(path: str, run_ids: tuple[int, ...], axis: str | None, version: tuple) -> dict[int, SettledCells]:
    """What the progress table shows that only changes when a run finishes (axis values, accuracies, notes): read
    again then, not on each 2 s refresh (a 1000-run sweep's results are tens of MB)."""
    return settled_cells(ResultStore(path), run_ids, axis=axis)


@st.cache_data(show_spinner=False, max_entries=32)
def runtime_estimate(spec: SweepSpec, path: str, version: tuple, slots: int, keys: frozenset[str]) -> RuntimeEstimate:
    """The estimated wall time of the sweep's runs with ``keys`` from this machine's past runs: read again only when
    a run finishes."""
    return estimate_sweep_runtime(spec, ResultStore(path), slots=slots, keys=keys)


@st.cache_data(show_spinner=False, max_entries=16)
def data_can_make(spec: SweepSpec) -> tuple[frozenset[str], tuple[str, ...]]:
    """(the keys of the sweep's runs its data can make, a line per reason for the others): loads the data once."""
    kept, left_out = runs_the_data_can_make(sweep_jobs(spec))
    return frozenset(key for _, _, key in kept if key is not None), left_out


def _launch(spec) -> None:
    """Button callback: queue the sweep, remember its runs (session + URL so a reload finds them)."""
    try:
        launch = launch_sweep(spec, store(), max_parallel=st.session_state[K + "parallel"])
    except ValueError as exc:
        st.session_state[K + "launch_error"] = str(exc)
        return
    st.session_state[K + "run_ids"] = list(launch.run_ids)
    st.session_state[K + "sweep"] = launch.sweep_id
    st.session_state[K + "pumping"] = True  # launched here: this session starts its workers
    st.session_state[K + "show"] = launch.sweep_id  # the Results panel follows what was just launched
    st.session_state[K + "launch_error"] = None
    st.query_params["sweep"] = str(launch.sweep_id)


def _typed(col, label: str, key: str, parse):
    """A number typed as text and parsed by the library; None (with "invalid: …" under the box) when it is bad."""
    text = col.text_input(label, key=K + key)
    try:
        return parse(text)
    except ValueError as exc:
        col.error(str(exc))
        return None


@st.cache_resource(show_spinner="Reading the release…", max_entries=4)
def saved_release(files: dict[str, bytes], folder: str) -> ReleaseFile:
    return save_release_upload(files, folder)  # kept beside the store: background runs read it from there


@st.cache_data(show_spinner="Recomputing the card's ε…", max_entries=16)
def card_check(sha256: str, _card: dict) -> CardCheck:
    return verify_card(_card)  # the file's hash is the key: the same bytes have the same card


@st.cache_resource(show_spinner="Reading your file…", max_entries=4)
def saved_held_out(release_sha256: str, _release: ReleaseFile, data: bytes, filename: str, folder: str) -> OwnData:
    return held_out_upload(_release, data, filename, folder)  # keyed by the release's hash and the data


def _own_data() -> OwnData | None:
    """One's own file for a sweep: uploaded, its label column, the share of records held out as the test split."""
    return held_out_data_file(
        K + "own_",
        str(store().path.parent / "data"),
        missing="Upload a .csv or .npz to sweep a release of your own data; its held-out records score the models.",
    )


def _release_file_builder():
    """Models on a release someone made (synthesize, or the Mixed samples page's download)."""
    uploads = st.file_uploader(
        "Release: FILE.npz, or FILE.csv with its FILE.card.json (as synthesize and the Mixed samples page write them)",
        type=["npz", "csv", "json"],
        accept_multiple_files=True,
        key=K + "release_upload",
    )
    st.caption(
        "Only the release, its card and the dataset's public test split are used: training on a release is "
        "post-processing, so ε is the card's. Larger files: `python -m dpmix_core train --release FILE`."
    )
    if not uploads:
        return None
    try:
        release = saved_release({u.name: u.getvalue() for u in uploads}, str(store().path.parent / "releases"))
        summary = release_summary(release)
    except ValueError as exc:
        st.error(str(exc))
        return None
    st.markdown(f"**Release:** {summary}")
    if release.card.get("statement"):  # cards written since the statement exists carry it
        with st.expander("Its privacy statement (from the card)"):
            st.write(release.card["statement"])
    if st.button("Recompute the card's ε from its description", key=K + "verify"):
        st.session_state[K + "verified"] = release.sha256
    if st.session_state.get(K + "verified") == release.sha256:
        check = card_check(release.sha256, release.card)
        (st.success if check.matches else st.error)(
            ("Verified: " if check.matches else "Not verified: ") + check.reason
        )
        st.dataframe(check.rows, hide_index=True)
    own = None
    if (held := held_out_records(release.card)) is not None:  # a release of one's own file that held records out
        data_upload = st.file_uploader(
            "The data file it was made from (.csv / .npz)",
            type=["csv", "npz"],
            key=K + "release_data",
            help="Its card names the file by its SHA-256 and says which records were held out; the models are scored "
            "on those, which the release never saw.",
        )
        if data_upload is None:
            st.info(
                f"This release held {held:,} records of its data file out and has no public test split: upload that "
                "file to score models on them."
            )
            return None
        try:
            own = saved_held_out(
                release.sha256, release, data_upload.getvalue(), data_upload.name, str(store().path.parent / "data")
            )
        except ValueError as exc:
            st.error(str(exc))
            return None
        st.caption(f"**Scored on:** {own.dataset.source}.")
    choices, default = release_model_choices(release)
    c1, c2, c3 = st.columns(3)
    models = c1.multiselect("Models", choices, default=list(default), key=K + "release_models")
    epochs = c2.number_input("Epochs (gradient-trained models)", 1, 1000, 10, key=K + "release_epochs")
    repeats = c3.number_input("Repeats (seeds)", 1, 100, 2, key=K + "release_repeats")
    try:
        name = next(u.name for u in uploads if not u.name.lower().endswith(".json"))
        return release_file_spec(
            release,
            models=tuple(models),
            epochs=epochs,
            repeats=repeats,
            display_name=name,
            available=cached_datasets(),
            description=summary,
            own=own,
        )
    except ValueError as exc:
        st.error(str(exc))
        return None


def _sweep_builder(datasets: dict[str, str]):
    # what was set in "Build your own" survives a visit to a preset, a release file or one's own file before its
    # upload (runs that do not draw it); its model and epochs start from defaults that depend on the data
    keep_state({K + key: value for key, value in BUILDER_DEFAULTS.items()})
    keep_state({key: st.session_state[key] for key in (K + "model", K + "model_own", K + "epochs", K + "epochs_own")
                if key in st.session_state})  # fmt: skip
    mode = st.radio(
        "Sweep", ["Published preset", "Build your own", "Models on a release file"], horizontal=True, key=K + "mode"
    )
    if mode == "Models on a release file":
        return _release_file_builder()
    dataset = dataset_or_own_file("Training data", K + "dataset", datasets)
    own, feature_range, range_epsilon = None, None, None
    if dataset == OWN_FILE:
        if mode == "Published preset":
            st.info("The presets reproduce the papers on their datasets: pick *Build your own* to sweep your file.")
            return None
        if (own := _own_data()) is None:
            return None
        if needs_feature_range(own.dataset):
            feature_range = feature_bounds(K + "own_", own.dataset)
            ranges_on, range_epsilon = private_ranges_box(K + "own_")
            if ranges_on and range_epsilon is None:
                return None
    if mode == "Published preset":
        names = preset_names()
        name = st.selectbox(
            "Preset",
            names,
            index=names.index(DEMO_PRESET),
            key=K + "preset",
            format_func=lambda n: f"{n}  (quick)" if get_preset(n).quick else n,
        )
        spec = get_preset(name)
        st.caption(f"**{spec.title}** — {spec.description}")
        return with_dataset(spec, dataset)
    c1, c2, c3 = st.columns(3)
    mechanisms = c1.multiselect("Mechanisms", ["dpmix", "class-centric", "poisson", "local"], key=K + "mechs")
    records, constants_file = "unit", None
    if "class-centric" in mechanisms and own is None:  # one's own file: [0,1] records with its public bounds
        records = c1.selectbox(
            "Class-centric records",
            list(RECORDS),
            format_func=RECORDS.get,
            key=K + "records",
            help="DP-CDA z-scores every pixel and clips each record to ‖x‖ ≤ 1. Its constants must be public for "
            "ε to hold: the dataset's documented mean and std, or per-pixel ones from half of the test split (the "
            "results are then read on the other half, which never touched them).",
        )
    if records == "zscore-test-even":
        try:
            constants_file, constants_text = cached_test_constants(dataset)
        except (ValueError, OSError) as exc:
            c1.error(str(exc))
            return None
        c1.caption(constants_text)
    axis_label = c1.selectbox("Axis", list(AXES), key=K + "axis")
    values_text = c1.text_input("Values (comma-separated)", key=K + "values")
    baselines = c1.multiselect("Baselines on the same model", ["non-private", "dp-sgd"], key=K + "baselines")
    # counts and delta typed as text: 1e4 parses exactly; a bad entry says "invalid: …" under its box
    l = _typed(c2, "ℓ (Poisson: m)", "l", lambda t: parse_count(t, name="ℓ", maximum=60_000))
    T = _typed(c2, "T", "T", lambda t: parse_count(t, name="T", maximum=1_000_000))
    sigma = _typed(c2, "σx (when not on the axis)", "sigma", lambda t: parse_real(t, name="σx", minimum=0.0))
    accountant = c2.selectbox(
        "Accountant for target ε",
        [AUTO_ACCOUNTANT, *ACCOUNTANTS],
        key=K + "accountant",
        format_func=lambda name: "auto (tightest per mechanism)" if name == AUTO_ACCOUNTANT else name,
        help="auto calibrates Poisson mixing with pld-poisson and the other mechanisms with rdp-wor, so the series "
        "meet at the same certified ε. A named accountant must cover every mechanism's sampling scheme.",
    )
    delta = _typed(c2, "δ", "delta", lambda t: parse_real(t, name="δ", minimum=0.0, maximum=0.5, strict_minimum=True))
    features_only = own is not None and own.dataset.x_train.ndim < 3  # a table of features: no image model
    own_key = "" if own is None else "_own"  # one's own file starts from its own defaults
    keep_state({K + "model" + own_key: "linear" if features_only else MODELS[0]})
    model = c3.selectbox("Model", MODELS, key=K + "model" + own_key)
    if model in CLOSED_FORM_MODELS:
        c3.caption(f"{model}: {PROTOCOLS[model].source}.")
    elif own is not None and model == "linear":
        c3.caption(f"linear on your file: {OWN_DATA_LINEAR.source}.")
    loss = c3.selectbox("Loss", LOSSES, key=K + "loss")
    keep_state({K + "epochs" + own_key: 3 if own is None else train_epochs(model, own_data=True)})
    epochs = c3.number_input("Epochs", min_value=1, max_value=1000, key=K + "epochs" + own_key)
    repeats = c3.number_input("Repeats (seeds)", min_value=1, max_value=100, key=K + "repeats")
    if None in (l, T, sigma, delta):
        return None
    try:
        values = tuple(float(v) for v in values_text.replace(";", ",").split(",") if v.strip())
        return custom_spec(
            mechanisms=tuple(mechanisms),
            axis=AXES[axis_label],
            values=values,
            repeats=repeats,
            model=model,
            loss=loss,
            epochs=epochs,
            l=l,
            T=T,
            sigma=sigma,
            accountant=accountant,
            delta=delta,
            dataset=dataset,
            baselines=tuple(baselines),
            records=records,
            zscore_constants_file=constants_file,
            own=own,
            feature_range=feature_range,
            range_epsilon=range_epsilon,
        )
    except ValueError as exc:
        st.error(str(exc) if "could not convert" not in str(exc) else f"Values must be numbers: {values_text!r}.")
        return None


def _launch_panel(spec) -> None:
    if problem := spec_problem(spec):  # before the run list is built: that costs time too
        st.error(problem)
        return
    try:
        keys, left_out = data_can_make(spec)
    except ValueError as exc:  # the data does not load
        st.error(str(exc))
        return
    runs = len(keys)
    c1, c2 = st.columns([2, 1])
    c2.number_input("Parallel workers", min_value=1, max_value=64, value=default_max_parallel(), key=K + "parallel")
    slots = st.session_state[K + "parallel"]
    estimate = runtime_estimate(spec, str(store().path), store().results_version(), slots, keys)
    reused = f"{estimate.runs_reused} of them already in the store" if estimate.runs_reused else "Runs in the store"
    c1.markdown(f"**{runs} runs**, estimated **{estimate.text}**. {reused} are reused, not recomputed.")
    if not runs:
        st.error("This data can make none of the sweep's runs: " + "; ".join(left_out))
        return
    if left_out:
        st.warning("Left out, this data cannot make them (not queued): " + "; ".join(left_out))
    st.button("Launch in the background", type="primary", on_click=_launch, args=(spec,), key=K + "launch")
    if err := st.session_state.get(K + "launch_error"):
        st.error(err)
    file = spec_file_name(spec.name)
    st.download_button(
        "This sweep as a spec file (JSON)",
        spec_file_text(spec, file.removesuffix(".json")),
        file_name=file,
        mime="application/json",
        key=K + "spec_file",
        help="Every field of this sweep, defaults included: edit it and run it from a terminal or on a cluster with "
        "python -m dpmix_core sweep FILE.json (--backend ray). Its unchanged runs are these: finished ones are "
        "reused.",
    )


def _progress_panel() -> None:
    """The runs this browser session launched (pumped from here), or found again through ?sweep= (a reload, a
    shared link: watched, and resumed here only when asked)."""
    ids = st.session_state.get(K + "run_ids") or []
    if ids:
        sweep = st.session_state.get(K + "sweep")
        pump = bool(st.session_state.get(K + "pumping"))
        found = None if sweep is None else store().get_sweep(sweep)
        title = "Progress" if found is None else f"Progress of {found.name} (#{found.id})"  # not the preset above
        axis = None if sweep is None else sweep_axis(store(), sweep)
        _live_runs(ids, axis=axis, key="progress", pump=pump, title=title)
        if not pump:
            _resume_offer(ids, "progress")


def _watch_panel(stored: StoredSweep) -> None:
    """A shown sweep's runs still queued or running that this session did not launch (a `sweep` in a terminal,
    another browser): watched live, not started from here (whoever launched them runs them) unless resumed."""
    ids = sweep_run_ids(store(), stored)
    if set(ids) <= set(st.session_state.get(K + "run_ids") or []):
        return  # already live in the progress panel above
    if any(store().counts(run_ids=ids)[status] for status in ACTIVE):
        st.caption("This sweep still has runs queued or running (launched elsewhere: a terminal or another browser).")
        _live_runs(ids, axis=sweep_axis(store(), stored), key=f"watch_{stored.id}", pump=False)
        _resume_offer(ids, f"watch_{stored.id}")


def _resume_offer(ids: list[int], key: str) -> None:
    """Runs that no worker takes (their launcher stopped): said, and run here only on a click."""
    waiting = waiting_without_worker(store(), ids)
    if not waiting:
        return
    total = sum(waiting.values())
    st.info(
        f"{total} run(s) of this sweep wait ({', '.join(f'{n} {status}' for status, n in waiting.items())}) and none "
        "is running: whoever launched them stopped (Ctrl-C on `sweep`, or the app's server was restarted). Nothing "
        "starts until you resume them; an interrupted run continues from its last checkpoint."
    )
    st.button(f"Resume the {total} run(s) here", on_click=_resume, args=(ids,), key=K + key + "_resume")


def _resume(ids: list[int]) -> None:
    """Button callback: what a re-run of the sweep does, on this server; the progress panel pumps from now on."""
    resume_runs(store(), ids, max_parallel=st.session_state.get(K + "parallel"))
    if ids == st.session_state.get(K + "run_ids"):
        st.session_state[K + "pumping"] = True


def _live_runs(ids: list[int], *, axis: str | None, key: str, pump: bool, title: str = "Progress") -> None:
    """Status counts and one row per run (with its value on the sweep's axis), refreshed every 2 s while any is
    active; the whole page reruns when a run finishes (the plots below gain its point) and once the last one ends."""
    s = store()
    counts = s.counts(run_ids=ids)
    active, done = any(counts[status] for status in ACTIVE), counts["done"]

    @st.fragment(run_every=2.0 if active else None)
    def live() -> None:
        # a watcher notices dead and stale workers too (their runs are not "running" forever), starting nothing
        pump_local(s, max_parallel=st.session_state.get(K + "parallel"), start=pump)
        settled = run_cells(str(s.path), tuple(ids), axis, s.results_version())
        current = run_table(s, ids, axis=axis, settled=settled)
        still = current["status"].isin(ACTIVE).any()
        if active and (not still or (current["status"] == "done").sum() > done):
            st.rerun()  # a run finished: redraw the results with it (and stop polling once none is active)
        by_status = current["status"].value_counts().to_dict()
        st.markdown(f"**{title}** — " + ", ".join(f"{v} {k}" for k, v in by_status.items()))
        st.dataframe(
            current,
            hide_index=True,
            width="stretch",
            column_config={
                "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0),
                "val accuracy": st.column_config.NumberColumn(format="%.3f"),
                "test accuracy": st.column_config.NumberColumn(format="%.3f"),
                "loss": st.column_config.NumberColumn(format="%.3g"),  # 20.1, 0.75 and 0.0604 all fit
                "eta (s)": st.column_config.NumberColumn(format="%.0f"),
                "note": st.column_config.TextColumn("note", width="large"),
            },
        )
        for run_id, note in zip(current["run"], current["note"], strict=True):
            if note:
                st.caption(f"Run {run_id}: {note}")
        table_download(current, K + key, "sweep_progress")
        if still:
            st.button("Cancel the remaining runs", on_click=cancel_runs, args=(s, ids), key=K + key + "_cancel")

    live()


def _solve_epsilon_panel(agg, axis: str | None, against: str = "axis", *, best_table: bool = False) -> None:
    """ "What ε do I need for X % accuracy?", read off the stored curve (issue #13 §5); a self-contained block."""
    choices = epsilon_choices(agg, axis)
    if not choices:
        return
    st.markdown("**What ε do I need?** Read off this sweep's curve, with the spread over seeds.")
    c1, c2, c3 = st.columns(3)
    wanted = c1.number_input(
        "Test accuracy wanted (%)", min_value=1.0, max_value=100.0, value=90.0, step=0.5, key=K + "solve_acc"
    )
    first = CERTIFIED if against == "certified" and CERTIFIED in choices else choices[0]  # the chart's own ε
    epsilon_name = c3.selectbox("ε from", choices, index=choices.index(first), key=K + f"solve_eps_{against}")
    series = solvable_series(agg, axis, epsilon_name)
    if not series:
        st.info(
            "No series of this sweep has two points at different ε: there is no curve to read off"
            + (
                f" (each series holds its ε along {axis_column(axis)}: the best-{axis_column(axis)} table above reads "
                "this sweep)."
                if axis in TUNABLE_AXES and best_table
                else "."
            )
        )
        return
    name = c2.selectbox("Series", series, key=K + "solve_series")
    try:
        answer = solve_epsilon(agg, axis=axis, series=name, accuracy=wanted / 100, epsilon_name=epsilon_name)
    except ValueError as exc:
        st.error(str(exc))
        return
    st.info(answer.sentence())
    st.caption(
        "Between the swept points the curve is read along a straight line on a log-ε axis. Beyond the sweep, "
        "the **Best release** page (or `python -m dpmix_core best-release --target-epsilon E`) searches the best "
        "Poisson mixing release for a budget, of a dataset's features or of your own file."
    )


def _results_panel(query_sweep: int | None) -> None:
    names = sweep_choices(store())
    if not names:
        st.info("No results yet: launch a sweep above. Results are kept in the store and load instantly later.")
        return
    default = st.session_state.get(K + "sweep") or query_sweep or default_sweep(store())
    ids = list(names)
    chosen = st.selectbox(
        "Show results of",
        ids,
        index=ids.index(default) if default in ids else len(ids) - 1,
        format_func=names.get,
        key=K + "show",
    )
    if note := sweep_activity(store(), chosen):
        st.caption(note)
    path, version = str(store().path), store().results_version()
    stored = stored_sweep(path, chosen, version)
    declared = sweep_test_rows(store(), stored)  # the sweep's own reading, until the user picks another
    test_rows = st.radio(
        "Accuracy on the test split's",
        TEST_ROWS,
        index=TEST_ROWS.index(declared),
        format_func=lambda rows: f"{rows} rows" + (" (the sweep's)" if rows == declared else ""),
        horizontal=True,
        key=K + f"rows_{chosen}",
        help="A release whose public constants came from one half of the test split (e.g. the even rows) is read "
        "on the other half, which never touched them. Runs stored without per-half accuracy are left out of a "
        "half.",
    )
    own_inputs, loaders = sweep_test_inputs(store(), stored)
    test_inputs = own_inputs
    if len(loaders) > 1:  # a clipped class-centric z-score release: the same models read through each loader
        test_inputs = st.radio(
            "Test images",
            loaders,
            index=loaders.index(own_inputs),
            format_func=lambda name: TEST_INPUTS_TITLES[name] + (" (the sweep's)" if name == own_inputs else ""),
            horizontal=True,
            key=K + f"inputs_{chosen}",
            help="The test split goes through the release's z-score and its clip to ||x|| <= c, through the "
            "z-score only (DP-CDA's 'original test partition' read either way), or through the clip and then a "
            "factor that puts the images at the released points' median norm (read off the release, no test "
            "labels). Training never reads the test split, so every reading is of the same trained models; runs "
            "stored before a reading was recorded are left out of it.",
        )
    view = sweep_view(path, chosen, version, test_rows, test_inputs)
    agg, axis, title = view.agg, view.axis, view.title
    if unreadable := stored.unreadable:
        st.warning(
            f"{len(unreadable)} run(s) of this sweep could not be read and are left out: "
            + "; ".join(f"run {run_id}: {reason}" for run_id, reason in unreadable[:5])
        )
    _watch_panel(stored)
    if agg.empty:
        finished = not sweep_results(store(), stored, test_rows="all")[0].empty
        st.info(
            "No finished run of this sweep has this reading (they were stored before runs recorded it): read all "
            "rows, or the sweep's own test images."
            if finished
            else "No finished runs in this sweep yet."
        )
        return
    if left_out := view.left_out:
        st.caption(
            f"{left_out} finished run(s) of this sweep have no reading on these test rows or test images (stored "
            "before runs recorded one) and are left out."
        )
    eps_cols = epsilon_columns(agg)
    c1, c2, c3 = st.columns(3)
    metric = c1.radio(
        "Metric",
        ["test_accuracy", "test_mse"],
        horizontal=True,
        key=K + "metric",
        disabled=agg["test_mse_count"].sum() == 0,
    )
    against = c2.radio(  # one radio per axis kind: Streamlit keeps a keyed radio's choice by its (axis's) label
        "Against",
        AGAINST,
        index=AGAINST.index(st.session_state.get(K + "against", AGAINST[0])),
        horizontal=True,
        key=K + f"against_{axis}",
        format_func=lambda a: against_title(a, axis),
        help="The sweep's own axis (what it turned: σ, ℓ, T or the target ε of each series' accountant), or each "
        "point's certified ε: the smallest rigorous upper bound its runs recorded, so series calibrated by "
        "different accountants (or swept along σ or ℓ) meet on one honest ε axis.",
    )
    st.session_state[K + "against"] = against  # carried to the next sweep's radio
    others: list[int] = []
    if against == "certified":
        others = st.multiselect(
            "Beside other sweeps (on the same certified-ε axis)",
            [i for i in ids if i != chosen],
            format_func=names.get,
            key=K + "beside",
            help="Their points join this chart at their own certified ε, each series named after its sweep: "
            "sweeps that turned different knobs (σ, ℓ, a target ε of another accountant) compared at one ε.",
        )
    second = c3.selectbox(
        "ε on a second axis",
        ["(none)", *eps_cols],
        key=K + "eps2",
        format_func=lambda c: c.removeprefix("epsilon_"),
        disabled=against == "certified",
    )
    published, checks, check = view.published, view.checks, view.check
    fig, against_caption = sweep_figure(
        agg,
        axis,
        against=against,
        title=title,
        metric=metric,
        epsilon_column=None if second == "(none)" else second,
        published=published,
        full_protocol=check.table if check is not None and check.full_runs else None,
        name=view.name,
        overlay=overlay_views(path, tuple(others), version) if others else None,
    )
    chart(
        fig,
        K + "chart",
        {"sweep": names[chosen], "axis": axis, "metric": metric, "second axis": second, "against": against}
        | ({"beside": ", ".join(names[i] for i in others)} if others else {}),
    )
    st.caption(
        "Error bars: ±1 standard deviation over repeats (seeds). Dotted lines: runs the axis does not move "
        f"(e.g. non-private). {MARKERS_CAPTION} ε columns: mean per point, from each accountant that applies "
        "(gdp-clt is an approximation; the others are upper bounds)."
        + (f" {against_caption}" if against_caption else "")
    )
    if blind := no_signal_note(agg):
        st.caption(blind)
    comparison = view.comparison  # the papers' own numbers (reference points have none)
    if len(comparison):
        st.markdown(
            "**Published vs ours** (open stars in the plot): a gap of more than "
            f"{REPRODUCED_WITHIN_PTS:g} points below the paper counts as not reproduced (above it: 'above the "
            "paper'); docs/REPRODUCTION.md says why."
        )
        st.dataframe(comparison, hide_index=True, width="stretch")
        table_download(comparison, K + "published", f"sweep_{chosen}_published_vs_ours")
    if picks := view.best_axis:
        _best_axis_panel(chosen, picks)
    if check is not None:
        _quick_vs_full_panel(chosen, check, {name: c for name, c in checks.items() if name != test_inputs})
    st.dataframe(agg, hide_index=True, width="stretch")
    st.download_button(
        "Download results (CSV)",
        agg.to_csv(index=False).encode(),
        file_name=f"sweep_{chosen}.csv",
        mime="text/csv",
        key=K + "csv",
    )
    _solve_epsilon_panel(agg, axis, against, best_table=bool(view.best_axis))  # that table is shown above
    _report_panel(chosen, metric, None if second == "(none)" else second, (test_rows, test_inputs), against, others)


def _best_axis_panel(sweep: int, picks: tuple[AxisPick, ...]) -> None:
    """Each series' best ℓ (or T), chosen on the even test rows and read on the odd ones, beside the paper's."""
    name = axis_column(picks[0].axis)
    st.markdown(f"**Best {name} per series**: chosen on the even test rows, its accuracy read on the odd rows.")
    table = best_axis_table(picks)
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(best_axis_caption(name))
    for note in best_axis_notes(picks, name):
        st.caption(note)
    table_download(table, K + "best_axis", f"sweep_{sweep}_best_{picks[0].axis}")


def _quick_vs_full_panel(sweep: int, check: QuickVsFull, others: dict[str, QuickVsFull]) -> None:
    """A quick preset's points next to its full protocol's runs in the store (open diamonds in the chart), and how
    the same comparison comes out through the other test images its runs were read with."""
    st.markdown(
        f"**Quick vs its full protocol** (a quick run takes a minute or less; the target is {QUICK_WITHIN_PTS:g} "
        f"points or less at each point): {check.sentence(markdown=True)}"
    )
    tallies = [(TEST_INPUTS_TITLES[name], c.tally()) for name, c in others.items()]
    if any(compared for _, (_, compared) in tallies):
        st.caption(
            "Through the other test images (pick them under Test images above): "
            + "; ".join(
                f"{title}: {agree} of {compared} points within {QUICK_WITHIN_PTS:g}"
                for title, (agree, compared) in tallies
            )
            + "."
        )
    if check.full_runs:
        st.dataframe(check.table, hide_index=True, width="stretch")
        table_download(check.table, K + "quick_vs_full", f"sweep_{sweep}_quick_vs_full")


def _report_panel(
    sweep: int,
    metric: str,
    epsilon_column: str | None,
    reading: tuple[str, str],
    against: str = "axis",
    beside: list[int] | None = None,
) -> None:
    """A one-file HTML report of the sweep shown (figure, reading, tables), for a deck or an e-mail."""
    st.subheader("Share")
    if st.button("Prepare a one-file HTML report of this sweep (reading, figure, tables)", key=K + "report"):
        try:
            test_rows, test_inputs = reading
            page = sweep_report(
                store(),
                sweep,
                metric=metric,
                epsilon_column=epsilon_column,
                test_rows=test_rows,
                test_inputs=test_inputs,
                against=against,
                beside=beside or [],
            )
        except ValueError as exc:
            st.error(str(exc))
            return
        st.download_button(
            "Download the report (.html, opens offline)",
            data=page.encode(),
            file_name=f"dpmix_sweep_{sweep}_report.html",
            mime="text/html",
            key=K + "report_download",
        )


st.title("Train & trade-offs")
st.write(
    "Pick a privacy level, launch training in the background, keep exploring, and watch the accuracy-versus-"
    "privacy curves fill in. Jobs run in separate processes and survive page switches and reloads."
)
try:
    st.caption(f"Results store: {store().path}")
except StoreError as exc:  # damaged, empty or unwritable store: one clear line, nothing else can work
    st.error(str(exc))
    st.stop()

st.session_state.setdefault(K + "run_ids", [])
query_sweep = None
try:
    query_sweep = sweep_id_from_query(store(), st.query_params.get("sweep"))
except (ValueError, StoreError) as exc:
    st.error(str(exc))
if not st.session_state[K + "run_ids"] and query_sweep is not None:  # a reload finds its sweep again
    st.session_state[K + "run_ids"] = sweep_run_ids(store(), query_sweep)
    st.session_state[K + "sweep"] = query_sweep

spec = _sweep_builder(cached_datasets())
try:
    if spec is not None:
        _launch_panel(spec)
    _progress_panel()
    st.divider()
    st.subheader("Results")
    _results_panel(query_sweep)
except StoreError as exc:
    st.error(str(exc))
