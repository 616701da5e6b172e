"""One-file HTML report of a stored sweep: honest reading, every table, refusals in one line (CLI and page)."""

import html
import math
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
COLLAPSE = "predicts one class for every test record (the constant predictor)"


def _card(*entries: tuple[str, str]) -> dict:
    return {"epsilons": [{"accountant": name, "guarantee": guarantee} for name, guarantee in entries]}


@pytest.fixture
def stored(tmp_path):
    """thesis-4.2-l-quick with l = 128 learned (below the paper), l = 32 collapsed, the rest still queued."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import sweep_jobs
    from dpmix_core.runtime.store import ResultStore

    store = ResultStore(tmp_path / "results.sqlite")
    spec = get_preset("thesis-4.2-l-quick")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    jobs = {job[1]["synthesis"]["l"]: job for job in sweep_jobs(spec)}
    card = _card(("lee2019", "rigorous upper bound"), ("rdp-wor", "rigorous upper bound"))
    for l, result in (
        (128, {"test_accuracy": 0.70, "epsilon": {"lee2019": 2.7, "rdp-wor": 1.9}, "delta": 1e-5}),
        (32, {"test_accuracy": 0.10, "epsilon": {"lee2019": 9.0}, "collapsed": True, "collapse_reason": COLLAPSE}),
    ):
        kind, config, key = jobs[l]
        run = store.submit(kind, config, key, sweep=sweep.id)
        store.claim(run.id)
        store.finish(run.id, {**result, "privacy_card": card})
    for l in (64, 256):
        store.submit(*jobs[l], sweep=sweep.id)  # queued: not in the report, and the reading says so
    return store, spec


def test_the_report_holds_the_reading_figure_tables_and_the_runs_that_did_not_learn(stored):
    from dpmix_core.views.sweep_report import sweep_report

    store, spec = stored
    page = sweep_report(store, spec.name)
    assert not re.search(r"<script[^>]+src=", page) and page.count("plotly.js v") <= 2  # opens offline
    for heading in ("Settings", "In plain language", "Accuracy versus privacy", "Published vs ours", "Every point"):
        assert f"<h2>{heading}</h2>" in page
    assert "How to read each ε" in page and "Runs that did not learn" in page and COLLAPSE in page
    assert "not reproduced" in page and "Not in this report: 2 run(s) still queued or running" in page
    assert "128 → " in page and "70.00 %" in page  # the learned point is the best private result at l = 128
    assert "32 → " not in page  # the collapsed point is no result


def test_the_reading_gives_the_best_covered_point_at_each_axis_value_and_counts_what_is_missing():
    from dpmix_core.views.sweep_report import sweep_reading

    agg = pd.DataFrame(
        {
            "label": ["a", "b", "a", "b", "labels", "non-private"],
            "axis_value": [1.0, 1.0, 2.0, 2.0, 1.0, float("inf")],
            "test_accuracy_mean": [0.8, 0.9, 0.95, 0.1, 0.99, 0.995],
            "test_accuracy_std": [0.01, float("nan"), 0.02, float("nan"), float("nan"), float("nan")],
            "test_accuracy_count": [3, 1, 3, 2, 1, 1],
            "guarantee": ["covered"] * 4 + ["labels only; features not private", "none"],
            "collapsed": [0, 0, 0, 2, 0, 0],
            "runs": [3, 1, 3, 2, 1, 1],
        }
    )
    text = sweep_reading(agg, "target_epsilon", Counter(done=11, queued=1, failed=2), None)
    assert "1 → b, 90.00 % (1 seed(s)); 2 → a, 95.00 % ± 2.00 (3 seed(s))" in text  # not the label-only 99 %
    assert "Non-private reference: 99.50 %" in text
    assert "1 point(s) where every run collapsed" in text
    assert "1 run(s) still queued or running and 2 failed or cancelled" in text
    assert "open marker" not in text and "11 finished run(s)" in text
    # b at 1 learned on one seed of three: a survivor's number, said in the best result and in its own sentence
    partly = agg.assign(collapsed=[0, 2, 0, 2, 0, 0], runs=[3, 3, 3, 2, 1, 1])
    text = sweep_reading(partly, "target_epsilon", Counter(done=13), None)
    assert "1 → b, 90.00 % (1 seed(s); 2 of 3 runs collapsed, left out of the mean)" in text
    assert "At 1 point(s) some runs collapsed (2 of their 3 runs)" in text and "open marker" in text
    assert "13 finished run(s)" in text  # the collapsed runs are runs that finished


def test_each_epsilon_is_read_from_the_cards_else_the_accountant_else_the_baselines_table():
    from dpmix_core.views.sweep_report import EPSILON_READINGS, epsilon_readings

    agg = pd.DataFrame({"epsilon_gdp-clt": [1.0], "epsilon_rdp-wor": [2.0], "epsilon_laplace": [1.0]})
    stated = "not covered: normalisation constants computed from the private data"
    rows = [{"result": {"privacy_card": _card(("rdp-wor", stated))}}]
    readings = dict(epsilon_readings(agg, rows).values.tolist())
    assert readings == {
        "gdp-clt": "approximation (not an upper bound)",
        "rdp-wor": stated,
        "laplace": EPSILON_READINGS["laplace"],
    }


def test_a_report_that_cannot_be_made_says_why_in_one_line(stored, tmp_path):
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    store, spec = stored
    empty = store.create_sweep("nothing finished")
    for sweep, kw, message in (
        ("nope", {}, "No sweep 'nope'"),
        (empty.id, {}, "no finished run yet"),
        (spec.name, {"epsilon_column": "pld-poisson"}, "choose one of lee2019, rdp-wor"),
        (spec.name, {"metric": "loss"}, "metric must be"),
    ):
        with pytest.raises(ValueError, match=message):
            sweep_report(store, sweep, **kw)
    assert '"yaxis":"y2"' in sweep_report(store, spec.name, epsilon_column="epsilon_rdp-wor")  # either spelling
    assert '"yaxis":"y2"' not in sweep_report(store, spec.name)
    with pytest.raises(ValueError, match="does not exist"):
        ResultStore.existing(tmp_path / "typo.sqlite")
    assert not (tmp_path / "typo.sqlite").exists()


def test_cli_writes_the_report_and_refuses_a_missing_store_without_creating_one(stored, tmp_path, capsys):
    store, spec = stored
    out = tmp_path / "sweep.html"
    argv = ["sweep-report", spec.name, "--store", str(store.path)]
    assert main([*argv, "--out", str(out), "--epsilon-axis", "lee2019"]) == 0
    assert "Trade-off sweep" in out.read_text() and "wrote" in capsys.readouterr().out
    missing = tmp_path / "missing.sqlite"
    assert main(["sweep-report", spec.name, "--store", str(missing), "--out", str(tmp_path / "b.html")]) == 2
    assert main([*argv, "--out", str(tmp_path / "b.pdf")]) == 2
    assert main(["solve-epsilon", "--sweep", "x", "--accuracy", "90", "--store", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("error:") for line in err) and "does not exist" in err[0]
    assert not missing.exists() and not (tmp_path / "b.html").exists()


def test_the_page_offers_the_report_of_the_sweep_it_shows(stored, tmp_path, monkeypatch):
    store, _ = stored
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    assert not [b for b in at.get("download_button") if "report" in b.proto.label]  # made on request only
    at.button(key="tr_report").click().run()
    assert not at.exception and not at.error
    assert [b for b in at.get("download_button") if "Download the report" in b.proto.label]


def test_runs_whose_early_stopping_had_no_signal_are_counted_and_named_in_the_report_and_the_page(
    tmp_path, monkeypatch, finished_sweep
):
    """Two of three seeds at l = 1 kept an epoch chosen on a validation split at chance: the aggregate counts them
    (a learned run, so still a result), and the report's reading and the page's caption name the point."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.results import aggregate, no_signal_note
    from dpmix_core.experiments.trade_offs import narrow_spec
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    spec = narrow_spec(get_preset("dpcda-table2-quick"), series=["eps = 20"], values=[1, 8], repeats=3)
    store = ResultStore(tmp_path / "results.sqlite")

    def result(config: dict) -> dict:
        l, seed = config["synthesis"]["l"], config["seed"]
        note = "early stopping had no signal: ..." if (l == 1 and seed < 2) or (l == 8 and seed == 2) else None
        dead = l == 8 and seed == 2  # a collapsed run is counted as collapsed, not as a result of an arbitrary epoch
        accuracy = 0.1 if dead else (0.2 if l == 1 else 0.8)
        return {"test_accuracy": accuracy, "selection_note": note, "collapsed": dead, "delta": 1e-5}

    finished_sweep(store, spec, result)
    agg = aggregate([{"config": r.config, "result": r.result} for r in store.list_runs()], axis="l")
    assert agg.set_index("axis_value")["no_signal"].to_dict() == {1.0: 2, 8.0: 0}
    assert agg.set_index("axis_value")["collapsed"].to_dict() == {1.0: 0, 8.0: 1}
    sentence = no_signal_note(agg)
    assert sentence.startswith("At 1 point(s) early stopping chose the epoch on a validation split at chance")
    assert "eps = 20, l = 1: 2 of 3 run(s)" in sentence and "l = 8" not in sentence
    assert no_signal_note(agg.assign(no_signal=0)) == "" and no_signal_note(agg.drop(columns="no_signal")) == ""
    assert "eps = 20, l = ∞: 2 of 3 run(s)" in no_signal_note(agg.assign(axis_value=[math.inf, 8.0]))
    assert html.escape(sentence) in sweep_report(store, spec.name)
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["sweep"] = str(store.get_sweep(spec.name).id)
    at.run()
    assert not at.exception and any(sentence == c.value for c in at.caption)


