"""AppTest drives the "Privacy accountant" page like a user."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "privacy_accountant.py")


@pytest.fixture
def at():
    return AppTest.from_file(PAGE, default_timeout=120).run()


def calibrate_button(at):
    return next(b for b in at.button if b.label == "Calibrate σ")


def table(at):
    return at.dataframe[0].value.set_index("accountant")


def test_page_renders_all_accountants(at):
    assert not at.exception and not at.error
    t = table(at)
    assert {"lee2019", "dpcda", "gdp-clt", "rdp-poisson", "pld-poisson", "rdp-wor"} <= set(t.index)
    assert t.loc["gdp-clt", "guarantee"] == "approximation (not an upper bound)"
    assert (t.drop(index="gdp-clt")["guarantee"] == "rigorous upper bound").all()
    assert t["δ"].nunique() == 1 and t["sampling / adjacency"].str.contains("adjacency|replace|remove").all()


def test_changing_sigma_changes_the_table(at):
    before = table(at)["ε"].copy()
    at.number_input(key="acc_sigma_x").set_value(0.2).run()
    after = table(at)["ε"]
    assert not at.exception and (before != after).all()


def test_more_releases_cost_more(at):
    before = float(table(at).loc["lee2019", "ε"])
    at.number_input(key="acc_T").set_value(40000).run()
    assert float(table(at).loc["lee2019", "ε"]) > before


@pytest.mark.parametrize(
    "preset, expected_lee",
    [("Thesis §4.1 (DPMix, MNIST)", "15"), ("Thesis §4.2 (class-centric, MNIST)", None)],
)
def test_presets_load(at, preset, expected_lee):
    at.selectbox(key="acc_preset").set_value(preset).run()
    assert not at.exception and not at.error
    t = table(at)
    if expected_lee:
        assert t.loc["lee2019", "ε"] == expected_lee
        assert at.number_input(key="acc_sigma_x").value == pytest.approx(0.0711, abs=2e-4)
    else:
        assert "class-centric" in t.loc["lee2019", "assumptions"]


def test_calibrated_presets_load(at):
    at.selectbox(key="acc_preset").set_value("DPFMix (MNIST, m=64, eps=2)").run()
    assert not at.exception
    assert float(table(at).loc["gdp-clt", "ε"]) <= 2.0


def test_bad_input_shows_error_not_crash(at):
    at.number_input(key="acc_l").set_value(70000).run()
    assert not at.exception
    assert any("l must not exceed n" in e.value for e in at.error)
    assert len(at.dataframe) == 0


def test_class_centric_split_error(at):
    at.checkbox(key="acc_class_centric").check().run()
    at.number_input(key="acc_classes").set_value(7).run()
    assert any("equal classes" in e.value for e in at.error)


def test_no_noise_shows_infinity(at):
    at.number_input(key="acc_sigma_x").set_value(0.0).run()
    assert not at.exception
    assert (table(at)["ε"] == "∞").all()


def test_calibrate_form(at):
    at.number_input(key="acc_target").set_value(15.0)
    at.selectbox(key="acc_cal_accountant").set_value("lee2019")
    calibrate_button(at).click().run()  # the form's submit button
    assert not at.exception
    assert any("σx = **0.07" in s.value for s in at.success), [s.value for s in at.success]


def test_unreachable_calibration_is_an_error(at):
    at.number_input(key="acc_target").set_value(0.001)
    at.selectbox(key="acc_cal_accountant").set_value("lee2019")
    calibrate_button(at).click().run()
    assert not at.exception and any("out of reach" in e.value for e in at.error)


def test_curve_axes(at):
    for axis in ["T", "ℓ", "σx"]:
        at.radio(key="acc_axis").set_value(axis).run()
        assert not at.exception


def test_class_centric_label_protection_and_private_normalisation(at):
    """Class-centric defaults protect labels; the features-only reading and private normalisation are labelled."""
    at.checkbox(key="acc_class_centric").check().run()
    t = table(at)
    assert not at.exception and "2*T_k" in t.loc["lee2019", "assumptions"]
    assert t.loc["lee2019", "guarantee"] == "rigorous upper bound"
    full = float(t.loc["lee2019", "ε"])
    at.checkbox(key="acc_protect_labels").uncheck().run()
    t = table(at)
    assert t.loc["lee2019", "guarantee"] == "rigorous upper bound (features only; labels not protected)"
    assert float(t.loc["lee2019", "ε"]) < full
    at.checkbox(key="acc_private_norm").check().run()
    t = table(at)
    assert t["guarantee"].str.startswith("not covered").all()
    assert any("No ε on this page is an upper bound" in w.value for w in at.warning)


def test_headline_in_words_and_attacker_curves(at):
    """One headline for the chosen release model (tightest rigorous ε, odds, test power), then the curves."""
    assert not at.exception
    metric = at.metric[0]
    assert metric.label.startswith("ε at δ")
    assert any(
        "no test can tell whether your record was used" in m.value or "no test is ruled out" in m.value
        for m in at.markdown
    )
    at.selectbox(key="acc_preset").set_value("DPFMix (MNIST, m=64, eps=2)").run()
    assert not at.exception and at.radio(key="acc_model").value == "poisson"
    assert "pld-poisson" in at.metric[0].help and float(at.metric[0].value) <= 2.2


def test_privacy_budget_composes_releases(at):
    at.button(key="acc_budget_add").click().run()
    at.button(key="acc_budget_add").click().run()
    assert not at.exception
    total = [m for m in at.metric if m.label.startswith("Total ε")]
    assert total and float(total[0].value) > float(at.metric[0].value)  # two releases cost more than one
    at.radio(key="acc_b_kind").set_value("label-only Laplace").run()
    at.button(key="acc_budget_add_other").click().run()
    assert any("publishes features" in w.value for w in at.warning)
    at.button(key="acc_budget_clear").click().run()
    assert not [m for m in at.metric if m.label.startswith("Total ε")]


def test_attacker_curves_on_demand(at):
    at.toggle(key="acc_attacker").set_value(True).run()
    assert not at.exception
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Trade-off curve" in t for t in titles) and any("Privacy profile" in t for t in titles)
