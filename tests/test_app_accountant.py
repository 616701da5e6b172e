"""AppTest drives the "Privacy accountant" page like a user."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "privacy_accountant.py")


@pytest.fixture
def at():
    return AppTest.from_file(PAGE, default_timeout=120).run()


def calibrate_button(at):
    return next(b for b in at.button if b.label == "Solve")


def table(at):
    return at.dataframe[0].value.set_index("accountant")


def test_page_renders_all_accountants(at):
    assert not at.exception and not at.error
    t = table(at)
    assert {"lee2019", "dpcda", "gdp-clt", "rdp-poisson", "pld-poisson", "rdp-wor"} <= set(t.index)
    ours = ["lee2019", "rdp-wor"]  # the default release model: DPMix, [0,1] data, l distinct records of n
    assert list(t.index[:2]) == ours and t.loc[ours, "release analysed"].str.endswith("(chosen)").all()
    assert (t.loc[ours, "guarantee"] == "rigorous upper bound").all()
    others = t.drop(index=ours)  # bounds of other releases say so
    assert (others["guarantee"].str.endswith("not for the chosen release model")).all()
    assert t.loc["gdp-clt", "guarantee"].startswith("approximation (not an upper bound)")
    assert t["δ"].nunique() == 1 and t["sampling / adjacency"].str.contains("adjacency|replace|remove").all()


def test_the_table_follows_the_release_model_the_headline_speaks_for(at):
    at.radio(key="acc_model").set_value("poisson").run()
    t = table(at)
    assert not at.exception and list(t.index[:3]) == ["gdp-clt", "rdp-poisson", "pld-poisson"]
    assert t.loc["pld-poisson", "guarantee"] == "rigorous upper bound"
    assert t.loc["lee2019", "guarantee"] == "rigorous upper bound, not for the chosen release model"


def test_changing_sigma_changes_the_table(at):
    before = table(at)["ε"].copy()
    at.number_input(key="acc_sigma_x").set_value(0.2).run()
    after = table(at)["ε"]
    assert not at.exception and (before != after).all()


def test_more_releases_cost_more(at):
    before = float(table(at).loc["lee2019", "ε"])
    at.text_input(key="acc_T").input("40000").run()
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
    at.text_input(key="acc_l").input("70000").run()
    assert not at.exception
    assert any("l must not exceed n" in e.value for e in at.error)
    assert len(at.dataframe) == 0


def test_class_centric_split_error(at):
    at.checkbox(key="acc_class_centric").check().run()
    at.text_input(key="acc_classes").input("7").run()
    assert any("equal classes" in e.value for e in at.error)


def test_no_noise_shows_infinity(at):
    at.number_input(key="acc_sigma_x").set_value(0.0).run()
    assert not at.exception
    assert (table(at)["ε"] == "∞").all()


def test_calibrate_form(at):
    at.number_input(key="acc_target").set_value(15.0)
    at.selectbox(key="acc_cal_accountant_dpmix").set_value("lee2019")
    calibrate_button(at).click().run()  # the form's submit button
    assert not at.exception
    assert any("σx = **0.07" in s.value for s in at.success), [s.value for s in at.success]


def test_unreachable_calibration_is_an_error(at):
    at.number_input(key="acc_target").set_value(0.001)
    at.selectbox(key="acc_cal_accountant_dpmix").set_value("lee2019")
    calibrate_button(at).click().run()
    assert not at.exception and any("out of reach" in e.value for e in at.error)


def test_solve_for_T_and_use_it_above(at):
    """The most points at the page's noise: the table then shows the target met at that T."""
    at.radio(key="acc_model").set_value("poisson").run()  # the form offers the chosen model's accountants
    at.number_input(key="acc_target").set_value(2.0)
    at.selectbox(key="acc_cal_accountant_poisson").set_value("rdp-poisson")
    at.radio(key="acc_solve_for").set_value(at.radio(key="acc_solve_for").options[1])
    calibrate_button(at).click().run()
    assert not at.exception and any("at most **T =" in s.value for s in at.success), [s.value for s in at.success]
    next(b for b in at.button if b.label == "Use this T above").click().run()
    assert not at.exception and at.text_input(key="acc_T").value != "10000"
    assert float(table(at).loc["rdp-poisson", "ε"]) <= 2.0
    assert float(table(at).loc["rdp-wor", "ε"]) > 100  # the uniform [0,1] release at that T: another release