def test_a_sweep_with_only_other_methods_published_points_has_no_empty_comparison(tmp_path, monkeypatch):
    """all-methods carries the published frontier (reference points, no verdict): no empty 'Published vs ours'."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import sweep_jobs
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    spec = get_preset("all-methods")
    assert spec.published and all(p.reference for p in spec.published)
    store = ResultStore(tmp_path / "results.sqlite")
    sweep = store.create_sweep(spec.name, spec.to_dict())
    run = store.submit(*sweep_jobs(spec)[0], sweep=sweep.id)
    store.claim(run.id)
    store.finish(run.id, {"test_accuracy": 0.9, "epsilon": {"pld-poisson": 1.0}, "delta": 1e-5})
    page = sweep_report(store, spec.name)
    assert "published, not ours" in page and "<h2>Published vs ours</h2>" not in page
    monkeypatch.setenv("DPMIX_STORE", str(store.path))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception and not any("Published vs ours" in m.value for m in at.markdown)


def test_a_sweep_without_a_spec_or_axis_and_with_odd_results_still_reports(tmp_path):
    """Runs launched without a spec (no axis), an unbounded and an errored epsilon, a NaN accuracy."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    store = ResultStore(tmp_path / "s.sqlite")
    sweep = store.create_sweep("no spec")
    results = [(0.5, {"lee2019": "inf"}), (float("nan"), {"lee2019": "error: x"}), (0.7, {})]
    for seed, (accuracy, epsilon) in enumerate(results):
        config = RunConfig("non-private", dataset="embedded", model="linear", epochs=1, seed=seed).to_dict()
        run = store.submit("dpmix_core.experiments.runner:run_job", config, sweep=sweep.id)
        store.claim(run.id)
        store.finish(run.id, {"test_accuracy": accuracy, "epsilon": epsilon, "delta": None})
    page = sweep_report(store, "no spec")
    assert "<h2>Every point</h2>" in page and "Non-private reference" in page


