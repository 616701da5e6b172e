"""A release of a table in the table's own columns and units: the map back, the CSV, reading it back, the CLI and
the Mixed samples page's download."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main
from dpmix_core.data import load_embedded, load_user_data
from dpmix_core.data.base import Dataset
from dpmix_core.experiments.release_files import read_release, release_downloads, verify_card
from dpmix_core.synthesis.export import table_csv_bytes, with_table_layout, write_release
from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize, table_refusal
from dpmix_core.synthesis.units import RecordUnits, record_units, table_layout

BOUNDS = ((1900.0, 2030.0), (0.0, 200_000.0), (0.0, 1.0))
PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "mixed_samples.py")
CLASSES = ("cat", 'bird, "small"', "fish")  # a class name with a comma and quotes: written and read back quoted


def _people(n=600, seed=0) -> Dataset:
    """Three columns in other units (a year, an income, a ratio) and three classes named by words."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    x = np.column_stack(
        [1950 + 20 * y + rng.normal(0, 5, n), rng.uniform(2e4, 1.5e5, n), np.clip(0.2 + 0.3 * y, 0, 1)]
    ).astype(np.float32)
    return Dataset("people", x, y, None, None, 3, "test table", CLASSES, ("year", "income", "ratio"), "species")


def _csv_text(ds: Dataset) -> str:
    frame = pd.DataFrame(ds.x_train, columns=list(ds.feature_names))
    frame.insert(1, "species", [ds.label_names[k] for k in ds.y_train])
    return frame.to_csv(index=False)


def _config(**kw) -> SynthesisConfig:
    base = dict(mechanism="dpmix", l=4, T=300, sigma_x=0.2, sigma_y=0.2, feature_range=BOUNDS, seed=1)
    return SynthesisConfig(**{**base, **kw})


def test_the_map_back_is_the_inverse_of_the_scaling_and_refuses_empty_boxes():
    units = RecordUnits(np.array([1900.0, 0.0]), np.array([2030.0, 2e5]))
    x = np.array([[0.0, 1.0], [0.5, 0.25], [-0.1, 1.2]], dtype=np.float32)
    np.testing.assert_allclose(units.to_records(x), [[1900, 2e5], [1965, 5e4], [1887, 2.4e5]], rtol=1e-6)
    np.testing.assert_allclose(units.to_release(units.to_records(x)), x, atol=1e-7)
    with pytest.raises(ValueError, match="low < high"):
        RecordUnits(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="one length"):
        RecordUnits(np.zeros(2), np.ones(3))
    assert record_units(BOUNDS, 3, unit_scaled=False) is None
    identity = record_units(None, 2, unit_scaled=True)  # records in [0,1] already: released values as they are
    assert identity is not None and (identity.low == 0).all() and (identity.high == 1).all()
    one_pair = record_units((-5.0, 5.0), 3, unit_scaled=True)
    assert one_pair is not None and one_pair.dim == 3 and (one_pair.high == 5).all()


def test_the_header_names_the_label_the_features_and_one_score_per_class():
    layout = table_layout(2, ("a", "b"), "species", ("cat", "dog"), 2)
    assert layout.header == ("species", "a", "b", "species=cat", "species=dog")
    assert layout.features == (1, 2) and layout.scores == (3, 4) and layout.words == ()
    assert table_layout(2, (), "", (), 3).header == ("label", "x0", "x1", "label=0", "label=1", "label=2")
    coded = table_layout(4, ("age", "region=n", "region=s", "income"), "y", ("a", "b"), 2, (("region", ("n", "s")),))
    assert coded.header == ("y", "age", "region", "region=n", "region=s", "income", "y=a", "y=b")
    assert coded.features == (1, 3, 4, 5) and coded.words == ((2, (1, 2), ("n", "s")),)


