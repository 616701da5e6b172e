"""The Privacy audit on one's own file: re-identification as a table, the membership attack as a job on the file."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from own_files import pets_bytes
from streamlit.testing.v1 import AppTest

from dpmix_core.audit.membership import default_members, job_config, run_job
from dpmix_core.audit.reidentification import nearest_records
from dpmix_core.data import DatasetError, load_user_data
from dpmix_core.experiments.audits import attack_data_upload, membership_attack
from dpmix_core.runtime.store import ResultStore
from dpmix_core.synthesis.pipeline import SynthesisConfig

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "privacy_audit.py")


def _pets_bytes(n=300, seed=0, label="species") -> bytes:
    """A 3-class CSV of four float features in about (-3, 6), its label column among them."""
    return pets_bytes(n, seed, label)


class _Reporter:
    def progress(self, **_):
        pass


def test_reidentification_of_rows_of_numbers_is_a_table_of_each_point_and_its_nearest_records():
    ds = load_user_data(_pets_bytes(), "pets.csv", label_column="species")
    config = SynthesisConfig("local", l=1, T=100, sigma_x=1e-4, sigma_y=1e-4, feature_range=(-5.0, 10.0))
    result = nearest_records(ds, config, points=3, k=2, seed=1)
    assert not result.images and result.leaked_fraction == 1.0  # no mixing, no noise: each point is a record
    rows = result.rows(ds.feature_names, ds.label_names)
    assert len(rows) == 3 * (1 + 2) and [r["row"] for r in rows[:1]] == ["released"]
    assert set(ds.feature_names) == {"a", "b", "c", "d"} and set(ds.feature_names) <= set(rows[0])
    source = rows[1]  # the released point's nearest record: the record it is, its class, at distance ~0
    index = int(source["row"].removeprefix("record #"))
    assert source["class"] == rows[0]["class"] == ds.label_names[ds.y_train[index]]
    assert source["distance"] < 1e-3 and source["ratio"] < 0.01
    np.testing.assert_allclose(source["a"], (ds.x_train[index, 0] + 5) / 15, atol=1e-4)  # the release's space
    mixed = nearest_records(ds, SynthesisConfig("dpmix", l=32, T=100, sigma_x=0.2, sigma_y=0.2,
                                                feature_range=(-5.0, 10.0)), points=4, k=2, seed=1)  # fmt: skip
    assert mixed.leaked_fraction == 0.0


@pytest.mark.parametrize("bounds", [(-5.0, 10.0), ((-5.0, 10.0), (-6.0, 12.0), (-5.0, 10.0), (-5.0, 10.0))])
def test_an_attack_job_on_ones_own_file_reads_the_file_it_was_given(tmp_path, bounds):
    data = _pets_bytes()
    own = attack_data_upload(data, "pets.csv", "species", bounds, ResultStore(tmp_path / "results.sqlite"))
    assert Path(own["data_file"]).parent.parent == tmp_path / "data" and Path(own["data_file"]).name == "pets.csv"
    config = job_config(l=4, T=200, epsilons=(8.0,), members=100, epochs=30, seed=0, records=300, **own)
    config = json.loads(json.dumps(config))  # as the job store keeps it
    out = run_job(config, _Reporter())
    labels = [row["label"] for row in out["rows"]]
    assert labels == ["non-private", "DPMix l=4, no noise", "DPMix l=4, eps=8 (rdp-wor)"]
    assert "pets.csv" in out["dataset"] and all(0 <= row["AUC"] <= 1 for row in out["rows"])
    assert out["rows"][0]["train acc"] > 0.8  # the non-private model learned the file (features in [0,1])
    Path(own["data_file"]).write_bytes(_pets_bytes(seed=1))  # edited after the attack was set up
    with pytest.raises(DatasetError, match="has changed since"):
        run_job(config, _Reporter())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"members": 200}, "the data has 300 records"),
        ({"feature_range": (10.0, -5.0)}, "low < high"),
        ({"data_sha256": None}, "needs both its path and its SHA-256"),
        ({"epsilons": (8.0, 0.0)}, "each epsilon must be a positive finite number. Found 0.0"),
        ({"epsilons": (float("nan"),)}, "each epsilon must be a positive finite number. Found nan"),
        ({"l": 101}, "ℓ = 101 records per point is more than the 100 member records"),
    ],
)
def test_an_attack_on_a_file_is_refused_before_it_starts(changes, message):
    own = {"data_file": "/x/pets.csv", "data_sha256": "0" * 64, "label_column": "species", "feature_range": (-5, 10)}
    kw = dict(l=4, T=200, epsilons=(8.0,), members=100, epochs=3, seed=0, records=300, **own)
    with pytest.raises(ValueError, match=message):
        job_config(**{**kw, **changes})


def test_the_named_datasets_attacks_keep_their_job_fields():
    config = job_config(l=16, T=2000, epsilons=(8.0, 1.0), members=300, epochs=100, seed=0)
    assert set(config) == {"l", "T", "epsilons", "members", "epochs", "seed", "dataset"}


def _run_attack(at, *, members: int, epochs: int):
    """Launch the page's membership attack at ε = 8 and wait for its table (a background worker trains the models)."""
    at.number_input(key="aud_mia_members").set_value(members)
    at.number_input(key="aud_mia_epochs").set_value(epochs)
    at.text_input(key="aud_mia_eps").input("8").run()
    at.button(key="aud_mia_run").click().run()
    deadline = time.time() + 120
    while time.time() < deadline and not any("AUC" in str(d.value.columns) for d in at.dataframe):
        time.sleep(1.0)
        at.run()
    assert not at.exception and not at.error
    return next(d.value for d in at.dataframe if "AUC" in str(d.value.columns))


