"""AppTest drives "Train & trade-offs": build a tiny sweep, launch it, see it finish and plot."""

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from app_sweeps import launch_tiny_own_sweep
from streamlit.testing.v1 import AppTest

from dpmix_core.experiments.presets import DEMO_PRESET, get_preset
from dpmix_core.runtime.store import ResultStore

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")


@pytest.fixture
def at(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))  # offline: only the embedded sample
    (tmp_path / "no-data").mkdir()
    return AppTest.from_file(PAGE, default_timeout=120).run()


def _wait_until_finished(at, seconds: float = 150) -> None:
    """Rerun the page until the progress table has no queued or running run; every run must be done."""
    deadline = time.time() + seconds
    statuses: set = set()
    while time.time() < deadline:
        at.run()
        statuses = set(at.dataframe[0].value["status"]) if at.dataframe else set()
        if statuses and not statuses & {"queued", "running"}:
            break
        time.sleep(1.0)
    assert statuses == {"done"}, at.dataframe[0].value.to_dict("records")


def test_preset_mode_shows_estimate(at):
    assert not at.exception and not at.error
    assert any("runs**, estimated" in m.value and "rough: no past runs" in m.value for m in at.markdown)
    assert at.selectbox(key="tr_dataset").value == "embedded"
    assert at.selectbox(key="tr_preset").value == DEMO_PRESET and get_preset(DEMO_PRESET).quick  # a demo's default


def test_the_sweep_on_screen_downloads_as_a_spec_file(at):
    from dpmix_core.experiments.spec import load_spec, spec_file_name, spec_file_text
    from dpmix_core.experiments.trade_offs import sweep_jobs, with_dataset

    (button,) = [b for b in at.get("download_button") if "spec file" in b.proto.label]
    assert "python -m dpmix_core sweep FILE.json" in button.proto.help
    spec = with_dataset(get_preset(DEMO_PRESET), "embedded")  # what the page shows by default
    file = spec_file_name(spec.name)
    assert file == spec.name.replace(".", "_").replace("@", "_") + ".json"
    again = load_spec(json.loads(spec_file_text(spec, file.removesuffix(".json"))))
    assert again.name == file.removesuffix(".json") != spec.name  # a sweep of its own ...
    assert [key for *_, key in sweep_jobs(again)] == [key for *_, key in sweep_jobs(spec)]  # ... of the same runs


def test_a_preset_run_the_data_cannot_make_is_named_before_launch_and_not_counted(at):
    """thesis-4.2-l-quick on the embedded sample: l = 512 of one class is more than its 400 records a class."""
    at.selectbox(key="tr_preset").set_value("thesis-4.2-l-quick").run()
    assert not at.exception and not at.error
    assert any(w.value.startswith("Left out, this data cannot make them") and "l=512" in w.value for w in at.warning)
    assert any(m.value.startswith("**4 runs**") for m in at.markdown)
    assert at.button(key="tr_launch")


def test_fashion_mnist_on_disk_is_offered_but_not_the_default(tmp_path, monkeypatch):
    """A dataset found on disk joins the Training data list; the page still starts on MNIST or the sample."""
    import streamlit as st
    from fake_datasets import tiny_arrays, write_idx_folder

    write_idx_folder(tmp_path / "data" / "fashion-mnist", tiny_arrays(3, n_train=100, n_test=20))
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()  # the list of datasets on disk is cached for a minute
    try:
        at = AppTest.from_file(PAGE, default_timeout=120).run()
        assert not at.exception and not at.error
        assert at.selectbox(key="tr_dataset").options[0].startswith("full Fashion-MNIST (60,000 train")
        assert at.selectbox(key="tr_dataset").value == "embedded"
    finally:
        st.cache_data.clear()


def test_the_default_preset_is_quick_and_draws_a_curve():
    """The preset offered first is quick and moves one knob across its values (a curve, not a point)."""
    spec = get_preset(DEMO_PRESET)
    assert spec.quick and spec.axis and len(spec.values) >= 3 and len(spec.runs()) <= 8


def test_bad_values_show_an_error(at):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.text_input(key="tr_values").input("0.5, abc").run()
    assert not at.exception and any("numbers" in e.value for e in at.error)
    at.text_input(key="tr_values").input("1.0").run()
    at.multiselect(key="tr_baselines").set_value(["dp-sgd"]).run()
    assert any("target ε axis" in e.value for e in at.error)


