"""AppTest drives the "DP foundations" page like a teacher in a live demo."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "dp_foundations.py")


@pytest.fixture
def at():
    return AppTest.from_file(PAGE, default_timeout=120).run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def frame_with(at, column):
    """The (first) dataframe shown with this column."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_page_renders_all_sections(at):
    assert not at.exception and not at.error
    assert "n = " in at.info[0].value and "MNIST" in at.info[0].value
    headers = [h.value for h in at.header]
    assert len(headers) == 5 and headers[2] == "3 · Analyze-Gauss DP-PCA"
    assert headers[3].startswith("4 · Why mixing is private") and headers[4].startswith("5 · Public bounds")
    assert len(at.get("plotly_chart")) == 7
    releases = frame_with(at, "guarantee (by construction)")
    assert set(releases["mechanism"]) == {"Laplace", "Gaussian"}


def test_epsilon_slider_changes_noise_scale(at):
    assert metrics(at) == {"One-hot: b = 2/ε": "2", "Regression: b = 9/ε": "9"}
    at.select_slider(key="fnd_label_eps").set_value(0.5).run()
    assert not at.exception
    assert metrics(at) == {"One-hot: b = 2/ε": "4", "Regression: b = 9/ε": "18"}


def test_mechanism_epsilon_changes_release_table(at):
    before = frame_with(at, "noise")["noise"].tolist()
    at.select_slider(key="fnd_eps").set_value(0.5).run()
    assert not at.exception and not at.error
    t = frame_with(at, "noise")
    assert t["noise"].tolist() != before and (t["ε"] == 0.5).all()
    assert any("**classic** analysis" in c.value for c in at.caption)


def test_classic_calibration_above_one_is_an_error(at):
    at.radio(key="fnd_calibration").set_value("classic").run()  # default ε = 2
    assert not at.exception
    assert any("only for ε < 1" in e.value for e in at.error)
    assert at.header[2].value == "3 · Analyze-Gauss DP-PCA"  # the rest of the page still renders
    at.select_slider(key="fnd_eps").set_value(0.2).run()
    assert not at.exception and not at.error


def test_same_label_in_worked_example_is_an_error(at):
    at.selectbox(key="fnd_new_label").set_value(3).run()
    assert not at.exception
    assert any("pick two different labels" in e.value for e in at.error)


def test_pca_section_and_new_draw(at):
    pca = frame_with(at, "variance captured vs exact top-k")
    assert list(pca["row"]) == ["non-private", "ε = 10 (analytic)", "ε = 2 (analytic)", "ε = 0.1 (classic)"]
    assert pca["δ"].tolist()[1:] == ["1e-05"] * 3
    at.button(key="fnd_new_draw").click().run()
    assert not at.exception and at.number_input(key="fnd_seed").value == 1
    after = frame_with(at, "variance captured vs exact top-k")
    assert after.iloc[0].equals(pca.iloc[0])  # exact row: same data
    col = "variance captured vs exact top-k"
    assert after[col].tolist()[1:] != pca[col].tolist()[1:]  # DP rows: new noise


def test_mixing_lesson_starts_at_dpfmix_table3_and_follows_the_controls(at):
    stages = frame_with(at, "what is released").set_index("stage")
    assert stages.loc["composition", "ε"] == "1"  # DPFMix Table 3's release, calibrated to epsilon = 1
    assert stages.loc["composition", "points T"] == 60000
    at.select_slider(key="fnd_mix_T").set_value(600000).run()
    assert not at.exception and not at.error
    assert frame_with(at, "what is released").set_index("stage").loc["composition", "points T"] == 600000
    at.number_input(key="fnd_mix_n").set_value(10).run()  # fewer records than m = 64: one line, no chart
    assert not at.exception and "cannot exceed the n = 10 records" in at.error[0].value


def test_mixing_lesson_switches_to_dpmix_at_the_thesis_release(at):
    at.radio(key="fnd_mix_model").set_value("without-replacement").run()
    assert not at.exception and not at.error
    stages = frame_with(at, "what is released").set_index("stage")
    assert (
        stages.loc["composition", "points T"] == 10000 and stages.loc["composition", "ε"] == "11.6"
    )  # rdp-wor at delta = 1/n
    assert any("thesis §4.1" in c.value for c in at.caption)


