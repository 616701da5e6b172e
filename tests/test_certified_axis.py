"""A sweep read against its points' certified ε: which bound certifies a run, where each point moves, and the page,
the report, the CLI and "what ε do I need?" reading the same column."""

import html
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import build_parser, main
from dpmix_core.experiments.certified_axis import CERTIFIED_AXIS, CertifiedPoints, on_certified_epsilon
from dpmix_core.experiments.results import BASELINE_UPPER_BOUNDS, aggregate, certified_epsilon
from dpmix_core.experiments.solve_epsilon import CERTIFIED, epsilon_choices, solve_epsilon
from dpmix_core.views.accuracy_figure import AGAINST, CERTIFIED_CAPTION, against_title, sweep_figure

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
POISSON, UNIFORM = "Poisson / gdp-clt", "uniform / rdp-wor"
# DPFMix Table 1's Poisson releases at CLT eps = 1, 2, 4, 8 are certified by the PLD at these (docs/REPRODUCTION.md)
PLD_OF_CLT = {1.0: 1.52, 2.0: 2.54, 4.0: 6.63, 8.0: 10.50}


def _entry(name: str, epsilon: float | str, bound: bool) -> dict:
    return {"accountant": name, "epsilon": epsilon, "upper_bound": bound}


def _poisson_card(clt: float) -> dict:
    """A Poisson release's card: the CLT approximation below the PLD bound, which RDP's looser bound lies above."""
    pld = PLD_OF_CLT[clt]
    return {
        "epsilons": [
            _entry("gdp-clt", clt, False),
            _entry("rdp-poisson", 1.3 * pld, True),
            _entry("pld-poisson", pld, True),
        ]
    }


def test_a_cards_rigorous_bounds_certify_its_run_and_an_approximation_never_does():
    result = {"epsilon": {"gdp-clt": 1.0, "pld-poisson": 1.52}, "privacy_card": _poisson_card(1.0)}
    assert certified_epsilon(result) == (1.52, "pld-poisson")  # gdp-clt is smaller, but no bound
    uncovered = {"epsilons": [_entry("rdp-wor", 0.8, False), _entry("dpcda", 0.9, False)]}  # private normalisation
    assert certified_epsilon({"epsilon": {"rdp-wor": 0.8}, "privacy_card": uncovered}) is None
    # the card speaks for its release: a rigorous accountant the card does not mark is not read from the result
    assert certified_epsilon({"epsilon": {"rdp-wor": 0.1}, "privacy_card": uncovered}) is None
    infinite = {"epsilons": [_entry("lee2019", "inf", True), _entry("rdp-wor", math.inf, True)]}
    assert certified_epsilon({"privacy_card": infinite}) is None
    assert certified_epsilon({}) is None and certified_epsilon({"epsilon": {"none": "inf"}}) is None


def test_a_run_without_a_card_is_certified_by_its_rigorous_accountants_only():
    dpsgd = {"pld-poisson": 1.0, "rdp-poisson": 1.2, "opacus-rdp": 1.25, "opacus-prv": 0.97}
    assert certified_epsilon({"epsilon": dpsgd}) == (1.0, "pld-poisson")  # PRV is an estimate up to its error
    ranges = {"pld-dp-accounting": 2.0, "rdp-dp-accounting": 2.3, "opacus-prv": 1.9, "opacus-rdp": "error: x"}
    assert certified_epsilon({"epsilon": ranges}) == (2.0, "pld-dp-accounting")
    assert certified_epsilon({"epsilon": {"analytic-gaussian": 0.5}}) == (0.5, "analytic-gaussian")
    assert certified_epsilon({"epsilon": {"gdp-clt": 0.5}}) is None
    assert not BASELINE_UPPER_BOUNDS["opacus-prv"]


def test_label_only_laplace_is_certified_by_laplace_on_new_and_old_cards():
    from dpmix_core.data import load_embedded
    from dpmix_core.synthesis.export import privacy_card
    from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize

    card = privacy_card(synthesize(SynthesisConfig(mechanism="label-laplace", label_epsilon=2.0), load_embedded()))
    assert [(e["accountant"], e["epsilon"], e["upper_bound"]) for e in card["epsilons"]] == [("laplace", 2.0, True)]
    assert certified_epsilon({"privacy_card": card}) == (2.0, "laplace")
    assert card["epsilons"][0]["guarantee"].startswith("rigorous upper bound (labels only; features not private)")
    # a card made before the guarantee had a name said its description's class
    old = {"epsilons": [_entry("LaplaceLabelRelease", 2.0, True)]}
    assert certified_epsilon({"privacy_card": old}) == (2.0, "laplace")