def test_typed_numbers_are_checked_next_to_their_box(at):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.text_input(key="tr_T").input("0").run()
    assert any(e.value.startswith("invalid: T = 0") for e in at.error)
    assert not any("runs**, estimated" in m.value for m in at.markdown)  # nothing to launch from a bad entry
    at.text_input(key="tr_T").input("1e9").run()
    assert any("at most 1,000,000" in e.value for e in at.error)
    at.text_input(key="tr_T").input("2e3").run()
    assert not at.error and any("runs**, estimated" in m.value for m in at.markdown)


def test_a_scatternet_model_builds_a_feature_release_or_says_which_mechanism(at):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_model").set_value("scatter-cnn").run()  # default mechanism: class-centric
    assert not at.exception and any("only the poisson mechanism" in e.value for e in at.error)
    at.multiselect(key="tr_mechs").set_value(["poisson"]).run()
    assert not at.exception and not at.error and any("runs**, estimated" in m.value for m in at.markdown)


def test_a_target_epsilon_sweep_over_both_sampling_schemes_needs_an_accountant_for_each(at):
    """auto (the default) calibrates Poisson with pld-poisson and class-centric with rdp-wor; rdp-wor alone cannot
    calibrate Poisson mixing and is refused next to the controls, before anything is queued."""
    at.radio(key="tr_mode").set_value("Build your own").run()
    assert at.selectbox(key="tr_accountant").value == "auto"
    at.multiselect(key="tr_mechs").set_value(["class-centric", "poisson"])
    at.selectbox(key="tr_axis").set_value("target ε")
    at.text_input(key="tr_values").input("2.0").run()
    assert not at.exception and not at.error and any("runs**, estimated" in m.value for m in at.markdown)
    at.selectbox(key="tr_accountant").set_value("rdp-wor").run()
    assert not at.exception and any("'rdp-wor' cannot calibrate a poisson release" in e.value for e in at.error)
    assert not any("runs**, estimated" in m.value for m in at.markdown)


def test_class_centric_records_can_be_dp_cdas_z_scored_ones(at, tmp_path, monkeypatch):
    """[0,1] pixels by default; DP-CDA's z-score with the dataset's public pair, or per-pixel constants from the
    test split's even rows (computed once, kept by their sha256 in the cache); hidden without class-centric."""
    import streamlit as st

    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()
    at.radio(key="tr_mode").set_value("Build your own").run()
    assert at.selectbox(key="tr_records").value == "unit"
    for records in ("zscore", "zscore-test-even"):
        at.selectbox(key="tr_records").set_value(records).run()
        assert not at.exception and not at.error and any("runs**, estimated" in m.value for m in at.markdown)
    assert any("784 per-pixel means and stds: embedded test split, even rows" in c.value for c in at.caption)
    assert len(list((tmp_path / "cache" / "zscore-constants").glob("*.npz"))) == 1
    at.multiselect(key="tr_mechs").set_value(["dpmix"]).run()
    assert not at.exception and not at.error and not [s for s in at.selectbox if s.key == "tr_records"]
    st.cache_data.clear()


def test_the_closed_form_model_is_offered_and_refuses_a_dp_sgd_baseline(at):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_model").set_value("corrected-lsq").run()
    assert not at.exception and not at.error and any("runs**, estimated" in m.value for m in at.markdown)
    assert any("epochs, optimiser and loss unused" in c.value for c in at.caption)  # the unused controls, said
    at.selectbox(key="tr_axis").set_value("target ε")
    at.text_input(key="tr_values").input("1.0")
    at.multiselect(key="tr_baselines").set_value(["dp-sgd"]).run()
    assert not at.exception and any("closed form; DP-SGD" in e.value for e in at.error)