def test_mixing_lesson_takes_the_release_set_on_the_accountant_page(at):
    """A Poisson release with Cx = 2 arrives with its clip: the lesson's release is the page's, its eps pld-poisson's."""
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.release import MixingRelease
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

    sizes = dict(n=50000, l=100, T=3000, sigma_x=0.5, sigma_y=1.0)
    shared = SharedRelease(page="Privacy accountant", **sizes, delta=2e-5, mechanism="poisson", clip=(2.0, 1.0))
    at.session_state[SHARED_RELEASE_KEY] = shared
    at.run()
    at.button(key="fnd_mix_shared").click().run()
    assert not at.exception and not at.error and at.number_input(key="fnd_mix_cx").value == 2.0
    stages = frame_with(at, "what is released").set_index("stage")
    assert stages.loc["composition", "points T"] == 3000 and "m = 100" in stages.loc["averaging", "what is released"]
    assert any("δ = 2e-05" in c.value and "n=50000" in c.value for c in at.caption)
    release = MixingRelease.poisson(n=50000, m=100, T=3000, sigma_x=0.5, sigma_y=1.0, clip_x=2.0, clip_y=1.0)
    expected = get_accountant("pld-poisson").epsilon(release, 2e-5).epsilon
    assert stages.loc["composition", "ε"] == f"{expected:.3g}"


@pytest.mark.parametrize("mechanism", [None, "class-centric"])
def test_a_release_the_lesson_has_no_model_of_is_not_copied_into_another(at, mechanism):
    """DP-CDA's model (no mechanism) and class-centric mixing: the same sizes under the lesson's models would be another
    release with another eps, so there is no button, and a caption says why."""
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

    at.session_state[SHARED_RELEASE_KEY] = SharedRelease(
        page="Privacy accountant", n=50000, l=100, T=3000, sigma_x=0.5, sigma_y=1.0, delta=2e-5, mechanism=mechanism
    )
    at.run()
    assert not at.exception and not [b for b in at.button if b.key == "fnd_mix_shared"]
    assert any("is not one of this lesson's release models" in c.value for c in at.caption)


def test_the_accountant_pages_clipped_records_preset_arrives_with_its_epsilon():
    """DPFMix's uniform row on clipped records: the lesson's release stage is the accountant page's headline (eps 2 by
    rdp-wor on ||x||, ||y|| <= 1), not the [0,1] release the same sigma would be on (eps in the thousands)."""
    acc = AppTest.from_file(str(Path(PAGE).parent / "privacy_accountant.py"), default_timeout=120).run()
    acc.selectbox(key="acc_preset").set_value("DPFMix's uniform row (MNIST, m=64, eps=2, clipped records)").run()
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY

    shared = acc.session_state[SHARED_RELEASE_KEY]
    assert shared.mechanism == "dpmix" and shared.clip == (1.0, 1.0)
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[SHARED_RELEASE_KEY] = shared
    at.run()
    at.button(key="fnd_mix_shared").click().run()
    assert not at.exception and at.session_state["fnd_mix_model"] == "without-replacement-clipped"
    stages = frame_with(at, "what is released").set_index("stage")
    assert stages.loc["composition", "points T"] == 60000 and 1.9 < float(stages.loc["composition", "ε"]) <= 2.0


def test_the_accountant_pages_dpmix_release_arrives_in_the_lesson_as_dpmix():
    """From the Privacy accountant (DPMix headline by default) the lesson switches to DPMix and shows its rdp-wor."""
    acc = AppTest.from_file(str(Path(PAGE).parent / "privacy_accountant.py"), default_timeout=120).run()
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY

    shared = acc.session_state[SHARED_RELEASE_KEY]
    assert shared.mechanism == "dpmix"
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[SHARED_RELEASE_KEY] = shared
    at.run()
    at.button(key="fnd_mix_shared").click().run()
    assert not at.exception and at.session_state["fnd_mix_model"] == "without-replacement"
    stages = frame_with(at, "what is released").set_index("stage")
    assert stages.loc["composition", "points T"] == shared.T


def test_the_bounds_lesson_follows_its_sliders(at):
    """Lesson 5: the error of a DP mean age with the public bounds as they are grows with them; a private range first
    keeps it near the ages; the table and sentences follow n, epsilon and the range's share."""
    table = frame_with(at, "bias (mean error, years)")
    assert set(table["method"]) == {"public bounds as they are", "private range first"} and len(table) == 10
    said = [m.value for m in at.markdown if "times smaller" in m.value]
    assert len(said) == 1 and "10% of ε" in said[0]
    at.select_slider(key="fnd_bounds_share").set_value(0.3).run()
    at.select_slider(key="fnd_bounds_eps").set_value(4.0).run()
    assert not at.exception and not at.error
    assert any("30% of ε" in m.value for m in at.markdown)
    after = frame_with(at, "bias (mean error, years)")
    plain = after[after["method"] == "public bounds as they are"]["noise std (years)"].to_numpy()
    before = table[table["method"] == "public bounds as they are"]["noise std (years)"].to_numpy()
    assert (plain < before).all()  # a larger epsilon: less noise at every width
    assert set(after["ε of everything released"]) == {4.0}