@pytest.mark.parametrize(
    "kw, why",
    [
        (dict(), None),
        (dict(mechanism="class-centric", l=2), None),
        (dict(mechanism="local"), None),
        (dict(mechanism="poisson", feature_range=None), "poisson clips records to ||x|| <= Cx"),
        (dict(preprocessing="clip", feature_range=None), "dpmix 'clip' clips records"),
        (
            dict(mechanism="class-centric", preprocessing="zscore", zscore_constants=(0.0, 1.0), feature_range=None),
            "z-scores records",
        ),
        (dict(mechanism="label-laplace", feature_range=None), "nothing to map back"),
    ],
)
def test_only_a_unit_box_release_of_a_table_maps_back(kw, why):
    refusal = table_refusal(_config(**kw), _people())
    assert refusal is None if why is None else why in refusal
    images = table_refusal(_config(feature_range=None), load_embedded())
    assert images is not None and "images" in images


def test_local_release_without_noise_is_the_records_in_their_units_with_their_classes():
    """ℓ = 1 and σ = 0: every row of the table is a record, in its units, with its class (an exact oracle of the map)."""
    ds = _people(60)
    synthesis = synthesize(_config(mechanism="local", T=40, sigma_x=0.0, sigma_y=0.0), ds)
    table = pd.read_csv(io.BytesIO(table_csv_bytes(synthesis)))
    assert list(table.columns) == ["species", "year", "income", "ratio", *(f"species={c}" for c in CLASSES)]
    rows = table[list(ds.feature_names)].to_numpy()
    nearest = np.abs(rows[:, None, :] - ds.x_train[None, :, :]).max(axis=2).argmin(axis=1)
    np.testing.assert_allclose(rows, ds.x_train[nearest], rtol=1e-5)  # the records themselves, in their units
    assert (table["species"] == np.array(CLASSES)[ds.y_train[nearest]]).all()
    assert set(table["species"]) <= set(CLASSES) and len(set(table["species"])) > 1


def test_a_mixture_in_units_is_the_average_of_records_and_lies_in_their_hull():
    ds = _people()
    synthesis = synthesize(_config(sigma_x=0.0, sigma_y=0.0, l=8), ds)
    table = pd.read_csv(io.BytesIO(table_csv_bytes(synthesis)))
    for j, name in enumerate(ds.feature_names):
        assert ds.x_train[:, j].min() - 1e-3 <= table[name].min() and table[name].max() <= ds.x_train[:, j].max() + 1e-3
    scores = table[[f"species={c}" for c in CLASSES]].to_numpy()
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)  # an average of one-hot labels
    assert (table["species"] == np.array(CLASSES)[scores.argmax(axis=1)]).all()


def test_the_table_reads_back_as_the_same_release_and_its_card_verifies(tmp_path):
    ds = _people()
    synthesis = synthesize(_config(), ds)
    npz, npz_card = write_release(synthesis, tmp_path / "rel.npz")
    csv, csv_card = write_release(synthesis, tmp_path / "table.csv", csv_units="data")
    a, b = read_release(npz), read_release(csv)
    np.testing.assert_allclose(b.x, a.x, atol=2e-6)  # 8 digits of a year keep float32's precision in [0,1]
    np.testing.assert_allclose(b.y, a.y, atol=1e-5)
    card = json.loads(csv_card.read_text())
    assert card["released"]["csv_units"] == "data" and card["released"]["label_column"] == "species"
    assert any("table's units" in c for c in card["caveats"])
    assert not any("y0 = cat" in c for c in card["caveats"])  # the .npz's label columns, not this file's
    assert any("y0 = cat" in c for c in json.loads(npz_card.read_text())["caveats"])
    assert verify_card(card).matches
    assert "csv_units" not in json.loads(npz_card.read_text())["released"]


def test_an_edited_header_or_a_card_that_cannot_map_back_is_one_line(tmp_path):
    ds = _people()
    synthesis = synthesize(_config(), ds)
    csv, card_path = write_release(synthesis, tmp_path / "rel.csv", csv_units="data")
    text = csv.read_text()
    csv.write_text(text.replace("income", "salary", 1))
    with pytest.raises(ValueError, match="column 3 of the header is 'salary'; its card says 'income'"):
        read_release(csv)
    csv.write_text(text)
    card = json.loads(card_path.read_text())
    card["parameters"]["mechanism"] = "poisson"
    card_path.write_text(json.dumps(card))
    with pytest.raises(ValueError, match="has no map back"):
        read_release(csv)
    with pytest.raises(ValueError, match="no map back"):
        table_csv_bytes(synthesize(_config(mechanism="poisson", feature_range=None), ds))
    with pytest.raises(ValueError, match="no map back"):
        with_table_layout({}, synthesize(_config(mechanism="poisson", feature_range=None), ds))
    with pytest.raises(ValueError, match="is a FILE.csv"):
        write_release(synthesis, tmp_path / "other.npz", csv_units="data")