def test_launch_tiny_job_see_it_complete_and_plot(at):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.multiselect(key="tr_mechs").set_value(["dpmix"])
    at.text_input(key="tr_values").input("0.3")
    at.multiselect(key="tr_baselines").set_value([])
    at.text_input(key="tr_l").input("4")
    at.text_input(key="tr_T").input("3e2")
    at.selectbox(key="tr_model").set_value("linear")
    at.number_input(key="tr_epochs").set_value(1)
    at.number_input(key="tr_repeats").set_value(1).run()
    assert any("**1 runs**" in m.value for m in at.markdown)
    at.button(key="tr_launch").click().run()
    assert not at.exception and at.session_state["tr_run_ids"]
    _wait_until_finished(at)
    at.run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1
    results = at.dataframe[-1].value
    assert 0.0 <= results["test_accuracy_mean"].iloc[0] <= 1.0 and results["test_accuracy_count"].iloc[0] == 1
    at.number_input(key="tr_epochs").set_value(2).run()  # a new run of the same model: estimated from the past one
    assert any("from 1 past run of this model on this machine" in m.value for m in at.markdown), [
        m.value for m in at.markdown
    ]


def test_stored_preset_sweep_shows_published_vs_ours(tmp_path, monkeypatch):
    from dpmix_core.experiments.trade_offs import sweep_jobs

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    spec = get_preset("thesis-4.2-l-quick")
    store = ResultStore()
    sweep = store.create_sweep(spec.name, spec.to_dict())
    kind, config, key = [job for job in sweep_jobs(spec) if job[1]["synthesis"]["l"] == 128][0]
    run = store.submit(kind, config, key, sweep=sweep.id)
    store.claim(run.id)
    store.finish(run.id, {"test_accuracy": 0.70, "epsilon": {"lee2019": 2.7}, "delta": 1e-5})
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    assert any("Published vs ours" in m.value for m in at.markdown)
    table = at.dataframe[-2].value
    row = table[table["axis value"] == 128].iloc[0]
    assert (row["published (%)"], row["ours (%)"], row["verdict"]) == (79.3, 70.0, "not reproduced")
    assert set(table["verdict"]) == {"not reproduced", "pending"}


BEST_M_SERIES = "Poisson / gdp-clt, eps = 1"


def _finish_best_m_run(store, spec, sweep, l: int, halves: list[float]) -> None:
    """A finished run of DPFMix Table 1's best-m quick sweep at m = ``l`` (its Poisson eps = 1 series) with these
    accuracies on the even and the odd test rows, certified at eps = 1.25 by its card."""
    from dpmix_core.experiments.trade_offs import sweep_jobs

    card = {"epsilons": [{"accountant": "pld-poisson", "epsilon": 1.25, "upper_bound": True}]}
    kind, config, key = next(
        j for j in sweep_jobs(spec) if j[1]["label"] == BEST_M_SERIES and j[1]["synthesis"]["l"] == l
    )
    run = store.submit(kind, config, key, sweep=sweep.id)
    store.claim(run.id)
    result = {"test_accuracy": sum(halves) / 2, "test_accuracy_halves": halves, "privacy_card": card}
    store.finish(run.id, {**result, "epsilon": {"gdp-clt": 1.0, "pld-poisson": 1.25}, "delta": 1e-5})


def test_a_stored_sweep_along_l_shows_each_series_best_l_chosen_on_the_even_rows(tmp_path, monkeypatch):
    """DPFMix Table 1 reports each cell's best m: the page picks it on the even test rows, reads it on the odd ones
    and sets the paper's number beside it; the same table is in the sweep's HTML report."""
    from dpmix_core.views.sweep_report import sweep_report

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    spec = get_preset("dpfmix-table1-m-quick")
    store = ResultStore()
    sweep = store.create_sweep(spec.name, spec.to_dict())
    series = BEST_M_SERIES
    for l, halves in ((16, [0.84, 0.70]), (64, [0.80, 0.95])):  # m = 64 wins on all rows, m = 16 on the even rows
        _finish_best_m_run(store, spec, sweep, l, halves)
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    assert any(m.value.startswith("**Best ℓ per series**") for m in at.markdown)
    table = next(d.value for d in at.dataframe if "ℓ chosen (even rows)" in d.value.columns)
    row = table[table["series"] == series].iloc[0]
    assert (row["ℓ chosen (even rows)"], row["ours, odd rows (%)"], row["best ℓ on all rows (test-set search)"]) == (
        16,
        70.0,
        64,
    )
    assert (row["published best (%)"], row["verdict"], row["certified ε of the chosen release"]) == (
        79.19,
        "not reproduced",
        1.25,
    )
    assert "Best ℓ per series" in sweep_report(store, sweep.id)
    # one ε per series along ℓ: no curve to solve for ε on, and the page points to the table that reads it
    assert any("each series holds its ε along ℓ: the best-ℓ table above" in i.value for i in at.info)