def test_every_baseline_epsilon_has_a_reading_and_a_kind():
    """The report's words for each baseline epsilon and whether it certifies a point name the same epsilons."""
    from dpmix_core.views.sweep_report import EPSILON_READINGS

    assert set(BASELINE_UPPER_BOUNDS) == set(EPSILON_READINGS)
    for name, bound in BASELINE_UPPER_BOUNDS.items():
        assert ("up to its numerical error" in EPSILON_READINGS[name]) == (not bound), name


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0.01, 1e6), st.booleans()), max_size=6))
def test_the_certified_epsilon_is_the_smallest_bound_the_card_marks(entries):
    card = {"epsilons": [_entry(name, eps, bound) for name, eps, bound in entries]}
    bounds = [(eps, name) for name, eps, bound in entries if bound]
    assert certified_epsilon({"privacy_card": card}) == (min(bounds) if bounds else None)


def _row(label: str, axis_value: float | None, accuracy: float, result: dict, *, method: str = "mixing") -> dict:
    config = {"method": method, "label": label, "seed": 0, **({"model": "linear"} if method == "dp-pca" else {})}
    if method == "mixing":
        config["synthesis"] = {"mechanism": "poisson", "l": 64, "T": 1000, "target_epsilon": axis_value}
    return {"config": config, "axis": "target_epsilon", "result": {"test_accuracy": accuracy, **result}}


def _sweep_rows() -> list[dict]:
    rows = []
    for clt in (1.0, 2.0, 4.0):
        card = _poisson_card(clt)
        result = {"epsilon": {e["accountant"]: e["epsilon"] for e in card["epsilons"]}, "privacy_card": card}
        rows.append(_row(POISSON, clt, 0.70 + clt / 100, result))
        uniform = {"epsilons": [_entry("lee2019", 1.1 * clt, True), _entry("rdp-wor", clt, True)]}
        rows.append(_row(UNIFORM, clt, 0.40 + clt / 20, {"epsilon": {"rdp-wor": clt}, "privacy_card": uniform}))
    rows.append(_row("non-private", None, 0.99, {"epsilon": {"none": "inf"}}, method="non-private"))
    return rows


def test_the_aggregate_carries_each_points_certified_epsilon_and_its_accountant():
    agg = aggregate(_sweep_rows(), "target_epsilon")
    poisson = agg[agg["label"] == POISSON].sort_values("axis_value")
    assert poisson["certified_epsilon"].tolist() == [1.52, 2.54, 6.63] and set(poisson["certified_by"]) == {
        "pld-poisson"
    }
    assert agg[agg["label"] == UNIFORM]["certified_epsilon"].tolist() == [1.0, 2.0, 4.0]
    assert math.isnan(agg[agg["label"] == "non-private"]["certified_epsilon"].iloc[0])


def test_seeds_of_one_point_are_read_at_their_largest_bound():
    rows = [
        _row(UNIFORM, 1.0, acc, {"privacy_card": {"epsilons": [_entry("rdp-wor", e, True)]}})
        for acc, e in ((0.5, 0.99), (0.6, 1.01))
    ]
    assert aggregate(rows, "target_epsilon")["certified_epsilon"].tolist() == [1.01]


def test_points_move_to_their_certified_epsilon_and_what_cannot_move_is_named():
    rows = _sweep_rows()
    rows.append(_row("private z-score", 2.0, 0.8, {"privacy_card": {"epsilons": [_entry("rdp-wor", 2.0, False)]}}))
    agg = aggregate(rows, "target_epsilon")
    agg.loc[agg["label"] == "private z-score", "guarantee"] = "not covered: private normalisation"
    points = on_certified_epsilon(agg)
    moved = points.agg[points.agg["label"] == POISSON]
    assert sorted(moved["axis_value"]) == [1.52, 2.54, 6.63] and set(points.agg["axis"]) == {CERTIFIED_AXIS}
    assert moved["test_accuracy_mean"].tolist() == agg[agg["label"] == POISSON]["test_accuracy_mean"].tolist()
    flat = points.agg[points.agg["label"] == "non-private"]
    assert len(flat) == 1 and flat["axis_value"].iloc[0] is None  # no privacy: a reference line, not a point
    assert points.left_out == ("private z-score (target_epsilon = 2): no accountant covers its release",)
    assert points.sentence().startswith("1 point(s) have no certified ε and are not drawn on this axis")
    assert CertifiedPoints(agg.iloc[:0]).sentence() == ""
    with pytest.raises(ValueError, match="aggregate the runs again"):
        on_certified_epsilon(agg.drop(columns=["certified_epsilon"]))