_EPSILON = st.one_of(
    st.floats(min_value=0, max_value=1e300), st.just(float("inf")), st.just("inf"), st.just("error: Opacus failed")
)
_RESULT = st.fixed_dictionaries(
    {"test_accuracy": st.one_of(st.floats(0, 1), st.just(float("nan")))},
    optional={
        "epsilon": st.dictionaries(st.sampled_from(["lee2019", "rdp-wor", "opacus-prv", "made-up"]), _EPSILON),
        "collapsed": st.booleans(),
        "collapse_reason": st.text(max_size=30),
        "delta": st.one_of(st.none(), st.floats(1e-9, 0.5)),
        "privacy_card": st.one_of(st.none(), st.just({"epsilons": [{"accountant": "rdp-wor"}, "junk"]})),
    },
)


@given(results=st.lists(st.tuples(st.integers(0, 4), _RESULT), min_size=1, max_size=6, unique_by=lambda r: r[0]))
def test_any_stored_results_give_a_report(results):
    """Whatever finished runs hold (NaN accuracy, unbounded or errored epsilons, junk cards): a page, no crash."""
    import tempfile

    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import sweep_jobs
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    spec = get_preset("thesis-4.2-l-quick")
    jobs = sweep_jobs(spec)
    with tempfile.TemporaryDirectory() as folder:
        store = ResultStore(Path(folder) / "s.sqlite")
        sweep = store.create_sweep(spec.name, spec.to_dict())
        for index, result in results:
            run = store.submit(*jobs[index], sweep=sweep.id)
            store.claim(run.id)
            store.finish(run.id, result)
        page = sweep_report(store, spec.name)
    assert page.startswith("<!DOCTYPE html>") and "In plain language" in page


def test_dp_pca_is_never_read_as_a_private_release_of_features_and_labels():
    """DP-PCA's classifier is fitted on the private records: its point is no 'best private result'."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.results import PROJECTION_ONLY, aggregate
    from dpmix_core.synthesis.pipeline import SynthesisConfig
    from dpmix_core.views.sweep_report import sweep_reading

    pca = RunConfig("dp-pca", model="linear", pca_epsilon=1.0, pca_delta=1e-5, label="DP-PCA")
    mix = RunConfig(
        "mixing",
        synthesis=SynthesisConfig("poisson", l=16, T=400, target_epsilon=1.0, accountant="pld-poisson"),
        model="linear",
        label="Poisson mixing",
    )
    rows = [
        {"config": pca.to_dict(), "result": {"test_accuracy": 0.9, "epsilon": {"analytic-gaussian": 1.0}}},
        {"config": mix.to_dict(), "result": {"test_accuracy": 0.7, "epsilon": {"pld-poisson": 1.0}}},
    ]
    agg = aggregate(rows, axis="target_epsilon")
    assert dict(zip(agg["label"], agg["guarantee"], strict=True)) == {
        "DP-PCA": PROJECTION_ONLY,
        "Poisson mixing": "covered",
    }
    text = sweep_reading(agg, "target_epsilon", Counter(done=2), None)
    assert "1 → Poisson mixing, 70.00 %" in text and "DP-PCA, 90.00" not in text