@pytest.fixture
def at(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    return AppTest.from_file(PAGE, default_timeout=120).run()


def test_the_page_audits_an_uploaded_file(at, tmp_path):
    at.file_uploader(key="aud_own_upload").set_value([("pets.csv", _pets_bytes(label="label"), "text/csv")]).run()
    assert not at.exception and not at.error
    assert any("uploaded file pets.csv (300 records" in c.value for c in at.caption)
    assert any("outside the bounds (0, 1)" in w.value for w in at.warning)  # the default bounds clip the file
    at.number_input(key="aud_own_lo").set_value(-5.0)
    at.number_input(key="aud_own_hi").set_value(10.0).run()
    assert not at.exception and not at.error
    assert not [w for w in at.warning if "bounds" in w.value]  # these hold it
    table = at.dataframe[-1].value  # re-identification: rows of numbers, not pictures
    assert {"point", "row", "class", "distance", "a", "d"} <= set(table.columns)
    assert not [b for b in at.get("download_button") if "Images (PNG)" in b.proto.label]
    attack = _run_attack(at, members=100, epochs=10)
    assert list(attack["label"]) == ["non-private", "DPMix l=16, no noise", "DPMix l=16, eps=8 (rdp-wor)"]
    assert list((tmp_path / "data").glob("*/pets.csv"))  # kept beside the store, where the worker read it


def test_the_audit_page_takes_bounds_per_column(at):
    at.file_uploader(key="aud_own_upload").set_value([("pets.csv", _pets_bytes(label="label"), "text/csv")]).run()
    at.toggle(key="aud_own_per_column").set_value(True).run()
    bounds = b"column,low,high\na,-5,10\nb,-5,10\nc,-5,10\nd,-6,12\n"
    at.file_uploader(key="aud_own_bounds_file").set_value([("bounds.csv", bounds, "text/csv")]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [w for w in at.warning if "bounds" in w.value]
    table = at.dataframe[-1].value  # re-identification on the records as these bounds scale them
    assert {"point", "row", "class", "distance", "a", "d"} <= set(table.columns)
    at.file_uploader(key="aud_own_bounds_file").set_value([("b.csv", b"column,low,high\nlabel,0,1\n", "x")]).run()
    assert not at.exception and [e.value for e in at.error] == [
        "bounds: the data file has no feature column 'label'; its feature columns are 'a', 'b', 'c', 'd'."
    ]


def test_the_members_fit_the_file_and_too_many_is_one_error_that_launches_nothing(at):
    at.file_uploader(key="aud_own_upload").set_value([("pets.csv", _pets_bytes(label="label"), "text/csv")]).run()
    assert not at.exception and not at.error
    assert at.number_input(key="aud_mia_members").value == 150  # 300 records: 150 members, 150 non-members
    at.number_input(key="aud_mia_members").set_value(200).run()
    assert any("the data has 300 records (at most 150 members)" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "aud_mia_run"]


def test_default_members_pair_with_as_many_non_members():
    assert [default_members(n) for n in (60_000, 3_600, 600, 300, 299, 120, 40)] == [300, 300, 300, 150, 100, 50, 50]


def test_the_audit_runs_on_another_dataset_on_disk(tmp_path, monkeypatch):
    """With Fashion-MNIST in DPMIX_DATA_DIR the page offers it, and both attacks run on it (the job loads it by name)."""
    import streamlit as st
    from fake_datasets import tiny_arrays, write_idx_folder

    write_idx_folder(tmp_path / "fashion-mnist", tiny_arrays(1, n_train=600, n_test=50))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    st.cache_data.clear()  # the list of datasets on disk is cached for a minute
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(PAGE, default_timeout=120).run()
        assert at.selectbox(key="aud_dataset").value == "embedded"  # no full MNIST here: the sample, as before
        at.selectbox(key="aud_dataset").set_value("fashion-mnist").run()
        assert not at.exception and not at.error
        assert any(f"local folder {tmp_path / 'fashion-mnist'}" in c.value for c in at.caption)
        assert at.number_input(key="aud_mia_members").value == 300  # 600 records: 300 members and 300 non-members
        assert [b for b in at.get("download_button") if "Images (PNG)" in b.proto.label]  # images, not a table
        assert "AUC" in _run_attack(at, members=100, epochs=5).columns
        run = membership_attack(at.session_state["aud_mia_job"], ResultStore(tmp_path / "results.sqlite"))
        assert run.config["dataset"] == "fashion-mnist" and "fashion-mnist" in run.result["dataset"]
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