def test_an_approximation_only_point_is_left_out_with_why_and_no_noise_is_a_reference_line():
    clt_only = _row(POISSON, 1.0, 0.7, {"epsilon": {"gdp-clt": 1.0}})  # no card: gdp-clt is no bound
    points = on_certified_epsilon(aggregate([clt_only], "target_epsilon"))
    assert points.agg.empty and "only an approximation" in points.left_out[0]
    no_noise = _row("dp-pca", math.inf, 0.9, {"epsilon": {"analytic-gaussian": "inf"}}, method="dp-pca")
    points = on_certified_epsilon(aggregate([no_noise, clt_only], "target_epsilon"))
    assert points.agg["axis_value"].tolist() == [math.inf] and len(points.left_out) == 1
    figure, _ = sweep_figure(aggregate([no_noise], "target_epsilon"), "target_epsilon", against="certified")
    assert any("(certified ε = ∞)" in a.text for a in figure.layout.annotations)  # drawn flat, as on the axis


def test_the_figure_against_certified_epsilon_draws_the_bounds_and_keeps_the_papers_points_on_an_epsilon_axis():
    from dpmix_core.experiments.spec import Published

    agg = aggregate(_sweep_rows(), "target_epsilon")
    published = (Published(POISSON, 1.0, 0.7919, "DPFMix Table 1"),)
    figure, caption = sweep_figure(
        agg, "target_epsilon", against="certified", published=published, epsilon_column="epsilon_rdp-wor"
    )
    traces = {t.name: t for t in figure.data}
    assert sorted(traces[POISSON].x) == [1.52, 2.54, 6.63]
    assert "certified ε ≤ 1.52 by pld-poisson (rigorous upper bound)" in traces[POISSON].hovertext  # names it
    assert list(traces[f"published — {POISSON}"].x) == [1.0]  # the paper's own (CLT) epsilon, as printed
    assert figure.layout.xaxis.title.text.startswith("certified ε") and figure.layout.xaxis.type == "log"
    assert not any(t.name.startswith("ε (") for t in figure.data)  # no second epsilon axis on this one
    assert caption.startswith(CERTIFIED_CAPTION) and "second ε axis" in caption
    on_axis, axis_caption = sweep_figure(agg, "target_epsilon", published=published)
    assert sorted(next(t for t in on_axis.data if t.name == POISSON).x) == [1.0, 2.0, 4.0] and axis_caption == ""
    with pytest.raises(ValueError, match="against must be one of"):
        sweep_figure(agg, "target_epsilon", against="nominal")


def test_on_a_sigma_axis_the_papers_points_are_not_put_on_the_epsilon_axis():
    from dpmix_core.experiments.spec import Published

    rows = _sweep_rows()
    for row in rows:
        row["axis"] = "sigma"
    agg = aggregate(rows, "sigma")
    figure, caption = sweep_figure(agg, "sigma", against="certified", published=(Published(POISSON, 0.5, 0.8, "x"),))
    assert not any(t.name.startswith("published") for t in figure.data) and "papers' points" in caption
    assert against_title("axis", "sigma") == "noise σx" and against_title("certified", "sigma") == "certified ε"
    assert against_title("axis", "target_epsilon").startswith("target ε")


def test_what_epsilon_do_i_need_reads_the_certified_epsilon_too():
    agg = aggregate(_sweep_rows(), "target_epsilon")
    assert epsilon_choices(agg, "target_epsilon")[:2] == ["target epsilon", CERTIFIED]
    answer = solve_epsilon(agg, axis="target_epsilon", series=POISSON, accuracy=0.725, epsilon_name=CERTIFIED)
    assert answer.epsilon is not None and 2.54 < answer.epsilon < 6.63  # between the PLD bounds, not the CLT's 2 and 4
    assert "certified ε" in answer.sentence()
    nominal = solve_epsilon(agg, axis="target_epsilon", series=POISSON, accuracy=0.725)
    assert nominal.epsilon is not None and 2.0 < nominal.epsilon < 4.0
    without = agg.drop(columns=["certified_epsilon"])
    assert CERTIFIED not in epsilon_choices(without, "target_epsilon")
    assert "epsilon_none" in agg.columns and "none" not in epsilon_choices(agg, "target_epsilon")  # non-private


