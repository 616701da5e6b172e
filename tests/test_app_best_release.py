"""Page "Best release": the search of one's own file runs as a background job and shows the choice with its ε;
bad entries are one error next to their box, and nothing is launched."""

import json
import time
from pathlib import Path

import pytest
from own_files import pets_bytes
from streamlit.testing.v1 import AppTest

from dpmix_core.experiments.best_release import own_data_space
from dpmix_core.experiments.best_release_jobs import (
    JOB_KIND,
    TRIAL_COLUMNS,
    best_release_run,
    chosen_release_files,
    page_search,
    run_job,
    search_config,
    search_from_config,
    trial_rows,
)
from dpmix_core.experiments.run_data import open_data_file
from dpmix_core.runtime.store import ResultStore

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "best_release.py")


class _Reporter:
    def __init__(self):
        self.seen = []

    def progress(self, **fields):
        self.seen.append(fields)

    def check(self):
        pass


@pytest.fixture
def at(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    return AppTest.from_file(PAGE, default_timeout=120).run()


def _upload(at):
    at.selectbox(key="br_dataset").set_value("own file").run()
    at.file_uploader(key="br_own_upload").set_value([("pets.csv", pets_bytes(3000, label="label"), "text/csv")]).run()
    at.number_input(key="br_own_lo").set_value(-5.0)
    at.number_input(key="br_own_hi").set_value(10.0).run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_the_page_searches_an_uploaded_file_in_the_background(at, tmp_path):
    _upload(at)
    n = open_data_file(next((tmp_path / "data").glob("*/pets.csv")), label_column="label").dataset.n_train
    grid = own_data_space(n)  # the grid starts from the file's own defaults
    assert at.text_input(key="br_m").value == ", ".join(map(str, grid.mix_degrees))
    assert at.text_input(key="br_T").value == ", ".join(map(str, grid.num_points))
    assert at.selectbox(key="br_selection_own").value == "private"
    assert any("8 candidate releases" in c.value for c in at.caption)
    at.button(key="br_run").click().run()
    deadline = time.time() + 150
    while time.time() < deadline and not at.dataframe and not at.error:
        time.sleep(1.0)
        at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert len(table) == 8 and list(table["chosen"]).count("✔") == 1 and "ε upper bound (pld-poisson)" in table.columns
    labels = [m.label for m in at.metric]
    assert labels == ["Chosen release", "Accuracy", "ε of everything published"]
    assert float(at.metric[2].value) <= 4.0 + 1e-9
    assert float(at.metric[1].value.rstrip(" %")) > 50  # separable classes: chance is 33 %
    assert any("odd held-out rows" in m.value and "exponential mechanism" in m.value for m in at.markdown)
    run = best_release_run(at.session_state["br_job"], ResultStore(tmp_path / "results.sqlite"))
    assert run.kind == JOB_KIND and run.config["selection"] == "private"
    npz, card = chosen_release_files(run.result)  # written beside the store, offered for download
    assert npz.parent == tmp_path / "best_releases" and npz.suffix == ".npz"
    assert json.loads(card.read_text())["search"]["search_epsilon"] == pytest.approx(run.result["search_epsilon"])
    labels = [b.proto.label for b in at.get("download_button")]
    assert "The chosen release (.npz)" in labels and "Its privacy card (.card.json)" in labels


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("br_eps", "abc", "invalid: ε = 'abc' is not a number"),
        ("br_m", "16,,64", "has an empty entry"),
        ("br_T", "0", "invalid: T = 0 must be at least 1"),
        ("br_lambda", "-1", "invalid: λ = -1 must be greater than 0"),
        ("br_sel_eps", "4", "leaves nothing of the target 4"),
    ],
)
def test_a_bad_entry_is_one_error_and_launches_nothing(at, key, text, message):
    _upload(at)
    at.text_input(key=key).input(text).run()
    assert not at.exception
    assert [e.value for e in at.error] and all(message in e.value for e in at.error), [e.value for e in at.error]
    assert not [b for b in at.button if b.key == "br_run"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("16, 5000", "m = 5,000 is more than the 4,000 training records"), ("1e400", "m = 1e400 must be at most")],
)
def test_an_m_above_the_records_a_point_mixes_from_is_refused_before_any_estimate(at, text, message):
    at.text_input(key="br_m").input(text).run()  # the embedded sample: 4,000 training records
    assert not at.exception
    assert [e.value for e in at.error] and all(message in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "br_run"]


def test_a_named_dataset_offers_a_grid_for_its_size_and_the_pooled_choice(at):
    assert at.selectbox(key="br_dataset").value == "embedded"  # 4,000 records: not the papers' MNIST grid
    assert at.text_input(key="br_m").value == "16, 64" and at.text_input(key="br_T").value == "4000, 16000"
    assert at.selectbox(key="br_selection").value == "pooled"
    assert not [t for t in at.text_input if t.key == "br_sel_eps"]  # no epsilon for a choice on released points
    assert [b for b in at.button if b.key == "br_run"]