def test_the_released_table_is_a_table_like_the_one_uploaded():
    """Its label column is first and named as in the upload, so it loads as a table with the same classes."""
    ds = _people()
    released = load_user_data(table_csv_bytes(synthesize(_config(), ds)), "released.csv")
    assert set(released.label_names) <= set(CLASSES) and released.feature_names[:3] == ds.feature_names


def test_synthesize_writes_a_tables_csv_in_its_units_by_default(tmp_path, capsys):
    data = tmp_path / "people.csv"
    data.write_text(_csv_text(_people()))
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("column,low,high\nyear,1900,2030\nincome,0,200000\nratio,0,1\n")
    common = ["synthesize", "--data-file", str(data), "--label-column", "species", "--mechanism", "dpmix"]
    common += ["--l", "4", "--T", "200", "--sigma-x", "0.3", "--feature-bounds", str(bounds)]
    assert main([*common, "--out", str(tmp_path / "a.csv")]) == 0
    out = capsys.readouterr().out
    assert "columns: species (the class with the largest released score), then year, income, ratio" in out
    table = pd.read_csv(tmp_path / "a.csv")
    assert list(table.columns)[:4] == ["species", "year", "income", "ratio"] and table["year"].between(1700, 2300).all()
    assert main(["train", "--release", str(tmp_path / "a.csv"), "--model", "linear", "--json"]) == 2  # no test split
    assert "--test-fraction" in capsys.readouterr().err  # ... it reads the file, and asks for held-out records
    assert main(["verify", str(tmp_path / "a.csv")]) == 0
    assert main([*common, "--json", "--out", str(tmp_path / "j.csv")]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (
        printed["released"]["csv_units"] == "data"
        and printed["caveats"] == json.loads((tmp_path / "j.card.json").read_text())["caveats"]
    )
    assert main([*common, "--csv-units", "release", "--out", str(tmp_path / "b.csv")]) == 0
    assert pd.read_csv(tmp_path / "b.csv").columns[0] == "y0"
    capsys.readouterr()
    for extra, message in [
        (["--mechanism", "poisson", "--csv-units", "data", "--out", str(tmp_path / "c.csv")], "poisson clips"),
        (["--csv-units", "data", "--out", str(tmp_path / "c.npz")], "writes a FILE.csv"),
    ]:
        assert main([*common, *extra]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "c.csv").exists() and not (tmp_path / "c.npz").exists()
    named = ["synthesize", "--dataset", "embedded", "--mechanism", "dpmix", "--l", "4", "--T", "50", "--sigma-x", "1"]
    assert main([*named, "--out", str(tmp_path / "d.csv")]) == 0
    assert pd.read_csv(tmp_path / "d.csv").columns[0] == "y0"  # images: the release's space
    assert main([*named, "--csv-units", "data", "--out", str(tmp_path / "e.csv")]) == 2
    assert "images, not the columns of a table" in capsys.readouterr().err


def test_mixed_samples_offers_the_table_in_its_units_beside_the_npz():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.button(key="mix_prepare").click().run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert any(".npz" in label for label in labels) and not any("your table" in label for label in labels)
    data = _csv_text(_people()).encode()
    at.file_uploader(key="mix_upload").set_value([("people.csv", data, "text/csv")]).run()
    box = next(s for s in at.selectbox if s.label == "Label column")
    box.set_value("species").run()
    at.number_input(key="mix_lo").set_value(0.0)
    at.number_input(key="mix_hi").set_value(200_000.0).run()
    at.button(key="mix_prepare").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    labels = [b.proto.label for b in at.get("download_button")]
    assert any("your table" in label for label in labels) and any("privacy card" in label for label in labels)
    assert any("your label column" in c.value and "ε unchanged" in c.value for c in at.caption)


def test_release_downloads_of_images_have_no_table():
    files = release_downloads(load_embedded(), SynthesisConfig("dpmix", l=4, T=20, sigma_x=1.0))
    assert files.npz and files.table_csv is None and files.table_card is None


def test_the_table_and_its_card_open_on_train_and_tradeoffs(tmp_path, monkeypatch):
    """Models on a release file: the CSV in the table's units with its card is read (back into [0,1]), its epsilons
    recompute, and with the data file it was made from, models are ready to train on its held-out records."""
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    data = tmp_path / "people.csv"
    data.write_text(_csv_text(_people()))
    args = ["synthesize", "--data-file", str(data), "--label-column", "species", "--mechanism", "dpmix", "--l", "4"]
    args += ["--T", "300", "--sigma-x", "0.3", "--feature-range", "0,200000", "--test-fraction", "0.2"]
    assert main([*args, "--out", str(tmp_path / "people_release.csv")]) == 0
    csv, card = tmp_path / "people_release.csv", tmp_path / "people_release.card.json"
    assert csv.read_text().startswith("species,year,income,ratio,")
    page = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
    at = AppTest.from_file(page, default_timeout=120).run()
    at.radio(key="tr_mode").set_value("Models on a release file").run()
    files = [(csv.name, csv.read_bytes(), "text/csv"), (card.name, card.read_bytes(), "application/json")]
    at.file_uploader(key="tr_release_upload").set_value(files).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.button(key="tr_verify").click().run()
    assert any(s.value.startswith("Verified:") for s in at.success)
    at.file_uploader(key="tr_release_data").set_value([("people.csv", data.read_bytes(), "text/csv")]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("held-out test records" in c.value for c in at.caption) and [
        b for b in at.button if b.key == "tr_launch"
    ]


def test_a_text_column_comes_back_as_its_word_before_its_shares_and_reads_back(tmp_path):
    """A table with a text column read with public categories: the released table has the column again (the
    category with the largest released share) before the shares, and reads back into the release's space."""
    frame = pd.DataFrame(
        {
            "year": [1950 + i % 50 for i in range(600)],
            "region": [("north", "south, far", "east")[i % 3] for i in range(600)],
            "income": [1000 * (i % 97) for i in range(600)],
            "species": [CLASSES[(i // 3) % 3] for i in range(600)],
        }
    )
    data = tmp_path / "people.csv"
    frame.to_csv(data, index=False)  # names with commas and quotes, quoted
    cats = tmp_path / "cats.csv"
    cats.write_text('column,category\nregion,north\nregion,"south, far"\nregion,east\n')
    args = ["synthesize", "--data-file", str(data), "--label-column", "species", "--categories", str(cats)]
    args += ["--feature-range", "0,200000", "--mechanism", "local", "--T", "100", "--sigma-x", "0", "--sigma-y", "0"]
    assert main([*args, "--out", str(tmp_path / "t.csv")]) == 0
    table = pd.read_csv(tmp_path / "t.csv")
    assert list(table.columns) == [
        "species",
        "year",
        "region",
        "region=north",
        "region=south, far",
        "region=east",
        "income",
        *(f"species={c}" for c in sorted(CLASSES)),  # classes in sorted order, as the label columns take them
    ]
    shares = table[["region=north", "region=south, far", "region=east"]].to_numpy()
    assert (table["region"] == np.array(["north", "south, far", "east"])[shares.argmax(axis=1)]).all()
    assert set(table["region"]) == {"north", "south, far", "east"}  # no noise, one record a point: its own region
    card = json.loads((tmp_path / "t.card.json").read_text())
    assert any("Column 'region': the category whose released share" in c for c in card["caveats"])
    back = read_release(tmp_path / "t.csv")
    assert back.x.shape == (100, 5) and set(np.unique(back.x[:, 1:4])) <= {0.0, 1.0}
    assert main(["verify", str(tmp_path / "t.csv")]) == 0