def test_solve_for_T_when_one_point_is_too_much_is_an_error(at):
    at.number_input(key="acc_target").set_value(0.5)
    at.selectbox(key="acc_cal_accountant_dpmix").set_value("lee2019")
    at.radio(key="acc_solve_for").set_value(at.radio(key="acc_solve_for").options[1])
    calibrate_button(at).click().run()
    assert not at.exception and any("even one point costs" in e.value for e in at.error)


def test_privacy_statement_tab_follows_the_release_model(at):
    statements = [c.value for c in at.code if c.value.startswith("We release T = 10,000")]
    assert len(statements) == 1 and "without replacement" in statements[0] and "rigorous upper bound" in statements[0]
    at.radio(key="acc_model").set_value("poisson").run()  # Poisson sampling (DPFMix)
    statements = [c.value for c in at.code if c.value.startswith("We release T = 10,000")]
    assert not at.exception and "Poisson sample" in statements[0] and "added or removed" in statements[0]


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
    rdp_wor = table(at).loc["rdp-wor"]  # the headline's accountant for the default release
    assert float(metric.value) >= float(rdp_wor["ε"]) and "rounded up" in metric.help  # never below the bound
    assert f"= ({metric.value}, " in at.code[0].value  # the privacy statement prints the same number
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


def test_the_budget_adds_a_tables_private_ranges_beside_its_release(at):
    """The what-if of --private-ranges: the default release plus ranges at 0.1 alone, composed in the budget."""
    from dpmix_core.privacy.budget import compose_budget
    from dpmix_core.views.budget import ranges_budget_item

    at.button(key="acc_budget_add").click().run()
    at.radio(key="acc_b_kind").set_value("private feature ranges").run()
    add = at.button(key="acc_budget_add_other")
    assert "private feature ranges (ε = 0.1, replace-one)" in add.label  # the default release's adjacency
    add.click().run()
    assert not at.exception and not at.error
    (table,) = [d.value for d in at.dataframe if "ε alone" in d.value.columns]
    release, ranges, total = table["ε alone"].tolist()
    assert table["release"][1] == "private feature ranges (ε = 0.1, replace-one)"
    expected = compose_budget([ranges_budget_item(epsilon=0.1, delta=1e-5)], 1e-5).epsilon
    assert ranges == pytest.approx(expected) and 0.09 < ranges <= 0.12  # alone, the ranges' ε (RDP) is near 0.1
    assert release < total < release + 0.25  # composed, they add little to the release's ε


def test_attacker_curves_on_demand(at):
    at.toggle(key="acc_attacker").set_value(True).run()
    assert not at.exception
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Trade-off curve" in t for t in titles) and any("Privacy profile" in t for t in titles)


def _shows_no_epsilon(at) -> bool:
    return len(at.dataframe) == 0 and not at.metric and not at.get("plotly_chart")


def test_scientific_notation_is_read_exactly_not_clamped(at):
    """Issue 15: typing 1e9 into T showed the epsilon of T = 1. Now 1e9 means 10^9, or a visible refusal."""
    at.text_input(key="acc_T").input("1e4").run()
    assert not at.exception and not at.error
    at_1e4 = table(at)["ε"].copy()
    at.text_input(key="acc_T").input("10000").run()
    assert (table(at)["ε"] == at_1e4).all()
    at.text_input(key="acc_T").input("1e9").run()
    assert not at.exception and not at.error
    lee = table(at).loc["lee2019", "ε"]
    assert lee != at_1e4["lee2019"] and lee != "∞"
    at.text_input(key="acc_n").input("6e4").run()
    assert not at.error


@pytest.mark.parametrize(
    "key, text, message",
    [
        ("acc_T", "0", "invalid: T = 0 must be at least 1"),
        ("acc_n", "0", "invalid: n = 0 must be at least 1"),
        ("acc_delta", "-0.1", "invalid: δ = -0.1 must be greater than 0"),
        ("acc_T", "1e9x", "is not a number"),
        ("acc_T", "2.5", "must be a whole number"),
        ("acc_dx", "0", "invalid: dx = 0 must be at least 1"),
    ],
)
def test_out_of_range_entries_show_invalid_and_no_stale_epsilon(at, key, text, message):
    assert len(at.dataframe) > 0  # an epsilon on screen before the bad entry
    at.text_input(key=key).input(text).run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert _shows_no_epsilon(at)


def test_negative_sigma_is_refused_visibly(at):
    at.number_input(key="acc_sigma_x").set_value(-0.1).run()
    assert any(e.value.startswith("invalid: σx") for e in at.error)
    assert _shows_no_epsilon(at)