def test_a_click_reads_no_run_and_a_run_that_finishes_shows_on_the_next_rerun(tmp_path, monkeypatch):
    """The results panel is cached under the store's results_version: a click that changes nothing in the store
    (a second ε axis) reads none of the sweep's results, and a run finished meanwhile (a `sweep` in a terminal) is
    on the next rerun."""

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    spec = get_preset("dpfmix-table1-m-quick")
    store = ResultStore()
    sweep = store.create_sweep(spec.name, spec.to_dict())

    def finish(l: int, halves: list[float]) -> None:
        _finish_best_m_run(store, spec, sweep, l, halves)

    def chosen() -> int:
        table = next(d.value for d in at.dataframe if "ℓ chosen (even rows)" in d.value.columns)
        return int(table[table["series"] == BEST_M_SERIES].iloc[0]["ℓ chosen (even rows)"])

    finish(16, [0.84, 0.70])
    finish(64, [0.80, 0.95])
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["sweep"] = str(sweep.id)
    at.run()
    assert not at.exception and chosen() == 16
    reads = []
    list_runs = ResultStore.list_runs
    monkeypatch.setattr(ResultStore, "list_runs", lambda self, **kw: reads.append(kw) or list_runs(self, **kw))
    box = at.selectbox(key="tr_eps2")
    box.set_value(box.options[-1]).run()
    assert not at.exception and not [kw for kw in reads if "sweep" in kw or kw.get("status") == "done"]
    # (the progress table and the workers' liveness check read their runs live: `ids=` and `status="running"`)
    finish(32, [0.90, 0.90])  # better on the even rows than m = 16
    at.run()
    assert not at.exception and chosen() == 32 and any("sweep" in kw for kw in reads)  # read once the store changed