def test_the_cli_offers_what_the_figure_draws():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    against = next(a for a in sub.choices["sweep-report"]._actions if a.dest == "against")
    assert tuple(against.choices) == AGAINST and against.default == "axis"


@pytest.fixture
def stored_table1(tmp_path, monkeypatch):
    """DPFMix Table 1's quick sweep with its Poisson series at CLT eps = 1, 2, 4 and its uniform series, finished."""
    from fake_jobs import finish_sweep

    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.runtime.store import ResultStore

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    results = {
        (r["config"]["label"], r["config"]["synthesis"]["target_epsilon"]): r["result"] for r in _sweep_rows()[:-1]
    }

    def result_for(config: dict) -> dict | None:
        found = results.get((config["label"], config["synthesis"]["target_epsilon"]))
        return None if found is None else {**found, "delta": 1e-5}

    store = ResultStore()
    return store, finish_sweep(store, get_preset("dpfmix-table1-quick"), result_for)


def test_the_report_and_the_cli_draw_a_sweep_against_its_certified_epsilon(stored_table1, tmp_path, capsys):
    from dpmix_core.views.sweep_report import sweep_report

    store, sweep = stored_table1
    title = "certified \\u03b5 (smallest rigorous upper bound"  # the figure's x-axis, in the page's plotly JSON
    page = sweep_report(store, sweep.id, against="certified")
    assert title in page and CERTIFIED_CAPTION in html.unescape(page)
    assert CERTIFIED_CAPTION not in html.unescape(sweep_report(store, sweep.id))
    assert "<th>certified ε</th>" in page and "<td>1.52</td>" in page and "<th>certified by</th>" in page
    out = tmp_path / "report.html"
    assert main(["sweep-report", str(sweep.id), "--out", str(out), "--against", "certified"]) == 0
    assert title in out.read_text()
    assert main(["sweep-report", str(sweep.id), "--out", str(tmp_path / "x.html"), "--against", "nominal"]) == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.fixture
def table1_and_l_sweep(stored_table1):
    """``stored_table1`` and a finished thesis-4.2-l-quick sweep (an axis of ℓ, every point at rdp-wor ε 3.3)."""
    from fake_jobs import finish_sweep

    from dpmix_core.experiments.presets import get_preset

    store, sweep = stored_table1
    card = {"epsilons": [_entry("rdp-wor", 3.3, True)]}
    other = finish_sweep(
        store, get_preset("thesis-4.2-l-quick"), lambda c: {"test_accuracy": 0.8, "privacy_card": card}
    )
    return store, sweep, other


def test_the_page_draws_the_sweep_against_its_certified_epsilon(stored_table1):
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    radio = at.radio(key="tr_against_target_epsilon")
    assert radio.value == "axis"
    radio.set_value("certified").run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    poisson = next(t for t in spec["data"] if t.get("name") == POISSON)
    assert sorted(poisson["x"]) == [1.52, 2.54, 6.63]
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("certified ε")
    assert any(CERTIFIED_CAPTION in c.value for c in at.caption)
    assert at.selectbox(key="tr_eps2").disabled
    assert at.selectbox(key="tr_solve_eps_certified").value == CERTIFIED  # "what ε do I need?" reads the same ε
    table = pd.DataFrame(at.dataframe[-1].value)
    assert {"certified_epsilon", "certified_by"} <= set(table.columns)