def test_curve_is_computed_in_the_background_then_drawn():
    """A T change reruns without waiting for the curves; the poll's rerun draws the curve for this T."""
    from dpmix_core.views.background import shared_background

    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.radio(key="acc_axis").set_value("T").run()
    at.text_input(key="acc_T").input("23456").run()
    assert not at.exception and len(at.dataframe) > 0  # the table is already current
    waiting = any("Computing ε along" in i.value for i in at.info)
    assert waiting or shared_background().wait_all(0)  # either a placeholder, or the curve was already there
    assert shared_background().wait_all(120)
    at.run()
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    assert any('"x0":23456' in c for c in charts), "the marker sits at the T on screen"
    assert not any("Computing ε along" in i.value for i in at.info)


def test_two_sessions_typing_at_once_both_get_their_curve():
    """A classroom on one server: a second user's change does not cancel the first user's queued curve."""
    import time

    from dpmix_core.views.background import shared_background

    # two decades no other test asks for: two curves, neither computed yet
    sessions = {t: AppTest.from_file(PAGE, default_timeout=120).run() for t in ("2345678", "34567890")}
    for at in sessions.values():
        at.radio(key="acc_axis").set_value("T").run()
    assert shared_background().wait_all(120)
    shared_background().request(("occupy the worker", time.monotonic()), time.sleep, 6)
    for ahead, (t, at) in enumerate(sessions.items(), start=1):
        at.text_input(key="acc_T").input(t).run()  # both queued behind the busy worker
        waiting = [i.value for i in at.info if "Computing ε along" in i.value]
        assert waiting and f"once {ahead} other curve" in waiting[0], waiting  # says what it waits for
    assert shared_background().wait_all(120)
    for t, at in sessions.items():
        at.run()  # what each page's poll does once its curve is ready
        charts = [c.proto.spec for c in at.get("plotly_chart")]
        assert any(f'"x0":{t}' in c for c in charts), f"the session at T = {t} has its curve"


def test_a_non_positive_clip_is_refused_visibly(at):
    at.number_input(key="acc_clip_x").set_value(0.0).run()
    assert not at.exception and any(e.value.startswith("invalid: clip_x") for e in at.error), [
        e.value for e in at.error
    ]
    assert _shows_no_epsilon(at)


def test_budget_dpsgd_counts_are_typed_and_a_bad_one_offers_nothing(at):
    at.radio(key="acc_b_kind").set_value("DP-SGD model").run()
    assert not at.exception and at.button(key="acc_budget_add_other")
    at.text_input(key="acc_b_sgd_n").input("6e4").run()
    assert not at.error and at.button(key="acc_budget_add_other")  # 6e4 parses (exactly: tests of views.inputs)
    at.text_input(key="acc_b_sgd_n").input("0").run()
    assert any(e.value.startswith("invalid: n") for e in at.error)
    assert not [b for b in at.button if b.key == "acc_budget_add_other"]  # nothing to add for numbers off screen


def test_calibration_follows_the_release_model(at):
    """The accountants offered are the chosen model's, each on that model's release: rdp-wor under DPMix
    calibrates [0,1] data (it once calibrated DP-CDA's clipped release, a far smaller sigma, since the page's
    clip c is always set)."""
    assert at.selectbox(key="acc_cal_accountant_dpmix").options == ["rdp-wor", "lee2019"]  # the tighter first
    assert at.selectbox(key="acc_cal_accountant_dpmix").value == "rdp-wor"
    at.number_input(key="acc_target").set_value(2.0)
    at.selectbox(key="acc_cal_accountant_dpmix").set_value("rdp-wor")
    calibrate_button(at).click().run()
    assert not at.exception and any("σx = **0.2175" in s.value for s in at.success), [s.value for s in at.success]
    next(b for b in at.button if b.label == "Use this σ above").click().run()
    assert float(table(at).loc["rdp-wor", "ε"]) <= 2.0  # the headline's release meets the target
    at.radio(key="acc_model").set_value("dpcda").run()
    assert at.selectbox(key="acc_cal_accountant_dpcda").options == ["rdp-wor", "dpcda"] and not at.exception