def _page(tmp_path, monkeypatch, store_path=None, **query):
    monkeypatch.setenv("DPMIX_STORE", str(store_path or tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    (tmp_path / "no-data").mkdir(exist_ok=True)
    at = AppTest.from_file(PAGE, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


@pytest.mark.parametrize("value, message", [("abc", "is not a sweep number"), ("999", "names no sweep")])
def test_bad_sweep_in_the_address_is_one_error(tmp_path, monkeypatch, value, message):
    at = _page(tmp_path, monkeypatch, sweep=value)
    assert not at.exception and any(message in e.value for e in at.error)


@pytest.mark.parametrize("content, message", [(b"", "empty (0-byte) file"), (b"garbage" * 600, "is damaged")])
def test_broken_store_is_one_error_not_a_traceback(tmp_path, monkeypatch, content, message):
    path = tmp_path / "results.sqlite"
    path.write_bytes(content)
    at = _page(tmp_path, monkeypatch, store_path=path)
    assert not at.exception and [e.value for e in at.error] and message in at.error[0].value
    assert path.read_bytes() == content  # never recreated or repaired behind the user's back


def test_over_limit_sweep_is_refused_next_to_the_controls(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_MAX_JOB_SECONDS", "1")
    at = _page(tmp_path, monkeypatch)
    assert not at.exception and any("DPMIX_MAX_JOB_SECONDS" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "tr_launch"]


def test_a_run_whose_config_no_longer_loads_is_named_and_the_others_show(tmp_path, monkeypatch):
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.trade_offs import JOB_KIND, sweep_results, unreadable_runs

    store = ResultStore(tmp_path / "results.sqlite")
    sweep = store.create_sweep("old")
    good = RunConfig("non-private", dataset="embedded", model="linear", epochs=1).to_dict()
    bad = {**good, "seed": 1, "no_such_option": 3}
    result = {"test_accuracy": 0.5, "test_mse": None, "epsilon": {}, "seconds": 1.0}
    for cfg in (good, bad):
        run = store.submit(JOB_KIND, cfg, sweep=sweep.id)
        store.claim(run.id)
        store.finish(run.id, result)
    assert [run_id for run_id, _ in unreadable_runs(store, sweep.id)] == [2]
    agg, _, _ = sweep_results(store, sweep.id)
    assert len(agg) == 1
    at = _page(tmp_path, monkeypatch, sweep=str(sweep.id))
    assert not at.exception and any("run 2" in w.value for w in at.warning)


def test_a_fresh_session_opens_the_newest_sweep_with_results(tmp_path):
    """Not the last, cancelled one with "No finished runs yet" (issue 15)."""
    from dpmix_core.experiments.trade_offs import default_sweep

    store = ResultStore(tmp_path / "s.sqlite")
    assert default_sweep(store) is None
    finished = store.create_sweep("finished")
    run = store.submit("tests.fake_jobs:ok", {"x": 1}, sweep=finished.id)
    claimed = store.claim(backend="local", host="h", max_running=1)
    assert claimed is not None and claimed.id == run.id
    store.finish(run.id, {"test_accuracy": 0.5})
    cancelled = store.create_sweep("cancelled later")
    other = store.submit("tests.fake_jobs:ok", {"x": 2}, sweep=cancelled.id)
    store.mark_cancelled(other.id)
    assert default_sweep(store) == finished.id


def test_a_stopped_run_with_a_checkpoint_says_how_to_continue_it(tmp_path, monkeypatch):
    """The progress table's note, written out under it: near which epoch the training state was saved."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.trade_offs import JOB_KIND

    store = ResultStore(tmp_path / "results.sqlite")
    sweep = store.create_sweep("long")
    run = store.submit(JOB_KIND, RunConfig("non-private", dataset="embedded", model="linear").to_dict(), sweep=sweep.id)
    store.claim(run.id)
    store.update_progress(run.id, {"phase": "train", "epoch": 23, "epochs": 200, "eta_seconds": 6000.0})
    store.mark_interrupted(run.id, "worker process gone")
    store.log_dir.mkdir(parents=True, exist_ok=True)
    store.checkpoint_path(run.id).write_bytes(b"state")
    at = _page(tmp_path, monkeypatch, sweep=str(sweep.id))
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"Run {run.id}: training state saved near epoch 23") for c in captions), captions


def test_a_sweep_running_elsewhere_is_watched_live_not_run_from_the_page(tmp_path, monkeypatch):
    """A sweep launched in a terminal shows its progress when picked under Results; the page runs none of it."""
    from dpmix_core.experiments.trade_offs import sweep_jobs

    spec = get_preset("thesis-4.2-l-quick")  # axis l: the runs of its one series differ by l only
    store = ResultStore(tmp_path / "results.sqlite")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    jobs = {job[1]["synthesis"]["l"]: job for job in sweep_jobs(spec)}
    running, queued = (store.submit(*jobs[l], sweep=sweep.id) for l in (32, 128))
    store.claim(running.id)
    progress = {"phase": "train", "epoch": 50, "epochs": 200, "eta_seconds": 600.0, "val_accuracy": 0.42}
    store.update_progress(running.id, progress)
    at = _page(tmp_path, monkeypatch)
    assert not at.exception
    assert any("still has runs queued or running" in c.value for c in at.caption)
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[running.id, "progress"] == 0.25 and table.loc[queued.id, "status"] == "queued"
    assert table["ℓ"].to_dict() == {running.id: 32, queued.id: 128}
    assert table.loc[running.id, "val accuracy"] == 0.42 and pd.isna(table.loc[running.id, "test accuracy"])
    assert any(b.label == "Cancel the remaining runs" for b in at.button)
    assert any("No finished runs in this sweep yet" in i.value for i in at.info)
    picked = at.selectbox(key="tr_show")
    assert not picked.format_func(picked.value).endswith("queued")  # a label that changed would be shown stale
    assert "Still in progress: this sweep: 1 running, 1 queued." in [c.value for c in at.caption]
    assert store.get(queued.id).status == "queued"  # watched, not pumped: whoever launched it runs it
    store.finish(running.id, {"test_accuracy": 0.9, "test_mse": None, "epsilon": {}, "seconds": 1.0})
    at.run()
    table = at.dataframe[0].value.set_index("run")
    assert not at.exception and table.loc[running.id, "test accuracy"] == 0.9  # the kept cells were read again
    store.request_cancel(queued.id)  # queued: cancelled at once
    at.run()
    assert not at.exception
    assert not any("still has runs queued or running" in c.value for c in at.caption)
    assert not any("No finished runs" in i.value for i in at.info)
    assert not any(c.value.startswith("Still in progress") for c in at.caption)
    assert at.selectbox(key="tr_show").format_func(sweep.id) == f"{spec.name} (#{sweep.id}, local)"


def test_a_link_to_a_stopped_sweep_starts_nothing_until_resumed(tmp_path, monkeypatch):
    """?sweep= of a sweep whose launcher stopped (Ctrl-C on `sweep`): its queued runs are shown and said to wait;
    opening the link starts no worker (it used to resume them at once); the button does, and they finish."""
    from dpmix_core.experiments.trade_offs import narrow_spec, sweep_jobs, with_dataset

    spec = narrow_spec(with_dataset(get_preset("dp-pca-quick"), "embedded"), values=[1.0, 10.0])
    store = ResultStore(tmp_path / "results.sqlite")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    ids = [store.submit(*job, sweep=sweep.id).id for job in sweep_jobs(spec)]
    at = _page(tmp_path, monkeypatch, sweep=str(sweep.id))
    assert not at.exception and set(at.dataframe[0].value["status"]) == {"queued"}
    assert any("2 run(s) of this sweep wait (2 queued) and none is running" in i.value for i in at.info)
    # the progress names the sweep it shows, which is not the preset picked above it
    assert any(m.value.startswith(f"**Progress of {spec.name} (#{sweep.id})** — 2 queued") for m in at.markdown)
    time.sleep(1.0)
    assert [store.get(i).status for i in ids] == ["queued", "queued"]  # nothing started by opening the link
    stopped = store.claim(ids[0])  # its worker was killed: interrupted, as a re-run of `sweep` would find it
    assert stopped is not None and store.mark_interrupted(ids[0], "worker process 1 is gone")
    at.run()
    assert any("2 run(s) of this sweep wait (1 queued, 1 interrupted)" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Resume the 2 run(s) here").click().run()
    assert not at.exception and at.session_state["tr_pumping"]
    _wait_until_finished(at)
    assert [store.get(i).status for i in ids] == ["done", "done"]


@pytest.fixture(scope="module")
def release_npz(tmp_path_factory) -> Path:
    """A small DPMix release of the embedded sample, as the Mixed samples page's download writes it."""
    from dpmix_core.cli.main import main

    out = tmp_path_factory.mktemp("release") / "mine.npz"
    args = ["--dataset", "embedded", "--mechanism", "dpmix", "--l", "4", "--T", "300", "--sigma-x", "0.2"]
    assert main(["synthesize", *args, "--out", str(out)]) == 0
    return out


def test_a_release_file_is_trained_on_by_the_models_picked(at, release_npz, tmp_path):
    at.radio(key="tr_mode").set_value("Models on a release file").run()
    assert not at.exception and not at.error and not [b for b in at.button if b.key == "tr_launch"]
    at.file_uploader(key="tr_release_upload").set_value([("mine.npz", release_npz.read_bytes(), "application/zip")])
    at.run()
    assert not at.exception and not at.error
    assert any(
        "**Release:** embedded · dpmix, pixels · T = 300" in m.value and "rdp-wor" in m.value for m in at.markdown
    )
    assert any(m.value.startswith("We release T = 300 synthetic points") for m in at.markdown)  # the card's own words
    at.multiselect(key="tr_release_models").set_value(["linear", "corrected-lsq"])
    at.number_input(key="tr_release_epochs").set_value(1)
    at.number_input(key="tr_release_repeats").set_value(1).run()
    assert any("**2 runs**" in m.value for m in at.markdown)
    at.button(key="tr_launch").click().run()
    _wait_until_finished(at)
    at.run()
    results = at.dataframe[-1].value
    assert not at.exception and set(results["label"]) == {"linear", "corrected-lsq"}
    assert results["epsilon_rdp-wor"].nunique() == 1  # one release: the same card for every model
    # one release, one epsilon: no curve to read "what epsilon do I need?" off, and no best-T table to point to
    solve = [i.value for i in at.info if "no curve to read off" in i.value]
    assert solve and "table above" not in solve[0]
    saved = list((tmp_path / "releases").glob("*.npz"))  # kept beside the store for the background runs
    assert len(saved) == 1 and saved[0].read_bytes() == release_npz.read_bytes()


@pytest.mark.parametrize(
    "files, message",
    [
        ([("notes.csv", b"a,b\n1,2\n", "text/csv")], "together with its FILE.card.json"),
        ([("broken.npz", b"not a zip", "application/zip")], "cannot be read as an .npz"),
    ],
)
def test_a_bad_release_upload_is_one_error_next_to_it(at, files, message, tmp_path):
    at.radio(key="tr_mode").set_value("Models on a release file").run()
    at.file_uploader(key="tr_release_upload").set_value(files).run()
    assert not at.exception and any(message in e.value for e in at.error), [e.value for e in at.error]
    assert not [b for b in at.button if b.key == "tr_launch"]
    assert not list((tmp_path / "releases").glob("*"))  # nothing of a refused upload is kept


def test_the_cards_epsilon_can_be_recomputed_next_to_the_release(at, release_npz):
    at.radio(key="tr_mode").set_value("Models on a release file").run()
    at.file_uploader(key="tr_release_upload").set_value([("mine.npz", release_npz.read_bytes(), "application/zip")])
    at.run()
    at.button(key="tr_verify").click().run()
    assert not at.exception and any(s.value.startswith("Verified: all 3 epsilons") for s in at.success)
    assert set(at.dataframe[0].value["accountant"]) == {"lee2019", "dpcda", "rdp-wor"}
    at.multiselect(key="tr_release_models").set_value(["linear"]).run()  # the answer stays while exploring
    assert any(s.value.startswith("Verified:") for s in at.success)


def _chart_titles(at) -> list[str]:
    import json

    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def _pets_csv(n: int = 240) -> bytes:
    """A 3-class CSV with class names in a 'species' column between float features in [-5, 10]."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    x = np.clip(rng.normal(size=(n, 3)) + 1.5 * y[:, None], -5, 10)
    names = np.array(["bird", "cat", "dog"])[y]
    rows = [f"{a:.3f},{s},{b:.3f},{c:.3f}" for (a, b, c), s in zip(x, names, strict=True)]
    return ("a,species,b,c\n" + "\n".join(rows) + "\n").encode()


def test_a_sweep_on_ones_own_file_holds_records_out_and_trains_on_the_rest(at, tmp_path):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_dataset").set_value("own file").run()
    assert not at.exception and any("Upload a .csv or .npz" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "tr_launch"]  # nothing to launch before a file
    at.file_uploader(key="tr_own_upload").set_value([("pets.csv", _pets_csv(), "text/csv")]).run()
    picker = next(s for s in at.selectbox if s.key.startswith("tr_own_label_column_"))
    picker.set_value("species").run()
    assert not at.exception
    assert any("48 held-out test records" in c.value for c in at.caption), [c.value for c in at.caption]
    assert at.selectbox(key="tr_model_own").value == "linear"  # a table of features: the linear model
    assert at.number_input(key="tr_epochs_own").value == 50  # its own-data protocol
    at.multiselect(key="tr_mechs").set_value(["class-centric"])
    at.text_input(key="tr_l").input("100").run()  # more than a class of the 192 records left to release has
    assert any("fewer than l=100" in e.value for e in at.error), [e.value for e in at.error]
    at.number_input(key="tr_own_lo").set_value(-500.0)
    at.number_input(key="tr_own_hi").set_value(1000.0).run()  # loose: the features fill a sliver of the width
    assert any("Your features fill a median" in w.value for w in at.warning), [w.value for w in at.warning]
    at.number_input(key="tr_own_lo").set_value(-5.0)
    at.number_input(key="tr_own_hi").set_value(10.0)
    at.text_input(key="tr_values").input("0.3")
    at.text_input(key="tr_l").input("4")
    at.text_input(key="tr_T").input("200")
    at.number_input(key="tr_epochs_own").set_value(2)
    at.number_input(key="tr_repeats").set_value(1).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [w for w in at.warning if "bounds" in w.value]
    assert any("**2 runs**" in m.value for m in at.markdown)  # class-centric + the non-private baseline
    at.button(key="tr_launch").click().run()
    _wait_until_finished(at)
    at.run()
    results = at.dataframe[-1].value
    assert not at.exception and set(results["label"]) == {"class-centric", "non-private"}
    saved = list((tmp_path / "data").glob("*/*.csv"))  # kept beside the store for the background runs
    assert len(saved) == 1 and saved[0].name == "pets.csv" and saved[0].read_bytes() == _pets_csv()
    assert any(t.startswith("Custom sweep") and t.endswith("on pets") for t in _chart_titles(at))


def test_a_sweep_on_ones_own_file_scales_each_column_with_its_own_bounds(at, tmp_path):
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_dataset").set_value("own file").run()
    at.file_uploader(key="tr_own_upload").set_value([("pets.csv", _pets_csv(), "text/csv")]).run()
    next(s for s in at.selectbox if s.key.startswith("tr_own_label_column_")).set_value("species").run()
    at.toggle(key="tr_own_per_column").set_value(True).run()
    bounds = b"column,low,high\na,-5,10\nb,-6,12\nc,-5,10\n"
    at.file_uploader(key="tr_own_bounds_file").set_value([("bounds.csv", bounds, "text/csv")])
    runs = launch_tiny_own_sweep(at, tmp_path / "results.sqlite")
    assert all(r.config["synthesis"]["feature_range"] == [[-5, 10], [-6, 12], [-5, 10]] for r in runs)


def test_ones_own_file_is_not_offered_to_the_papers_presets(at):
    at.selectbox(key="tr_dataset").set_value("own file").run()
    assert not at.exception and any("Build your own" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "tr_launch"]


def test_what_was_set_in_build_your_own_survives_a_visit_elsewhere(at):
    """A look at a preset, or at one's own file before its upload, draws no builder: Streamlit then drops the state of
    its widgets, and coming back showed the defaults again (a typed l = 8 back at 16). It is kept (keep_state)."""
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.text_input(key="tr_l").input("8")
    at.text_input(key="tr_values").input("1, 2")
    at.multiselect(key="tr_baselines").set_value(["non-private", "dp-sgd"])
    at.number_input(key="tr_repeats").set_value(3).run()
    for away in ({"tr_dataset": "own file"}, {"tr_mode": "Published preset"}, {"tr_mode": "Models on a release file"}):
        key, value = next(iter(away.items()))
        back = at.selectbox(key=key).value if key == "tr_dataset" else "Build your own"
        (at.selectbox(key=key) if key == "tr_dataset" else at.radio(key=key)).set_value(value).run()
        assert not at.exception and not [t for t in at.text_input if t.key == "tr_l"]  # the builder is not drawn
        (at.selectbox(key=key) if key == "tr_dataset" else at.radio(key=key)).set_value(back).run()
        assert not at.exception
        assert at.text_input(key="tr_l").value == "8" and at.text_input(key="tr_values").value == "1, 2"
        assert at.multiselect(key="tr_baselines").value == ["non-private", "dp-sgd"]
        assert at.number_input(key="tr_repeats").value == 3


def test_a_sweep_on_ones_own_file_can_narrow_loose_bounds_privately(at, tmp_path):
    """The toggle under the bounds: every release of the sweep narrows them privately, and each run's ε is of the
    ranges and its points together."""
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_dataset").set_value("own file").run()
    at.file_uploader(key="tr_own_upload").set_value([("pets.csv", _pets_csv(), "text/csv")]).run()
    next(s for s in at.selectbox if s.key.startswith("tr_own_label_column_")).set_value("species").run()
    at.number_input(key="tr_own_lo").set_value(-500.0)
    at.number_input(key="tr_own_hi").set_value(1000.0).run()
    at.toggle(key="tr_own_private_ranges").set_value(True).run()
    at.number_input(key="tr_own_ranges_eps").set_value(0.5)
    (run,) = launch_tiny_own_sweep(at, tmp_path / "results.sqlite", loose_bounds=True)
    assert run.config["synthesis"]["range_epsilon"] == 0.5
    assert set(run.result["epsilon"]) == {"rdp-composition"}
