"""synthesize --data-file --test-fraction: a release of one's own file that holds records out, and train --release
R --data-file FILE, which scores models on exactly those records."""

import json

import numpy as np
import pytest
from test_own_data_training import _pets, _train

from dpmix_core.cli.main import main
from dpmix_core.experiments.release_files import held_out_data, read_release
from dpmix_core.experiments.run_data import open_data_file

RELEASE = ["--mechanism", "class-centric", "--preprocessing", "unit", "--l", "4", "--T", "600", "--sigma-x", "0.3",
           "--sigma-y", "0.3", "--feature-range=-5,10"]  # fmt: skip


def _synthesize(capsys, data, out, *extra):
    code = main(["synthesize", "--data-file", str(data), "--label-column", "species", *RELEASE, *extra,
                 "--out", str(out), "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_a_release_that_holds_records_out_mixes_only_the_others_and_its_card_names_them(capsys, tmp_path):
    data = _pets(tmp_path / "pets.csv")
    card = _synthesize(capsys, data, tmp_path / "rel.npz", "--test-fraction", "0.2")
    own = open_data_file(data, label_column="species", test_fraction=0.2)
    assert card["dataset"]["n"] == card["release"]["n"] == own.dataset.n_train == 479  # 600 records, 121 held out
    held = card["dataset"]["held_out"]
    assert held == {"file_sha256": own.options["data_sha256"], "label_column": "species", "test_fraction": 0.2,
                    "split_seed": 0, "records": 121}  # fmt: skip
    assert main(["verify", str(tmp_path / "rel.npz")]) == 0  # its epsilons follow from n = 479 and its class sizes
    capsys.readouterr()
    whole = _synthesize(capsys, data, tmp_path / "whole.npz")  # without --test-fraction: every record, as before
    assert whole["dataset"]["n"] == 600 and "held_out" not in whole["dataset"]
    eps = {name: {e["accountant"]: e["epsilon"] for e in c["epsilons"]} for name, c in (("held", card), ("all", whole))}
    assert eps["held"]["rdp-wor"] > eps["all"]["rdp-wor"]  # fewer records, less amplification by sampling


def test_train_on_the_release_scores_on_the_held_out_records_with_the_cards_epsilon(capsys, tmp_path):
    data = _pets(tmp_path / "pets.csv")
    card = _synthesize(capsys, data, tmp_path / "rel.npz", "--test-fraction", "0.2")
    out = _train(capsys, "--release", str(tmp_path / "rel.npz"), "--data-file", str(data))
    assert out["dataset"] == "file" and out["config"]["model"] == "linear"  # a table of features: the linear model
    assert out["data"]["test_records"] == 121 and out["data"]["train_records"] == 479
    assert "release file was made from the other 479" in out["data"]["note"]
    assert out["epsilon"]["rdp-wor"] == pytest.approx(
        next(e["epsilon"] for e in card["epsilons"] if e["accountant"] == "rdp-wor")
    )
    assert out["test_accuracy"] > 0.6 and not out["collapsed"]
    # the records it is scored on are those a run on the file holds out (the same split, never in the release)
    own = held_out_data(read_release(tmp_path / "rel.npz"), data)
    split = open_data_file(data, label_column="species", test_fraction=0.2).dataset
    np.testing.assert_array_equal(own.dataset.x_test, split.x_test)


@pytest.mark.parametrize(
    ("make", "argv", "message"),
    [
        (["--test-fraction", "0.2"], ["--data-file", "{other}"], "is not the file the release"),
        ([], ["--data-file", "{data}"], "held no record of its data out"),
        (["--test-fraction", "0.2"], [], "give --data-file FILE"),
        (["--test-fraction", "0.2"], ["--data-file", "{data}", "--test-fraction", "0.3"], "drop --test-fraction"),
        (["--test-fraction", "0.2"], ["--data-file", "{data}", "--label-column", "species"], "drop --label-column"),
    ],
)
def test_train_on_a_release_of_ones_own_file_is_refused_in_one_line(capsys, tmp_path, make, argv, message):
    data, other = _pets(tmp_path / "pets.csv"), _pets(tmp_path / "other.csv", seed=1)
    _synthesize(capsys, data, tmp_path / "rel.npz", *make)
    argv = [a.format(data=data, other=other) for a in argv]
    assert main(["train", "--release", str(tmp_path / "rel.npz"), *argv, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_synthesize_refuses_a_test_fraction_without_a_data_file(capsys, tmp_path):
    argv = ["synthesize", "--dataset", "embedded", "--mechanism", "dpmix", "--l", "4", "--T", "50", "--sigma-x", "1",
            "--sigma-y", "1", "--test-fraction", "0.2", "--out", str(tmp_path / "x.npz")]  # fmt: skip
    assert main(argv) == 2
    assert "own test split" in capsys.readouterr().err and not (tmp_path / "x.npz").exists()


def test_the_page_scores_a_release_of_ones_own_file_on_its_held_out_records(capsys, tmp_path, monkeypatch):
    """Train & trade-offs → Models on a release file: a release that held records out asks for its data file, then
    trains the models picked and scores them on those records; another file is one error, and launches nothing."""
    from streamlit.testing.v1 import AppTest
    from test_app_tradeoffs import PAGE, _wait_until_finished

    data, other = _pets(tmp_path / "pets.csv"), _pets(tmp_path / "other.csv", seed=1)
    _synthesize(capsys, data, tmp_path / "rel.npz", "--test-fraction", "0.2")
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.radio(key="tr_mode").set_value("Models on a release file").run()
    at.file_uploader(key="tr_release_upload").set_value([("rel.npz", (tmp_path / "rel.npz").read_bytes(), "x")]).run()
    assert not at.exception and not at.error
    assert any("held 121 records of its data file out" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "tr_launch"]
    at.file_uploader(key="tr_release_data").set_value([("other.csv", other.read_bytes(), "text/csv")]).run()
    assert any("is not the file the release" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "tr_launch"]
    at.file_uploader(key="tr_release_data").set_value([("pets.csv", data.read_bytes(), "text/csv")]).run()
    assert not at.exception and not at.error
    at.multiselect(key="tr_release_models").set_value(["linear", "thesis-cnn"]).run()
    assert any("takes images" in e.value for e in at.error)  # refused next to the controls, not in the background
    at.multiselect(key="tr_release_models").set_value(["linear", "corrected-lsq"])
    at.number_input(key="tr_release_repeats").set_value(1).run()
    assert not at.error and any("**2 runs**" in m.value for m in at.markdown)
    at.button(key="tr_launch").click().run()
    _wait_until_finished(at)
    at.run()
    results = at.dataframe[-1].value
    assert not at.exception and set(results["label"]) == {"linear", "corrected-lsq"}
    assert (results["test_accuracy_mean"] > 0.6).all() and not results["collapsed"].any()  # on the 121 held out


def test_the_apps_download_of_a_held_out_release_pairs_with_its_file(tmp_path):
    """Mixed samples' downloads (release_downloads with the upload's held-out section) name the records the page held
    out, and the file they came from gives them back (held_out_data): the same records a run on the file holds out.
    The table in its own units (.csv + .card.json) is the same release as the .npz."""
    from dpmix_core.data.choice import app_dataset
    from dpmix_core.experiments.release_files import release_downloads, upload_held_out
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    data = _pets(tmp_path / "pets.csv")
    raw = data.read_bytes()
    dataset = app_dataset(raw, "pets.csv", None, "species", 0.2)
    config = SynthesisConfig("dpmix", l=4, T=300, sigma_x=0.3, sigma_y=0.3, feature_range=(-5.0, 10.0))
    files = release_downloads(dataset, config, upload_held_out(raw, "species", 0.2, dataset.n_test))
    assert files.table_csv is not None and files.table_card is not None
    (tmp_path / "rel.npz").write_bytes(files.npz)
    (tmp_path / "table.csv").write_bytes(files.table_csv)
    (tmp_path / "table.card.json").write_bytes(files.table_card)
    release = read_release(tmp_path / "rel.npz")
    table = read_release(tmp_path / "table.csv")
    assert table.card["dataset"]["held_out"] == release.card["dataset"]["held_out"]
    np.testing.assert_allclose(table.x, release.x, atol=1e-5)
    np.testing.assert_allclose(table.y, release.y, atol=1e-5)
    assert files.table_csv.decode().startswith("species,")
    assert (
        release.card["dataset"]["n"] == dataset.n_train == 479 and release.card["dataset"]["held_out"]["records"] == 121
    )
    own = held_out_data(release, data)
    np.testing.assert_array_equal(own.dataset.x_test, dataset.x_test)
    np.testing.assert_array_equal(own.dataset.x_test, open_data_file(data, label_column="species").dataset.x_test)


def test_mixed_samples_holds_records_of_an_upload_out_of_the_release(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_app_mixed_samples import PAGE

    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    csv = _pets(tmp_path / "pets.csv").read_text().replace("species", "label", 1).encode()
    at.file_uploader(key="mix_upload").set_value([("pets.csv", csv, "text/csv")]).run()
    at.number_input(key="mix_lo").set_value(-5.0)
    at.number_input(key="mix_hi").set_value(10.0).run()
    assert not at.exception and not at.error and any("600 training records" in c.value for c in at.caption)
    at.checkbox(key="mix_hold").check().run()
    assert not at.exception and not at.error
    assert any("stratified 479 train / 121 held-out test records" in c.value for c in at.caption)
    at.text_input(key="mix_T").input("200").run()
    at.button(key="mix_prepare").click().run()
    assert not at.exception and not at.error
    assert any("It mixes 479 records of your file; the other 121 were held out" in c.value for c in at.caption)