def test_uniform_mixing_of_clipped_records_preset(at):
    """DPFMix Table 1's uniform row (App. E.3: records clipped to ||x||, ||y|| <= 1): its own release model, the
    headline from rdp-wor on that release, calibrated to eps = 2; class-centric has no accountant for it."""
    at.selectbox(key="acc_preset").set_value("DPFMix's uniform row (MNIST, m=64, eps=2, clipped records)").run()
    assert not at.exception and not at.error and at.radio(key="acc_model").value == "dpmix-clip"
    t = table(at)
    assert t.index[0] == "rdp-wor (clipped x, y)" and t["release analysed"].iloc[0].endswith("(chosen)")
    assert 1.9 < float(t.loc["rdp-wor (clipped x, y)", "ε"]) <= 2.0
    assert at.number_input(key="acc_sigma_x").value == pytest.approx(0.0581, abs=2e-4)
    assert at.selectbox(key="acc_cal_accountant_dpmix-clip").options == ["rdp-wor"]
    assert any("rdp-wor" in m.value and "rigorous upper bound" in m.value for m in at.markdown)
    at.checkbox(key="acc_class_centric").check().run()
    assert not at.exception and any("No headline: no accountant analyses" in w.value for w in at.warning)
    assert any("Nothing to calibrate" in i.value for i in at.info)


@pytest.fixture(scope="module")
def pets_release(tmp_path_factory) -> Path:
    """A class-centric release of a 3-class CSV with unequal classes (188 / 189 / 223 records), made by synthesize."""
    import numpy as np

    from dpmix_core.cli.main import main

    folder = tmp_path_factory.mktemp("pets")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = np.clip(rng.normal(size=(600, 4)) + 1.5 * y[:, None], -5, 10)
    rows = [
        f"{s},{a:.3f},{b:.3f},{c:.3f},{d:.3f}" for (a, b, c, d), s in zip(x, np.array(["b", "c", "d"])[y], strict=True)
    ]
    (folder / "pets.csv").write_text("species,a,b,c,d\n" + "\n".join(rows) + "\n")
    args = ["synthesize", "--data-file", str(folder / "pets.csv"), "--feature-range", "-5,10", "--mechanism"]
    args += ["class-centric", "--l", "4", "--T", "500", "--target-epsilon", "3", "--out", str(folder / "rel.npz")]
    assert main(args) == 0
    return folder / "rel.npz"


def _card_epsilons(release: Path) -> dict[str, float]:
    import json

    card = json.loads(release.with_suffix(".card.json").read_text())
    return {e["accountant"]: e["epsilon"] for e in card["epsilons"]}


@pytest.mark.parametrize("which", ["npz", "card"])
def test_a_release_card_fills_the_controls_and_reads_exactly_as_on_its_card(at, pets_release, which):
    path = pets_release if which == "npz" else pets_release.with_suffix(".card.json")
    at.file_uploader(key="acc_card_file").set_value([(path.name, path.read_bytes(), "application/octet-stream")])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.text_input(key="acc_n").value == "600" and at.checkbox(key="acc_class_centric").value
    assert any("From the card of rel" in c.value and "class sizes 188, 189, 223 kept" in c.value for c in at.caption), [
        c.value for c in at.caption
    ]
    t, card = table(at), _card_epsilons(pets_release)
    chosen = t[t["release analysed"].str.endswith("(chosen)")].index
    assert set(chosen) == {"lee2019", "rdp-wor"}  # the card's release model's rows ...
    for name in chosen:  # ... read the card's own numbers: its unequal classes (3 x 200 would read 3.27 / 2.81)
        assert float(t.loc[name, "ε"]) == pytest.approx(card[name], rel=5e-3), name
    assert float(at.metric[0].value) == pytest.approx(card["rdp-wor"], rel=5e-3)  # the headline: tightest bound
    at.text_input(key="acc_n").input("900").run()  # another dataset: the controls' release, equal classes
    assert any("n, dx or the classes changed" in c.value for c in at.caption)
    assert float(table(at).loc["lee2019", "ε"]) != pytest.approx(card["lee2019"], rel=5e-3)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("rel.npz", b"not a zip", "not a readable .npz"),
        ("notes.json", b"{}", "not a privacy card"),
        ("edited.card.json", None, "does not verify"),
    ],
)
def test_a_card_that_cannot_be_read_or_verified_is_one_error_under_the_uploader(at, pets_release, name, data, message):
    if data is None:  # the card with its rdp-wor epsilon edited
        text = pets_release.with_suffix(".card.json").read_text()
        eps = _card_epsilons(pets_release)["rdp-wor"]
        data = text.replace(repr(eps), repr(eps / 2), 1).encode()
    at.file_uploader(key="acc_card_file").set_value([(name, data, "application/octet-stream")]).run()
    assert not at.exception and len(at.error) == 1 and message in at.error[0].value, [e.value for e in at.error]
    assert at.text_input(key="acc_n").value == "60000"  # the controls are left as they were
