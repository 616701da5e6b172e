"""train --data-file: one's own file, split into the records a release mixes and a held-out test split."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from own_files import write_pets

from dpmix_core.cli.main import main
from dpmix_core.data import OWN_DATA, Dataset, DatasetError, bounds_fit_note, held_out_split, load_user_data
from dpmix_core.data.user import BOUNDS_FILL_WARNING
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.run_data import TRAINED_ON, held_out_note, load_run_dataset, open_data_file
from dpmix_core.training.names import METHODS
from dpmix_core.training.protocols import (
    OWN_DATA_LINEAR,
    TRAIN_EPOCHS,
    own_data_protocol_note,
    protocol_options,
    train_epochs,
)

SHA = "0" * 64


def _pets(path, n=600, seed=0):
    """A 3-class CSV whose label column ('species', class names) sits between the features: separable classes."""
    return write_pets(path, n, seed)


def _pets_in(path, unit, n=600):
    """:func:`_pets` with every feature multiplied by ``unit`` (the same data in other units)."""
    text = _pets(path, n=n).read_text().splitlines()
    rows = [",".join(v if v.isalpha() else f"{float(v) * unit:.6f}" for v in line.split(",")) for line in text[1:]]
    path.write_text("\n".join([text[0], *rows]) + "\n")
    return path


def _upload(y, x=None):
    x = np.arange(len(y) * 2, dtype=np.float32).reshape(len(y), 2) if x is None else x
    return Dataset("up", x, np.asarray(y), None, None, int(np.max(y)) + 1, "an upload")


# --------------------------------------------------------------------------- the split


def test_held_out_split_is_stratified_disjoint_and_fixed():
    y = np.repeat([0, 1, 2], [50, 30, 20])
    ds = _upload(y)
    split = held_out_split(ds, 0.2)
    assert np.bincount(split.y_test).tolist() == [10, 6, 4]  # round(0.2 x each class)
    assert np.bincount(split.y_train).tolist() == [40, 24, 16]
    rows = np.concatenate([split.x_train[:, 0], split.x_test[:, 0]]) // 2  # each record's row number
    assert sorted(rows.tolist()) == list(range(100))  # every record once: train and test are disjoint
    again = held_out_split(ds, 0.2)
    assert np.array_equal(again.x_test, split.x_test)  # the same records every time (the split's own seed)
    assert not np.array_equal(held_out_split(ds, 0.2, seed=1).x_test, split.x_test)
    assert "held-out" in split.source and split.label_names == ds.label_names


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=1, max_value=40), min_size=2, max_size=6),
    fraction=st.floats(min_value=0.01, max_value=0.99),
    seed=st.integers(min_value=0, max_value=2**31),
)
def test_held_out_split_invariants(counts, fraction, seed):
    """Any class sizes and fraction: each class sends round(fraction x size) records to the test split, train and test
    partition the records, and the same seed picks the same records; or the split is refused in one line."""
    y = np.repeat(np.arange(len(counts)), counts)
    ds = _upload(np.random.default_rng(seed).permutation(y))
    try:
        split = held_out_split(ds, fraction, seed=seed)
    except DatasetError as exc:
        assert "holds out no record" in str(exc) or "fewer than 2 classes" in str(exc)
        return
    expected = [round(fraction * c) for c in counts]
    assert np.bincount(split.y_test, minlength=len(counts)).tolist() == expected
    rows = np.concatenate([split.x_train[:, 0], split.x_test[:, 0]]) // 2
    assert sorted(rows.tolist()) == list(range(len(y)))
    assert np.array_equal(held_out_split(ds, fraction, seed=seed).x_test, split.x_test)


@pytest.mark.parametrize(
    ("y", "fraction", "message"),
    [
        ([0, 1, 0, 1], 0.0, "between 0 and 1"),
        ([0, 1, 0, 1], 1.0, "between 0 and 1"),
        ([0, 1, 0, 1], float("nan"), "between 0 and 1"),
        ([0, 1, 0, 1], 0.1, "holds out no record"),
        ([0, 1, 1, 1], 0.9, "fewer than 2 classes"),
    ],
)
def test_held_out_split_refusals(y, fraction, message):
    with pytest.raises(DatasetError, match=message):
        held_out_split(_upload(np.array(y)), fraction)


def test_a_dataset_with_a_test_split_is_not_split_again():
    ds = _upload(np.array([0, 1, 0, 1]))
    split = held_out_split(ds, 0.5)
    with pytest.raises(DatasetError, match="has a test split already"):
        held_out_split(split, 0.5)


# --------------------------------------------------------------------------- the run's identity


def test_own_data_fields_enter_the_identity_only_with_a_data_file():
    named = RunConfig("non-private", dataset="embedded", model="linear")
    assert not {"data_file", "data_sha256", "label_column", "test_fraction"} & set(named.identity())
    own = RunConfig("non-private", dataset=OWN_DATA, model="linear", data_file="/a/pets.csv", data_sha256=SHA)
    ident = own.identity()
    assert ident["data_sha256"] == SHA and ident["test_fraction"] == 0.2 and "data_file" not in ident
    moved = own.replace(data_file="/elsewhere/pets.csv")
    assert run_key(moved) == run_key(own)  # the bytes are the identity, not the path
    assert run_key(own.replace(test_fraction=0.3)) != run_key(own)
    assert run_key(own.replace(label_column="species")) != run_key(own)
    assert run_key(own.replace(data_sha256="1" * 64)) != run_key(own)
    assert RunConfig.from_dict(own.to_dict()) == own


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dataset": OWN_DATA}, "give data_file and data_sha256"),
        ({"dataset": OWN_DATA, "data_file": "p.csv"}, "needs both"),
        ({"dataset": "embedded", "data_file": "p.csv", "data_sha256": SHA}, "dataset 'file'"),
        ({"dataset": OWN_DATA, "data_file": "p.csv", "data_sha256": "abc"}, "data_sha256"),
        ({"dataset": "embedded", "label_column": "species"}, "no data file"),
        ({"dataset": OWN_DATA, "data_file": "p.csv", "data_sha256": SHA, "test_fraction": 1.0}, "between 0 and 1"),
    ],
)
def test_run_config_refuses_an_incomplete_data_file(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig("non-private", model="linear", **fields)


def test_a_file_edited_after_the_run_was_defined_is_refused(tmp_path):
    path = _pets(tmp_path / "pets.csv")
    own = open_data_file(path, label_column="species")
    config = RunConfig("non-private", model="linear", **own.options)
    assert load_run_dataset(config).n_train == own.dataset.n_train == 479  # 600 records, 121 held out
    _pets(path, seed=1)
    with pytest.raises(DatasetError, match="has changed since this run was defined"):
        load_run_dataset(config)


def test_the_held_out_note_names_what_each_method_does_with_the_rest():
    assert set(TRAINED_ON) == set(METHODS)
    split = held_out_split(_upload(np.repeat([0, 1], 10)), 0.2)
    config = RunConfig("non-private", model="linear", dataset=OWN_DATA, data_file="x/pets.csv", data_sha256=SHA)
    note = held_out_note(config, split)
    assert (note["train_records"], note["test_records"]) == (16, 4)
    assert "4 records of pets.csv held out" in note["note"] and "no privacy" in note["note"]
    assert "not private" in note["note"]


def test_feature_range_is_the_data_files_and_one_pair_serves_the_release_and_the_baselines():
    own = {"dataset": OWN_DATA, "data_file": "/a/pets.csv", "data_sha256": SHA}
    with pytest.raises(ValueError, match="no data file"):
        RunConfig("non-private", dataset="embedded", model="linear", feature_range=(0, 1))
    with pytest.raises(ValueError, match="low < high"):
        RunConfig("non-private", model="linear", feature_range=(10, -5), **own)
    baseline = RunConfig("non-private", model="linear", feature_range=[-5, 10], **own)
    assert baseline.feature_range == (-5.0, 10.0) and baseline.identity()["feature_range"] == [-5.0, 10.0]
    assert run_key(baseline) != run_key(baseline.replace(feature_range=None))
    assert RunConfig.from_dict(json.loads(json.dumps(baseline.to_dict()))) == baseline
    syn = {"mechanism": "dpmix", "l": 4, "T": 100, "sigma_x": 1.0, "sigma_y": 1.0}
    from_run = RunConfig.from_dict(
        {"method": "mixing", "model": "linear", "synthesis": syn, "feature_range": [-5, 10], **own}
    )
    from_release = RunConfig.from_dict(
        {"method": "mixing", "model": "linear", "synthesis": {**syn, "feature_range": [-5, 10]}, **own}
    )
    assert from_run.synthesis.feature_range == from_release.feature_range == (-5.0, 10.0)
    assert from_run == from_release  # the run's bounds are the release's, and the other way round
    assert "feature_range" not in from_run.identity()  # the release's synthesis holds it: earlier run keys stay
    with pytest.raises(ValueError, match="give the public bounds once"):
        RunConfig.from_dict(
            {
                "method": "mixing",
                "model": "linear",
                "synthesis": {**syn, "feature_range": [0, 1]},
                "feature_range": [-5, 10],
                **own,
            }
        )


def test_a_baseline_learns_from_the_features_a_release_of_the_file_mixes(tmp_path):
    from dpmix_core.experiments.methods import Privacy, real_records
    from dpmix_core.training.data import release_feature_map

    own = open_data_file(_pets(tmp_path / "pets.csv"), label_column="species")
    ds = own.dataset
    baseline = RunConfig("non-private", model="linear", feature_range=(-5, 10), **own.options)
    records = real_records(baseline, ds, Privacy())
    expected = np.clip((ds.x_train.astype(np.float64) + 5) / 15, 0, 1)
    assert records.x.dtype == np.float32 and records.x.min() >= 0 and records.x.max() <= 1
    np.testing.assert_allclose(records.x, expected, atol=1e-6)
    np.testing.assert_allclose(records.test_map(ds.x_test), np.clip((ds.x_test + 5) / 15, 0, 1), atol=1e-6)
    for mechanism in ("dpmix", "label-laplace"):  # a [0,1] release and label-only Laplace read the same features
        method = "mixing" if mechanism == "dpmix" else "label-laplace"
        run = RunConfig(method, model="linear", synthesis={"mechanism": mechanism, "l": 4, "T": 100, "sigma_x": 1.0,
                        "sigma_y": 1.0, "label_epsilon": 1.0}, feature_range=(-5, 10), **own.options)  # fmt: skip
        np.testing.assert_array_equal(
            release_feature_map(run.synthesis, ds.x_train)(ds.x_test), records.test_map(ds.x_test)
        )
    unbounded = real_records(baseline.replace(feature_range=None), ds, Privacy())
    np.testing.assert_array_equal(unbounded.x, ds.x_train.astype(np.float32))  # no bounds: the features as given


# --------------------------------------------------------------------------- the protocol


def test_the_linear_model_on_ones_own_file_takes_its_own_protocol():
    assert protocol_options("linear", own_data=True)["lr"] == OWN_DATA_LINEAR.lr == 1e-2
    assert protocol_options("linear")["lr"] == 1e-3  # runs on the named datasets keep theirs
    assert protocol_options("thesis-cnn", own_data=True) == protocol_options("thesis-cnn")
    assert train_epochs("linear", own_data=True) == 50 and train_epochs("linear") == TRAIN_EPOCHS
    assert train_epochs("thesis-cnn", own_data=True) == TRAIN_EPOCHS


# --------------------------------------------------------------------------- the CLI


def _train(capsys, *argv):
    code = main(["train", *argv, "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_train_on_a_csv_learns_with_the_defaults_and_says_which_records_were_held_out(capsys, tmp_path):
    path = _pets(tmp_path / "pets.csv")
    out = _train(capsys, "--data-file", str(path), "--label-column", "species", "--method", "non-private")
    assert out["config"]["model"] == "linear" and out["config"]["epochs"] == 50  # a CSV of features: linear
    assert out["dataset"] == OWN_DATA and out["data"]["test_records"] == 121 and out["data"]["train_records"] == 479
    assert out["test_accuracy"] > 0.85  # MNIST's linear protocol (Adam 1e-3, batch 128, 5 epochs) stays at 0.39
    assert not out["collapsed"]


def test_a_baseline_with_public_bounds_does_not_depend_on_the_features_units(capsys, tmp_path):
    runs = {}
    for unit, bounds in ((1, "-5,10"), (1000, "-5000,10000")):
        path = _pets_in(tmp_path / f"pets-{unit}.csv", unit)
        runs[unit] = _train(capsys, "--data-file", str(path), "--label-column", "species", "--method", "non-private",
                            "--feature-range", bounds, "--epochs", "10")  # fmt: skip
    assert runs[1]["test_accuracy"] > 0.85
    assert runs[1000]["test_accuracy"] == pytest.approx(runs[1]["test_accuracy"], abs=0.01)
    assert runs[1000]["data"]["feature_range"] == [-5000.0, 10000.0]
    assert "scaled with the public bounds (-5000, 10000)" in runs[1000]["data"]["note"]


def test_the_release_on_ones_own_file_is_accounted_on_the_records_it_mixes(capsys, tmp_path):
    path = _pets(tmp_path / "pets.csv")
    release = ["--mechanism", "dpmix", "--l", "4", "--T", "500", "--sigma-x", "1", "--sigma-y", "1"]
    out = _train(
        capsys, "--data-file", str(path), "--label-column", "species", "--feature-range", "-5,10", *release,
        "--epochs", "1",
    )  # fmt: skip
    assert out["data"]["train_records"] == 479
    # the epsilon command on n = 479 records (not the file's 600), 4 features, 3 classes
    acc = ["--accountant", "rdp-wor", "--l", "4", "--T", "500", "--sigma-x", "1", "--sigma-y", "1", "--dx", "4"]
    assert main(["epsilon", *acc, "--dy", "3", "--delta", "1e-5", "--n", "479", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["epsilon"]
    assert main(["epsilon", *acc, "--dy", "3", "--delta", "1e-5", "--n", "600", "--json"]) == 0
    whole_file = json.loads(capsys.readouterr().out)["epsilon"]
    assert out["epsilon"]["rdp-wor"] == pytest.approx(expected, rel=1e-9) and expected != pytest.approx(whole_file)


def test_train_on_an_image_npz_defaults_to_the_thesis_cnn(capsys, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(60, 28, 28), dtype=np.uint8)
    np.savez(tmp_path / "digits.npz", x=x, y=np.repeat(["one", "two"], 30))
    out = _train(capsys, "--data-file", str(tmp_path / "digits.npz"), "--method", "non-private", "--epochs", "1")
    assert out["config"]["model"] == "thesis-cnn" and out["data"]["test_records"] == 12


def test_text_output_prints_the_held_out_note(capsys, tmp_path):
    path = _pets(tmp_path / "pets.csv", n=100)
    assert main(["train", "--data-file", str(path), "--label-column", "species", "--method", "non-private"]) == 0
    out = capsys.readouterr().out
    assert "note: accuracy on 20 records of pets.csv held out before anything was trained or released" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "thesis-cnn", "--method", "non-private"], "takes images"),
        (["--mechanism", "dpmix", "--sigma-x", "1", "--l", "4", "--T", "10"], "--feature-range LO,HI"),
        (["--method", "non-private", "--test-fraction", "0.001"], "holds out no record"),
        (["--method", "dp-pca", "--target-epsilon", "4"], "give --pca-components 4 or fewer"),
        (
            ["--mechanism", "poisson", "--features", "scattering", "--l", "4", "--T", "10", "--sigma-x", "1"],
            "ScatterNet features are computed from images",
        ),
    ],
)
def test_refused_before_the_first_progress_line(capsys, tmp_path, extra, message):
    path = _pets(tmp_path / "pets.csv", n=100)
    code = main(["train", "--data-file", str(path), "--label-column", "species", *extra])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and message in err and not out


def test_the_loader_and_the_split_agree_with_the_upload_page(tmp_path):
    """The file a run reads is the one Mixed samples reads: the same classes and feature names."""
    path = _pets(tmp_path / "pets.csv", n=50)
    upload = load_user_data(path.read_bytes(), filename=str(path), label_column="species")
    split = open_data_file(path, label_column="species").dataset
    assert split.label_names == upload.label_names == ("bird", "cat", "dog")
    assert split.feature_names == upload.feature_names == ("a", "b", "c", "d")
    assert split.n_train + len(split.y_test) == upload.n_train


def test_an_upload_is_kept_once_under_its_hash_and_its_own_name(tmp_path):
    from dpmix_core.experiments.run_data import save_data_upload

    data = _pets(tmp_path / "src.csv", n=30).read_bytes()
    first = save_data_upload(data, "my pets (2024).csv", tmp_path / "kept")
    assert first.name == "my_pets_2024_.csv" and first.read_bytes() == data
    stamp = first.stat().st_mtime_ns
    assert save_data_upload(data, "my pets (2024).csv", tmp_path / "kept") == first
    assert first.stat().st_mtime_ns == stamp  # the same bytes are not written again
    other = save_data_upload(data + b"1,2,cat,3,4\n", "my pets (2024).csv", tmp_path / "kept")
    assert other.parent != first.parent and first.read_bytes() == data  # other bytes: another folder, nothing replaced
    assert open_data_file(first, label_column="species").dataset.name == "my_pets_2024_"
    with pytest.raises(DatasetError, match="unsupported file type"):
        save_data_upload(data, "pets.xlsx", tmp_path / "kept")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match="cannot keep the upload"):
        save_data_upload(data, "pets.csv", tmp_path / "a-file")


def test_dp_pca_on_a_few_features_takes_its_dimensions_from_the_cli(capsys, tmp_path):
    path = _pets(tmp_path / "pets.csv", n=100)
    out = _train(
        capsys, "--data-file", str(path), "--label-column", "species", "--method", "dp-pca", "--target-epsilon", "4",
        "--pca-components", "3", "--epochs", "1",
    )  # fmt: skip
    assert out["config"]["pca_components"] == 3 and "DP-PCA projection's epsilon" in out["data"]["note"]


def test_a_relative_path_is_kept_absolute_for_workers_elsewhere(tmp_path, monkeypatch):
    _pets(tmp_path / "pets.csv", n=30)
    monkeypatch.chdir(tmp_path)
    own = open_data_file("pets.csv", label_column="species")
    assert own.options["data_file"] == str(tmp_path / "pets.csv")


def _spec(path, l=4):
    spec = {
        "name": "pets-eps",
        "axis": "target_epsilon",
        "values": [2, 8],
        "repeats": 1,
        "base": {
            "method": "mixing",
            "model": "linear",
            "epochs": 2,
            "synthesis": {"mechanism": "class-centric", "l": l, "T": 300, "accountant": "rdp-wor", "target_epsilon": 4},
        },
        "series": [{"name": "class-centric"}, {"name": "non-private", "method": "non-private", "synthesis": None}],
    }
    path.write_text(json.dumps(spec))
    return path


def test_sweep_on_ones_own_file_is_a_sweep_of_its_own_on_the_records_it_may_release(capsys, tmp_path, monkeypatch):
    from dpmix_core.runtime.store import ResultStore

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    data = _pets(tmp_path / "pets.csv")
    args = ["sweep", str(_spec(tmp_path / "spec.json")), "--data-file", str(data), "--label-column", "species"]
    assert main([*args, "--feature-range", "-5,10", "--max-parallel", "1", "--threads", "1"]) == 0
    err = capsys.readouterr().err  # the spec's linear protocol (Adam 1e-3, batch 128, 2 epochs) is kept, and said
    assert "note: the linear model trains on your file with the spec's protocol (" in err and "epochs 2" in err
    store = ResultStore(tmp_path / "results.sqlite")
    sha = open_data_file(data, label_column="species").options["data_sha256"]
    (sweep,) = store.list_sweeps()
    assert sweep.name == f"pets-eps@pets-{sha[:8]}"
    runs = store.list_runs()
    assert len(runs) == 3 and {r.status for r in runs} == {"done"}
    for run in runs:
        assert (run.config["dataset"], run.config["data_sha256"], run.config["test_fraction"]) == (OWN_DATA, sha, 0.2)
        if run.config["method"] == "mixing":
            assert run.config["synthesis"]["feature_range"] == [-5.0, 10.0]
            assert run.result["privacy_card"]["dataset"]["n"] == 479  # the 121 held-out records are not in it


def test_a_saved_spec_that_names_a_file_says_when_its_linear_protocol_is_not_trains(capsys, tmp_path, monkeypatch):
    """--save-spec with --data-file writes the file into the spec: run later without --data-file, its linear runs'
    protocol (2 epochs here) is still said to differ from train's own-data one (the note was for --data-file only)."""
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    data = _pets(tmp_path / "pets.csv", n=60)
    saved = tmp_path / "mine.json"
    args = [str(_spec(tmp_path / "spec.json")), "--data-file", str(data), "--label-column", "species"]
    assert main(["sweep", *args, "--feature-range", "-5,10", "--save-spec", str(saved)]) == 0
    capsys.readouterr()
    assert main(["sweep", str(saved), "--values", "8", "--series", "non-private", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "note: the linear model trains on your file with the spec's protocol (" in err and "epochs 2" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (  # and what to run instead: a sweep's runs keep their model
            ["preset:thesis-4.1-quick", "--data-file", "{data}", "--label-column", "species"],
            "takes images (n, H, W); pets has 4 features a record, and a spec's runs keep their model and its "
            "protocol. On a table: the Train & trade-offs page's custom sweep",
        ),
        (  # ScatterNet features of a table: one line, not an IndexError from the feature shape
            [
                "preset:dpfmix-table3-quick",
                "--data-file",
                "{data}",
                "--label-column",
                "species",
                "--feature-range",
                "-5,10",
            ],
            "ScatterNet features are computed from images",
        ),
        (["{spec}", "--test-fraction", "0.3"], "only with --data-file"),
        (["{spec}", "--data-file", "{data}", "--label-column", "species"], "--feature-range LO,HI"),
        (["{big}", "--data-file", "{data}", "--label-column", "species", "--feature-range", "-5,10"], "class 'bird'"),
    ],
)
def test_sweep_on_ones_own_file_is_refused_before_any_run(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    paths = {
        "data": str(_pets(tmp_path / "pets.csv")),
        "spec": str(_spec(tmp_path / "spec.json")),
        "big": str(_spec(tmp_path / "big.json", l=300)),
    }
    code = main(["sweep", *(a.format(**paths) for a in argv)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_release_of_ones_own_file_points_to_training_on_the_file(capsys, tmp_path):
    """A release of an upload has no public test split (every record may be in it): train --release says where
    to score models instead."""
    data = _pets(tmp_path / "pets.csv", n=100)
    out = tmp_path / "rel.npz"
    args = ["synthesize", "--data-file", str(data), "--label-column", "species", "--feature-range", "-5,10"]
    assert main([*args, "--mechanism", "dpmix", "--l", "4", "--T", "50", "--sigma-x", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["train", "--release", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train on the data file itself (train --data-file" in err
    assert "synthesize --data-file FILE --test-fraction F, give --data-file FILE" in err  # or release with a hold-out


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model": "thesis-cnn"}, "takes images"),
        ({"axis": "l", "values": (2.0, 300.0)}, "class 'bird' has"),
        ({"feature_range": None}, "--feature-range LO,HI"),
    ],
)
def test_the_pages_custom_sweep_checks_every_run_on_the_file(tmp_path, changes, message):
    """One check (run_data.check_run_on) for train, sweep and the page: an own-file sweep that cannot run is refused
    next to the controls, not run by run in the background."""
    from dpmix_core.experiments.trade_offs import custom_spec

    own = open_data_file(_pets(tmp_path / "pets.csv"), label_column="species")
    kw = dict(
        mechanisms=("class-centric",), axis="sigma", values=(0.5, 1.0), repeats=3, model="linear", loss="ce",
        epochs=2, l=4, T=300, sigma=0.7, accountant="auto", delta=1e-5, dataset="embedded",
        baselines=("non-private",), own=own, feature_range=(-5.0, 10.0),
    )  # fmt: skip
    assert len(custom_spec(**kw).series) == 2  # the controls as they are: accepted
    with pytest.raises(ValueError, match=message):
        custom_spec(**{**kw, **changes})


# --------------------------------------------------------------------------- the inputs a model on one's own file sees


def test_standardize_constants_centre_and_scale_each_feature():
    from dpmix_core.training.data import standardize_constants, standardizer

    x = np.array([[0.2, 5.0, 1.0], [0.4, 7.0, 1.0], [0.6, 9.0, 1.0]], dtype=np.float32)
    mean, inv_std = standardize_constants(x)
    z = (x - mean) * inv_std
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-6)
    np.testing.assert_allclose(z.std(axis=0), [1, 1, 0], atol=1e-6)  # a constant feature is left at 0, not NaN
    assert inv_std[2] == 1 and mean.dtype == inv_std.dtype == np.float32
    empty_mean, empty_inv = standardize_constants(x[:0])
    assert empty_mean.shape == (3,) and np.all(empty_inv == 1)
    np.testing.assert_allclose(standardizer(x)(x[:1] + 0.2), (x[:1] + 0.2 - mean) * inv_std)  # one map for all inputs


def test_standardised_inputs_are_the_own_data_default_but_never_for_dp_sgd_or_corrected_lsq(tmp_path):
    from dpmix_core.experiments.trade_offs import custom_spec

    assert protocol_options("linear", own_data=True)["input_norm"] == OWN_DATA_LINEAR.input_norm == "standardize"
    dpsgd = protocol_options("linear", method="dp-sgd", own_data=True)  # the own-data steps, private ranges
    assert dpsgd == {**OWN_DATA_LINEAR.options(), "input_norm": "private-ranges"}
    assert protocol_options("linear", method="dp-sgd") == {}  # the papers' datasets: the RunConfig defaults
    assert protocol_options("linear")["input_norm"] == "none"  # the papers' datasets keep their protocols
    own = {"dataset": OWN_DATA, "data_file": "/a/pets.csv", "data_sha256": SHA}
    with pytest.raises(ValueError, match="DP-SGD trains on private data"):
        RunConfig("dp-sgd", model="linear", input_norm="standardize", **own)
    assert RunConfig("dp-sgd", model="linear", input_norm="dp-ranges", **own).input_norm == "dp-ranges"
    with pytest.raises(ValueError, match="images are in \\[0,1\\] already"):
        RunConfig("dp-sgd", model="linear", input_norm="dp-ranges")  # MNIST: nothing to narrow
    with pytest.raises(ValueError, match="releases private feature ranges for DP-SGD"):
        RunConfig("non-private", model="linear", input_norm="dp-ranges", **own)
    with pytest.raises(ValueError, match="at one scale"):
        RunConfig("non-private", model="corrected-lsq", input_norm="standardize", **own)
    spec = custom_spec(
        mechanisms=("dpmix",), axis="target_epsilon", values=(2.0, 8.0), repeats=1, model="linear", loss="ce",
        epochs=2, l=4, T=300, sigma=0.7, accountant="auto", delta=1e-5, dataset="embedded",
        baselines=("non-private", "dp-sgd"), own=open_data_file(_pets(tmp_path / "pets.csv"), label_column="species"),
        feature_range=(-5.0, 10.0),
    )  # fmt: skip
    norms = {run.method: run.input_norm for run in spec.runs()}  # the page's own-file sweep
    assert norms == {"mixing": "standardize", "non-private": "standardize", "dp-sgd": "private-ranges"}
    assert {run.feature_range for run in spec.runs()} == {(-5.0, 10.0)}  # every method scales by the same bounds


def test_a_baseline_learns_whatever_public_bounds_the_user_gives(capsys, tmp_path):
    """Loose bounds crowd the features into a sliver of [0,1]: trained on them as they are, the linear model stayed
    at the constant predictor (37.2 % at bounds (-50, 100)); standardised on the training inputs it does not."""
    path = _pets(tmp_path / "pets.csv")
    out = _train(capsys, "--data-file", str(path), "--label-column", "species", "--method", "non-private",
                 "--feature-range", "-500,1000", "--epochs", "10")  # fmt: skip
    assert out["config"]["input_norm"] == "standardize" and not out["collapsed"]
    assert out["test_accuracy"] > 0.85
    assert any("inputs standardised" in note for note in out["notes"])


def test_dp_sgd_on_ones_own_file_takes_the_own_data_steps_and_learns(capsys, tmp_path):
    """At the RunConfig defaults (Adam 1e-3, batch 128) a few hundred records gave DP-SGD a few dozen noisy steps:
    44.6 % at eps 8 on the 3-class CSV; with the own-data linear protocol's lr 1e-2 and batch 32, 90.1 %."""
    path = _pets(tmp_path / "pets.csv")
    out = _train(capsys, "--data-file", str(path), "--label-column", "species", "--method", "dp-sgd",
                 "--target-epsilon", "8")  # fmt: skip
    config = out["config"]
    assert (config["lr"], config["batch_size"], config["input_norm"]) == (OWN_DATA_LINEAR.lr, 32, "private-ranges")
    assert out["test_accuracy"] > 0.8 and not out["collapsed"]


def test_dp_sgd_learns_on_loose_bounds_by_its_private_ranges_and_accounts_for_them(capsys, tmp_path):
    """Scaled by bounds (-50, 100) the features fill 5 % of [0,1]: DP-SGD on them as they are stayed at the
    constant predictor (33.1 % at eps 8, seed 0); rescaled by its privately released ranges it reached 86.8 %. Its
    epsilon is the ranges' and the steps' together, never above the target."""
    path = _pets(tmp_path / "pets.csv")
    args = ["--data-file", str(path), "--label-column", "species", "--method", "dp-sgd", "--target-epsilon", "8",
            "--feature-range", "-50,100"]  # fmt: skip
    out = _train(capsys, *args)
    assert out["config"]["input_norm"] == "private-ranges" and not out["collapsed"] and out["test_accuracy"] > 0.8
    assert set(out["epsilon"]) == {"pld-dp-accounting", "rdp-dp-accounting", "opacus-rdp", "opacus-prv"}
    assert out["epsilon"]["pld-dp-accounting"] <= 8
    assert out["guarantee"]["pld-dp-accounting"].endswith("a rigorous upper bound")  # the JSON says it too
    assert "numerical error" in out["guarantee"]["opacus-prv"]
    assert any("released privately" in note for note in out["notes"])
    raw = _train(capsys, *args, "--input-norm", "none", "--epochs", "5")  # the ranges turned off: as scaled
    assert raw["config"]["input_norm"] == "none" and "pld-poisson" in raw["epsilon"]
    assert main(["train", *args, "--input-norm", "standardize", "--device", "cpu"]) == 2  # reads the records
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DP-SGD trains on private data" in err
    from dpmix_core.experiments.runner import run_config

    own = open_data_file(path, label_column="species")
    steps = {**protocol_options("linear", method="dp-sgd", own_data=True), "epochs": 2}
    config = RunConfig(
        "dp-sgd", model="linear", dpsgd_epsilon=8.0, feature_range=(-50.0, 100.0), **own.options, **steps
    )
    result = run_config(config)  # the run's record keeps the released ranges and how z was calibrated
    ranges = result["dpsgd_ranges"]
    assert np.all(np.array(ranges["high"]) - np.array(ranges["low"]) < 0.5)  # narrowed from [0,1]
    assert result["dpsgd"]["calibrated_with"] == "pld-dp-accounting"
    unbounded = run_config(replace(config, feature_range=None))  # raw features: no public bounds to narrow
    assert "dpsgd_ranges" not in unbounded and "pld-poisson" in unbounded["epsilon"]


def test_the_text_output_says_how_to_read_each_baseline_epsilon(capsys, tmp_path):
    """DP-SGD's and DP-PCA's epsilons carry no privacy card: each printed line says which accountant and whether it
    is a rigorous bound (the run without privacy prints none)."""
    path = _pets(tmp_path / "pets.csv")
    common = ["train", "--data-file", str(path), "--label-column", "species", "--feature-range", "-50,100",
              "--epochs", "2", "--device", "cpu"]  # fmt: skip
    lines = {}
    for method in (
        ["dp-sgd", "--target-epsilon", "8"],
        ["dp-pca", "--target-epsilon", "8", "--pca-components", "2"],
        ["non-private"],
    ):
        assert main([*common, "--method", *method]) == 0
        lines[method[0]] = [line for line in capsys.readouterr().out.splitlines() if " eps=" in line]
    dpsgd = {line.split()[0]: line for line in lines["dp-sgd"]}
    assert set(dpsgd) == {"pld-dp-accounting", "rdp-dp-accounting", "opacus-rdp", "opacus-prv"}
    assert dpsgd["pld-dp-accounting"].endswith("composed, under dp_accounting's PLD accountant (pessimistic "
                                               "rounding): a rigorous upper bound]")  # fmt: skip
    assert "up to its numerical error]" in dpsgd["opacus-prv"]
    assert lines["dp-pca"][0].split()[0] == "analytic-gaussian" and "a rigorous (ε, δ) bound" in lines["dp-pca"][0]
    assert lines["non-private"] == ["  none         eps=inf"]


# --------------------------------------------------------------------------- how well the public bounds fit


def test_the_bounds_note_speaks_for_clipped_values_and_loose_bounds_and_only_then():
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 6, size=(400, 4)).astype(np.float32)  # each feature fills (-3, 6)
    assert bounds_fit_note(x, (-5.0, 10.0)) is None  # 60 % of the width, nothing outside
    loose = bounds_fit_note(x, (-50.0, 100.0))
    assert loose is not None and "fill a median 6.0% of the bounds' width (-50, 100)" in loose
    assert "outside" not in loose and "never released" in loose
    tight = bounds_fit_note(x, (0.0, 1.0))
    assert tight is not None and "outside the bounds (0, 1)" in tight and "fill a median" not in tight
    share = np.mean((x < 0) | (x > 1))
    assert f"({share:.1%})" in tight
    assert bounds_fit_note(x[:0], (-50.0, 100.0)) is None  # no records, nothing to say
    assert bounds_fit_note(x, (1.0, 1.0)) is None  # bounds the caller refuses on its own


@settings(max_examples=40, deadline=None)
@given(
    width=st.floats(min_value=0.1, max_value=20),
    slack=st.floats(min_value=0.0, max_value=50),
    unit=st.floats(min_value=1e-3, max_value=1e3),
    shift=st.floats(min_value=-1e3, max_value=1e3),
)
def test_the_bounds_note_depends_on_how_the_bounds_fit_not_on_the_units(width, slack, unit, shift):
    """The same data and bounds in other units (x a + b) get the same note; the note on loose bounds appears exactly
    when the features fill less than BOUNDS_FILL_WARNING of the bounds' width."""
    x = np.linspace(0.0, width, 50, dtype=np.float64)[:, None].repeat(3, axis=1)
    bounds = (-slack, width + slack)
    note = bounds_fit_note(x, bounds)
    fill = width / (width + 2 * slack)
    if abs(fill - BOUNDS_FILL_WARNING) > 1e-6:
        assert (note is not None) == (fill < BOUNDS_FILL_WARNING)
    moved = bounds_fit_note(x * unit + shift, (bounds[0] * unit + shift, bounds[1] * unit + shift))
    if note is not None and abs(fill - BOUNDS_FILL_WARNING) > 1e-3:
        assert moved is not None and f"{fill:.1%}" in moved and "outside" not in moved


def test_the_cli_says_when_the_bounds_fit_the_file_badly(capsys, tmp_path):
    path = _pets(tmp_path / "pets.csv")
    common = ["--data-file", str(path), "--label-column", "species", "--method", "non-private", "--epochs", "1"]
    errors = {}
    for bounds in ("-5,10", "-500,1000"):
        assert main(["train", *common, "--feature-range", bounds, "--device", "cpu", "--json"]) == 0
        out, errors[bounds] = capsys.readouterr()
        assert json.loads(out)["config"]["feature_range"] == [float(b) for b in bounds.split(",")]  # stdout: JSON
    assert "note: Your features" not in errors["-5,10"]  # they fill 60 % of it
    assert errors["-500,1000"].count("note: Your features fill a median") == 1
    release = ["--mechanism", "dpmix", "--l", "4", "--T", "50", "--sigma-x", "1", "--out", str(tmp_path / "r.npz")]
    synthesize = ["synthesize", "--data-file", str(path), "--label-column", "species", *release]
    assert main([*synthesize, "--feature-range", "-500,1000"]) == 0  # text: with the release's other lines
    assert capsys.readouterr().out.count("note: Your features fill a median") == 1
    assert main([*synthesize, "--feature-range", "-500,1000", "--l", "0"]) == 2  # a refusal stays one line
    assert capsys.readouterr().err.count("\n") == 1


def test_a_linear_run_on_ones_file_off_the_own_data_protocol_is_named():
    own = {"dataset": OWN_DATA, "data_file": "/a/pets.csv", "data_sha256": SHA}
    steps = {**protocol_options("linear", own_data=True), "epochs": train_epochs("linear", own_data=True)}
    followed = RunConfig("non-private", model="linear", **own, **steps).to_dict()
    dpsgd = RunConfig("dp-sgd", model="linear", **own, **{**steps, "input_norm": "private-ranges"}).to_dict()
    assert own_data_protocol_note([followed, dpsgd]) is None
    raw = RunConfig("dp-sgd", model="linear", **own, **{**steps, "input_norm": "none"}).to_dict()
    assert "input_norm none" in (own_data_protocol_note([raw]) or "")
    assert own_data_protocol_note([RunConfig("non-private", model="linear").to_dict()]) is None  # not on a file
    assert own_data_protocol_note([RunConfig("non-private", model="thesis-cnn", **own).to_dict()]) is None
    note = own_data_protocol_note([followed, RunConfig("non-private", model="linear", **own, epochs=5).to_dict()])
    assert note is not None and "lr 0.001, batch_size 128, epochs 5, input_norm none" in note
    assert "lr 0.01, batch_size 32, epochs 50, input_norm standardize" in note


def test_a_quick_preset_on_ones_own_file_ends_with_its_summary(tmp_path, monkeypatch, capsys):
    """dp-pca-quick (a linear model: it takes a table) on a 60-feature file: every run finished, then the summary
    looked for the papers' full protocol on the file and the command ended in an error (exit 2); the page showing
    the sweep hit the same. A quick preset moved onto one's file has no full protocol there: no comparison."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    rng = np.random.default_rng(0)
    y = np.arange(300) % 3
    x = np.clip(rng.normal(y[:, None] * 0.5, 1.0, size=(300, 60)), -5, 10)
    data = tmp_path / "wide.csv"
    rows = "".join(",".join(f"{v:.3f}" for v in r) + f",{k}\n" for r, k in zip(x, y, strict=True))
    data.write_text(",".join(f"f{i}" for i in range(60)) + ",species\n" + rows)
    argv = ["sweep", "preset:dp-pca-quick", "--data-file", str(data), "--label-column", "species"]
    assert main([*argv, "--feature-range", "-5,10"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "quick vs full" not in out and "report: python -m dpmix_core sweep-report" in out
    page = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
    at = AppTest.from_file(page, default_timeout=120).run()  # the sweep just run is the one shown
    assert not at.exception and any("dp-pca-quick@wide" in str(o) for o in at.selectbox(key="tr_show").options)