def test_other_sweeps_join_the_certified_axis_each_series_named_after_its_sweep():
    from dpmix_core.experiments.certified_axis import overlaid
    from dpmix_core.experiments.spec import Published

    table1 = aggregate(_sweep_rows(), "target_epsilon")
    sigma_rows = [
        {**_row("mixing", None, acc, {"privacy_card": {"epsilons": [_entry("rdp-wor", eps, True)]}}), "axis": "sigma"}
        for acc, eps in ((0.8, 3.0), (0.6, 1.0))
    ]
    for row, sigma in zip(sigma_rows, (0.7, 2.0), strict=True):
        row["config"]["synthesis"] = {"mechanism": "dpmix", "l": 16, "T": 1000, "sigma_x": sigma}
    sigma = aggregate(sigma_rows, "sigma")
    both = overlaid({"t1": table1, "s": sigma})
    assert set(both["label"]) >= {f"t1: {POISSON}", "s: mixing", "t1: non-private"} and len(both) == 9
    published = (Published(POISSON, 1.0, 0.79, "paper"), Published("DP diffusion", 1.0, 0.95, "x", reference=True))
    figure, caption = sweep_figure(
        table1, "target_epsilon", against="certified", name="t1", overlay={"s": sigma}, published=published, title="T"
    )
    traces = {t.name: t for t in figure.data}
    assert sorted(traces["s: mixing"].x) == [1.0, 3.0] and sorted(traces[f"t1: {POISSON}"].x) == [1.52, 2.54, 6.63]
    assert f"published — t1: {POISSON}" in traces  # the papers' points follow their series' new name
    assert any(name.startswith("published, not ours") and "DP diffusion" in name for name in traces)
    assert "Beside t1: s" in caption and figure.layout.title.text.startswith("T and 1 other sweep(s)")
    with pytest.raises(ValueError, match="only the certified"):
        sweep_figure(table1, "target_epsilon", overlay={"s": sigma})
    with pytest.raises(ValueError, match="no sweep"):
        overlaid({})


def test_the_report_and_the_cli_draw_other_sweeps_beside_one(stored_table1, tmp_path, capsys):
    from fake_jobs import finish_sweep

    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.views.sweep_report import sweep_report

    store, sweep = stored_table1
    card = {"epsilons": [_entry("rdp-wor", 3.3, True)]}
    other = finish_sweep(
        store, get_preset("thesis-4.2-l-quick"), lambda c: {"test_accuracy": 0.8, "privacy_card": card}
    )
    page = html.unescape(sweep_report(store, sweep.id, against="certified", beside=[other.id]))
    assert f"Beside {sweep.name}: thesis-4.2-l-quick" in page and "thesis-4.2-l-quick: mixing" in page
    out = tmp_path / "both.html"
    args = [
        "sweep-report",
        str(sweep.id),
        "--out",
        str(out),
        "--against",
        "certified",
        "--beside",
        "thesis-4.2-l-quick",
    ]
    assert main(args) == 0 and "thesis-4.2-l-quick: mixing" in out.read_text()
    assert main([*args[:3], str(tmp_path / "x.html"), "--beside", "thesis-4.2-l-quick"]) == 2
    assert "--beside needs --against certified" in capsys.readouterr().err
    assert main([*args[:3], str(tmp_path / "y.html"), "--against", "certified", "--beside", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err


def test_the_page_draws_other_sweeps_beside_the_one_shown(table1_and_l_sweep):
    _, sweep, other = table1_and_l_sweep
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.selectbox(key="tr_show").set_value(sweep.id).run()
    assert all(m.key != "tr_beside" for m in at.multiselect)  # only on the certified axis
    at.radio(key="tr_against_target_epsilon").set_value("certified").run()
    at.multiselect(key="tr_beside").set_value([other.id]).run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    names = {t.get("name") for t in spec["data"]}
    assert "thesis-4.2-l-quick: mixing" in names and f"{sweep.name}: {POISSON}" in names


def test_the_against_choice_survives_a_sweep_with_another_axis(table1_and_l_sweep):
    """Streamlit keeps a keyed radio's choice by its label, and "Against"'s first label names the sweep's axis
    ("target ε ..." here, "ℓ" for a sweep along ℓ): one radio per axis kind, the choice carried between them (with
    one radio, switching sweeps left none of its options selected in the browser and returned a label)."""
    _, sweep, other = table1_and_l_sweep
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.selectbox(key="tr_show").set_value(sweep.id).run()
    against = [r for r in at.radio if r.label == "Against"]
    assert len(against) == 1 and against[0].value == "axis" and against[0].options[0].startswith("target ε")
    against[0].set_value("certified").run()
    for shown in (other.id, sweep.id, other.id):
        at.selectbox(key="tr_show").set_value(shown).run()
        assert not at.exception, "\n".join(at.exception[0].stack_trace)
        (radio,) = [r for r in at.radio if r.label == "Against"]
        assert radio.value == "certified", (shown, radio.value)
        assert radio.options[0] == ("ℓ" if shown == other.id else "target ε (each series' accountant)")