def test_a_search_travels_to_the_worker_and_back(tmp_path):
    path = tmp_path / "pets.csv"
    path.write_bytes(pets_bytes(n=1500, label="label"))
    own = open_data_file(path, label_column="label")
    search = page_search(
        target_epsilon=4.0,
        delta=1e-5,
        mix_degrees=(16,),
        num_points=(1200, 2400),
        sigma_ratios=(1.0,),
        model="corrected-lsq",
        selection="private",
        own=own,
        feature_range=(-5.0, 10.0),
    )
    config = json.loads(json.dumps(search_config(search)))  # as the job store keeps it
    assert search_from_config(config) == search
    reporter = _Reporter()
    out = run_job(config, reporter)
    assert out["chosen_test_rows"] == "odd" and len(out["rows"]) == 2 and out["rows"] == trial_rows(out)
    assert all(tuple(row) == TRIAL_COLUMNS for row in out["rows"])
    assert reporter.seen and any("chosen" in f["phase"] for f in reporter.seen)
    json.dumps(out, allow_nan=False)  # the store keeps it as JSON: no NaN, no object it cannot write


def test_the_grid_is_never_blank_after_a_visit_to_another_page(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    app = AppTest.from_file(str(Path(PAGE).parents[1] / "app.py"), default_timeout=120).run()
    app.switch_page("app_pages/best_release.py").run()
    app.text_input(key="br_T").input("1000").run()
    app.switch_page("app_pages/dp_foundations.py").run()
    app.switch_page("app_pages/best_release.py").run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    # Streamlit drops a widget's state on a page that does not draw it: the grid comes back as the data's default,
    # never as a blank box that would read as "invalid: T is empty"
    assert app.text_input(key="br_m").value == "16, 64" and app.text_input(key="br_T").value == "4000, 16000"


def test_a_chosen_releases_card_says_it_was_chosen_wherever_it_is_opened(tmp_path, capsys):
    from dpmix_core.cli.main import main
    from dpmix_core.experiments.release_files import read_release
    from dpmix_core.views.release_card import release_summary

    data = tmp_path / "pets.csv"
    data.write_bytes(pets_bytes(900))
    rel = tmp_path / "best.npz"
    argv = ["best-release", "--data-file", str(data), "--label-column", "species", "--target-epsilon", "4"]
    assert main([*argv, "--m", "8,16", "--T", "700", "--lambda", "1", "--release-out", str(rel), "--json"]) == 0
    search_eps = json.loads(capsys.readouterr().out)["search_epsilon"]
    assert "chosen among 2 candidate releases" in release_summary(read_release(rel))  # Models on a release file
    at = AppTest.from_file(str(Path(PAGE).parent / "privacy_accountant.py"), default_timeout=120).run()
    at.file_uploader(key="acc_card_file").set_value([(rel.name, rel.read_bytes(), "application/octet-stream")])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    notes = [w.value for w in at.warning if "chosen among 2 candidate releases" in w.value]
    assert len(notes) == 1 and f"{search_eps:.3g}"[:3] in notes[0] and "this release's alone" in notes[0]


def test_loose_bounds_narrowed_privately_travel_with_the_search(at):
    """The toggle under the bounds puts the ranges' epsilon into the search the button launches; a ranges epsilon
    that leaves the releases nothing is one error, and nothing can be launched."""
    _upload(at)
    at.toggle(key="br_own_private_ranges").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [b for b in at.button if b.key == "br_run"]
    at.number_input(key="br_own_ranges_eps").set_value(3.7).run()
    assert any("leaves nothing of the target" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "br_run"]
    at.number_input(key="br_own_ranges_eps").set_value(0.2).run()
    assert not at.error


def test_page_search_passes_the_ranges_epsilon(tmp_path):
    own = open_data_file(_pets_file(tmp_path), label_column="label")
    common = dict(target_epsilon=4.0, delta=1e-5, mix_degrees=(8,), num_points=(500,), sigma_ratios=(1.0,))
    common |= dict(model="corrected-lsq", selection="private", own=own, feature_range=(-50.0, 100.0))
    search = page_search(**common, range_epsilon=0.2)
    assert search.range_epsilon == 0.2 and search_from_config(search_config(search)) == search
    assert "range_epsilon" not in search_config(page_search(**common))  # earlier searches keep their keys


def _pets_file(tmp_path):
    path = tmp_path / "pets.csv"
    path.write_bytes(pets_bytes(600, label="label"))
    return path
