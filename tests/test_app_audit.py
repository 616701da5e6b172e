"""AppTest drives the "Privacy audit" page."""

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "privacy_audit.py")


@pytest.fixture
def at(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    return AppTest.from_file(PAGE, default_timeout=120).run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_renders_consistent_audit(at):
    assert not at.exception and not at.error
    m = metrics(at)
    assert m["Verdict"] == "consistent" and float(m["Empirical ε lower bound (95% confidence)"]) > 0
    assert any("the attack proves ε ≥" in s.value for s in at.success)  # the default demo shows a real lower bound
    assert any("rigorous upper bound" in str(v) for v in at.dataframe[0].value["guarantee"])


def test_buggy_noise_is_caught_at_the_default_settings(at):
    at.select_slider(key="aud_scale").set_value(0.1).run()
    assert not at.exception and metrics(at)["Verdict"] == "VIOLATION"
    assert any("leaks more" in e.value for e in at.error)


def test_bad_audit_input_is_an_error(at):
    at.text_input(key="aud_l").input("50").run()
    assert not at.exception and any("must not exceed" in e.value for e in at.error)


def test_membership_attack_runs_in_a_background_worker(at):
    at.number_input(key="aud_mia_epochs").set_value(20)
    at.text_input(key="aud_mia_eps").input("4").run()
    at.button(key="aud_mia_run").click().run()
    assert not at.exception and at.session_state["aud_mia_job"]
    deadline = time.time() + 120
    while time.time() < deadline and not any("AUC" in str(d.value.columns) for d in at.dataframe):
        time.sleep(1.0)
        at.run()
    assert not at.exception and not at.error
    table = at.dataframe[-1].value
    assert list(table["label"])[:2] == ["non-private", "DPMix l=16, no noise"] and table["AUC"].between(0, 1).all()


def test_reidentification_leaks_without_mixing(at):
    assert metrics(at)["Released points that match one training record (nearest ≪ typical distance)"] == "100%"
    assert [b for b in at.get("download_button") if "Images (PNG)" in b.proto.label]
    at.selectbox(key="aud_re_mech").set_value("dpmix").run()
    at.number_input(key="aud_re_l").set_value(64)
    at.number_input(key="aud_re_sigma").set_value(0.1).run()
    assert not at.exception
    assert metrics(at)["Released points that match one training record (nearest ≪ typical distance)"] == "0%"


def test_controls_shared_with_the_accountant_page():
    at = AppTest.from_file(str(Path(PAGE).parent.parent / "app.py"), default_timeout=120).run()
    at.text_input(key="acc_n").input("200")
    at.text_input(key="acc_l").input("2")
    at.text_input(key="acc_T").input("3").run()
    at.switch_page("app_pages/privacy_audit.py").run()
    at.button(key="aud_use_shared").click().run()
    assert not at.exception
    assert (
        at.text_input(key="aud_n").value,
        at.text_input(key="aud_l").value,
        at.text_input(key="aud_T").value,
    ) == ("200", "2", "3")
    assert at.selectbox(key="aud_mech").value == "dpmix"  # the accountant page's default model is DPMix's


def test_a_shared_dpmix_release_switches_the_audit_back_from_poisson(at):
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY, SharedRelease

    at.selectbox(key="aud_mech").set_value("poisson").run()
    shared = SharedRelease(
        page="Mixed samples", n=300, l=4, T=5, sigma_x=2.0, sigma_y=2.0, delta=1e-5, mechanism="dpmix"
    )
    at.session_state[SHARED_RELEASE_KEY] = shared
    at.run()
    at.button(key="aud_use_shared").click().run()
    assert not at.exception and at.selectbox(key="aud_mech").value == "dpmix"
    assert at.text_input(key="aud_n").value == "300"


def test_audit_counts_accept_scientific_notation_and_refuse_bad_entries_visibly(at):
    at.text_input(key="aud_n").input("1e2").run()
    assert not at.exception and not at.error and at.metric
    at.text_input(key="aud_n").input("0").run()
    assert any(e.value.startswith("invalid: n = 0 must be at least 2") for e in at.error)
    labels = [m.label for m in at.metric]  # no verdict computed from other numbers than those on screen
    assert not any("lower bound" in label or label == "Verdict" for label in labels), labels


def test_membership_counts_are_typed_and_a_bad_one_launches_nothing(at):
    at.text_input(key="aud_mia_T").input("1e3").run()
    assert not at.exception and at.button(key="aud_mia_run")
    at.text_input(key="aud_mia_T").input("0").run()
    assert any(e.value.startswith("invalid: T") for e in at.error)
    assert not [b for b in at.button if b.key == "aud_mia_run"]


def test_the_audit_mechanism_of_a_release_from_another_page():
    from dpmix_core.audit import audit_mechanism

    assert [audit_mechanism(m) for m in ("dpmix", "local", "poisson")] == ["dpmix", "dpmix", "poisson"]
    assert audit_mechanism("class-centric") is None and audit_mechanism(None) is None
