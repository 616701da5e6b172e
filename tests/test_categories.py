"""Text columns with public categories: the checks, the categories file, one-hot reading, their bounds, the run
identity, the CLI (train, synthesize, sweep, templates), the attack job and the pages."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_sweeps import launch_tiny_own_sweep
from streamlit.testing.v1 import AppTest

from dpmix_core.audit.membership import job_config
from dpmix_core.cli.main import main
from dpmix_core.data import (
    DatasetError,
    categories_csv,
    check_categories,
    found_categories,
    load_user_data,
    per_feature_bounds,
    read_categories,
    read_feature_bounds,
    with_category_bounds,
)
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.run_data import open_data_file
from dpmix_core.runtime.store import ResultStore
from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize

ROOT = Path(__file__).resolve().parents[1]
REGIONS = ("north", "south", "east", "west")
BLOOD = ("A", "B", "AB", "O")
CATEGORIES = (("region", REGIONS), ("blood", BLOOD))
NAMES = ("age", *(f"region={r}" for r in REGIONS), *(f"blood={b}" for b in BLOOD), "income")


def _people(n=600, seed=0) -> str:
    """age, region, blood, income, label: the class is whether the region is north or east, plus whether age > 50."""
    rng = np.random.default_rng(seed)
    region, blood = rng.choice(REGIONS, n), rng.choice(BLOOD, n)
    age = rng.uniform(20, 80, n)
    label = np.isin(region, ("north", "east")).astype(int) + (age > 50).astype(int)
    rows = [f"{a:.1f},{r},{b},{rng.uniform(1e4, 1e5):.0f},{k}" for a, r, b, k in zip(age, region, blood, label)]
    return "\n".join(["age,region,blood,income,label", *rows]) + "\n"


def _files(tmp_path, n=600):
    data = tmp_path / "people.csv"
    data.write_text(_people(n))
    cats = tmp_path / "categories.csv"
    cats.write_bytes(categories_csv(CATEGORIES))
    bounds = tmp_path / "bounds.csv"
    bounds.write_text("column,low,high\nage,0,120\nincome,0,200000\n")
    return data, cats, bounds


@pytest.mark.parametrize(
    "value, message",
    [
        ([["region", ["north"]]], "at least 2 categories"),
        ([["region", ["north", "north "]]], "listed twice"),
        ([["region", ["north", "south"]], [" region", ["a", "b"]]], "column 'region' is listed twice"),
        ([["region", ["north", ""]]], "non-empty words"),
        ([["", ["a", "b"]]], "non-empty name"),
        ("region", "pairs"),
        ([["region", "north,south"]], "list of words"),
        ([["name", [f"person {i}" for i in range(1001)]]], "1,001 different words, more than 1,000 categories"),
    ],
)
def test_bad_categories_are_one_line(value, message):
    with pytest.raises(ValueError, match=message):
        check_categories("categories", value)


def test_categories_canonicalise_and_round_trip_through_their_file():
    assert check_categories("c", {"region": ["north ", "south"]}) == (("region", ("north", "south")),)
    assert read_categories(categories_csv(CATEGORIES)) == CATEGORIES
    assert read_categories(b"Column,Category\nregion,a\n\nregion,b\n") == (("region", ("a", "b")),)
    for data, message in [
        (b"column,low\nregion,a\n", "header column,category"),
        (b"column,category\nregion,\n", "line 2: expected column,category"),
        (b"column,category\n", "no categories below the header"),
        (b"\xff\xfe", "not UTF-8"),
    ]:
        with pytest.raises(DatasetError, match=message):
            read_categories(data)


def test_a_text_column_becomes_its_one_hot_features_where_it_stood():
    text = "age,region,label\n30,north,0\n41, south ,1\n52,NA,0\n"  # "NA" is a word here, not a missing value
    ds = load_user_data(text.encode(), "p.csv", categories=(("region", ("north", "south", "NA")),))
    assert ds.feature_names == ("age", "region=north", "region=south", "region=NA")
    np.testing.assert_array_equal(ds.x_train, [[30, 1, 0, 0], [41, 0, 1, 0], [52, 0, 0, 1]])
    assert ds.categories == (("region", ("north", "south", "NA")),)


@pytest.mark.parametrize(
    "text, categories, message",
    [
        ("a,region,label\n1,north,0\n2,mars,1\n", (("region", ("north", "south")),), "row 3, column 'region': 'mars'"),
        ("a,region,label\n1,north,0\n2,,1\n", (("region", ("north", "south")),), "row 3, column 'region': missing"),
        ("a,region,label\n1,north,0\n2,south,1\n", (("label", ("0", "1")),), "is the label column"),
        ("a,region,label\n1,north,0\n2,south,1\n", (("zone", ("x", "y")),), "'zone', which it lacks"),
        ("a,region,label\n1,north,0\n2,south,1\n", (), "give its public categories"),
    ],
)
def test_a_word_outside_its_categories_or_a_wrong_column_is_one_line(text, categories, message):
    with pytest.raises(DatasetError, match=message):
        load_user_data(text.encode(), "p.csv", categories=categories)


def test_an_npz_has_no_text_columns_to_give_categories_for(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((4, 2)), y=np.array([0, 1, 0, 1]))
    with pytest.raises(DatasetError, match="an .npz holds numbers only"):
        load_user_data(path.read_bytes(), "d.npz", categories=(("a", ("x", "y")),))


def test_found_categories_lists_the_words_of_the_text_columns_only():
    found = found_categories(_people(200).encode(), "people.csv")
    assert found == (("region", tuple(sorted(REGIONS))), ("blood", tuple(sorted(BLOOD))))
    assert found_categories(b"a,label\n1,x\n2,y\n", "p.csv") == ()  # the label column is not a feature
    assert found_categories(b"a,zone,label\n1,north,0\n2,NA,1\n", "p.csv") == (("zone", ("NA", "north")),)


def test_one_hot_features_take_bounds_zero_one_whatever_the_rest_take():
    bounds = with_category_bounds((0.0, 200_000.0), feature_names=NAMES, categories=CATEGORIES)
    assert bounds[0] == (0.0, 200_000.0) and bounds[-1] == (0.0, 200_000.0)
    assert all(pair == (0.0, 1.0) for pair in bounds[1:-1])
    assert with_category_bounds(None, feature_names=NAMES, categories=CATEGORIES) is None  # [0,1] already
    assert with_category_bounds((0.0, 5.0), feature_names=("a", "b"), categories=()) == (0.0, 5.0)
    rows = [("age", 0, 120), ("income", 0, 2e5)]
    per_column = per_feature_bounds(rows, feature_names=NAMES, d=len(NAMES), categories=CATEGORIES)
    assert per_column[0] == (0.0, 120.0) and per_column[-1] == (0.0, 200_000.0) and per_column[1] == (0.0, 1.0)
    with pytest.raises(DatasetError, match="one-hot feature"):
        per_feature_bounds([*rows, ("region=north", 0, 5)], feature_names=NAMES, d=len(NAMES), categories=CATEGORIES)
    again = read_feature_bounds(  # a bounds file the page wrote (one-hot rows at (0, 1)) reads back
        b"column,low,high\nage,0,120\nregion=north,0,1\nincome,0,200000\n",
        feature_names=NAMES,
        d=len(NAMES),
        default=(0.0, 1.0),
        categories=CATEGORIES,
    )
    assert again == per_column


def test_a_release_with_categories_is_the_release_of_the_one_hot_table(tmp_path):
    """The oracle: the same table with its text columns written as 0/1 columns by hand, read as numbers with bounds
    (0, 1) on them, gives the same release, bit for bit (same seed)."""
    text = _people(300)
    words = load_user_data(text.encode(), "p.csv", categories=CATEGORIES)
    frame = pd.read_csv(pd.io.common.StringIO(text))
    for column, cats in CATEGORIES:
        at = frame.columns.get_loc(column)
        for k, c in enumerate(cats):
            frame.insert(at + 1 + k, f"{column}={c}", (frame[column] == c).astype(int))
        frame = frame.drop(columns=[column])
    numbers = load_user_data(frame.to_csv(index=False).encode(), "n.csv")
    assert numbers.feature_names == words.feature_names
    np.testing.assert_array_equal(numbers.x_train, words.x_train)
    bounds = with_category_bounds((0.0, 200_000.0), feature_names=NAMES, categories=CATEGORIES)
    config = SynthesisConfig("dpmix", l=8, T=200, sigma_x=0.3, sigma_y=0.3, feature_range=bounds, seed=3)
    a, b = synthesize(config, words), synthesize(config, numbers)
    np.testing.assert_array_equal(a.data.x, b.data.x)
    np.testing.assert_array_equal(a.data.y, b.data.y)


def test_a_runs_categories_are_part_of_its_identity_only_when_it_has_some():
    base = dict(method="non-private", dataset="file", data_file="/x/p.csv", data_sha256="0" * 64, model="linear")
    plain, coded = RunConfig(**base), RunConfig(**base, categories=[["region", ["north", "south"]]])
    assert "categories" not in plain.identity() and run_key(plain) != run_key(coded)
    again = RunConfig.from_dict(json.loads(json.dumps(coded.to_dict())))
    assert again.categories == (("region", ("north", "south")),) and run_key(again) == run_key(coded)
    with pytest.raises(ValueError, match="no data file"):
        RunConfig(method="non-private", model="linear", categories=[["region", ["a", "b"]]])


def test_train_reads_text_columns_with_categories_and_learns_from_them(tmp_path, capsys):
    data, cats, bounds = _files(tmp_path)
    args = ["train", "--data-file", str(data), "--feature-bounds", str(bounds), "--model", "linear", "--json"]
    assert main([*args, "--method", "non-private"]) == 2  # words without categories: one line
    assert f"categories-template --data-file {data.name} writes one" in capsys.readouterr().err  # what to run
    assert main([*args, "--method", "non-private", "--categories", str(cats)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["test_accuracy"] > 0.9  # the class is mostly the region: the one-hot features carry it
    assert out["config"]["categories"] == [["region", list(REGIONS)], ["blood", list(BLOOD)]]
    assert out["config"]["feature_range"][1] == [0, 1]  # region=north: (0, 1), whatever the bounds file says
    assert main(["train", "--dataset", "embedded", "--categories", str(cats), "--model", "linear"]) == 2
    assert "only with --data-file" in capsys.readouterr().err


def test_synthesize_with_categories_states_them_and_reads_back_for_its_held_out_records(tmp_path, capsys):
    data, cats, bounds = _files(tmp_path)
    args = ["synthesize", "--data-file", str(data), "--categories", str(cats), "--feature-bounds", str(bounds)]
    args += ["--mechanism", "dpmix", "--l", "4", "--T", "300", "--sigma-x", "0.3", "--test-fraction", "0.2"]
    assert main([*args, "--out", str(tmp_path / "rel.csv")]) == 0
    card = json.loads((tmp_path / "rel.card.json").read_text())
    assert card["dataset"]["categories"] == [["region", list(REGIONS)], ["blood", list(BLOOD)]]
    assert card["dataset"]["held_out"]["categories"] == card["dataset"]["categories"]
    assert any("public categories, region: north, south, east, west" in c for c in card["caveats"])
    header = (tmp_path / "rel.csv").read_text().splitlines()[0].split(",")
    assert header[:7] == ["label", "age", "region", "region=north", "region=south", "region=east", "region=west"]
    capsys.readouterr()
    train = ["train", "--release", str(tmp_path / "rel.csv"), "--data-file", str(data), "--model", "linear"]
    assert main([*train, "--json"]) == 0  # the held-out records are read with the card's categories
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["test_accuracy"] > 0.3


def test_the_templates_list_the_words_and_leave_one_hot_columns_out_of_the_bounds(tmp_path, capsys):
    data, cats, _ = _files(tmp_path)
    assert main(["categories-template", "--data-file", str(data)]) == 0
    captured = capsys.readouterr()
    assert read_categories(captured.out.encode()) == (
        ("region", tuple(sorted(REGIONS))),
        ("blood", tuple(sorted(BLOOD))),
    )
    assert "keep those known without the file" in captured.err
    out = tmp_path / "found.csv"
    assert main(["categories-template", "--data-file", str(data), "--out", str(out)]) == 0
    assert main(["categories-template", "--data-file", str(data), "--out", str(out)]) == 2  # never over a file
    assert "never replaced" in capsys.readouterr().err
    assert main(["bounds-template", "--data-file", str(data), "--categories", str(cats)]) == 0
    assert capsys.readouterr().out.splitlines() == ["column,low,high", "age,0.0,1.0", "income,0.0,1.0"]


def test_a_sweep_on_a_file_with_categories_keeps_them_in_its_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    data, cats, bounds = _files(tmp_path)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "cats"\nmechanisms = ["dpmix"]\naxis = "sigma"\nvalues = [0.5]\nrepeats = 1\n'
        '[base]\nmethod = "mixing"\nmodel = "linear"\nepochs = 1\ndevice = "cpu"\n'
        '[base.synthesis]\nmechanism = "dpmix"\nl = 4\nT = 100\nsigma_x = 0.5\n'
    )
    args = [
        "sweep",
        str(spec),
        "--poll",
        "0.2",
        "--data-file",
        str(data),
        "--categories",
        str(cats),
        "--feature-bounds",
        str(bounds),
    ]
    assert main(args) == 0, capsys.readouterr().err
    runs = ResultStore(tmp_path / "results.sqlite").list_runs()
    assert runs and all(r.config["categories"] == [["region", list(REGIONS)], ["blood", list(BLOOD)]] for r in runs)


def test_an_attack_job_on_a_file_with_categories_carries_them():
    own = {"data_file": "/x/p.csv", "data_sha256": "0" * 64, "label_column": None, "feature_range": (0, 1)}
    config = job_config(l=4, T=100, epsilons=(8.0,), members=10, epochs=1, seed=0, **own, categories=CATEGORIES)
    assert config["categories"] == [["region", list(REGIONS)], ["blood", list(BLOOD)]]
    assert "categories" not in job_config(l=4, T=100, epsilons=(8.0,), members=10, epochs=1, seed=0, **own)


def test_open_data_file_puts_the_categories_in_the_runs_options(tmp_path):
    data, _, _ = _files(tmp_path)
    own = open_data_file(data, categories=CATEGORIES)
    assert own.options["categories"] == CATEGORIES and own.dataset.categories == CATEGORIES
    plain = tmp_path / "plain.csv"
    plain.write_text("a,label\n1,0\n2,1\n3,0\n4,1\n5,0\n6,1\n7,0\n8,1\n9,0\n10,1\n")
    assert "categories" not in open_data_file(plain).options  # the runs on files without text columns keep their keys


@pytest.fixture
def mixed_samples():
    return AppTest.from_file(str(ROOT / "app_pages" / "mixed_samples.py"), default_timeout=120).run()


def test_the_page_asks_for_public_categories_before_it_reads_the_file(mixed_samples):
    at = mixed_samples
    at.file_uploader(key="mix_upload").set_value([("people.csv", _people().encode(), "text/csv")]).run()
    assert not at.exception and any("tick *These categories are public*" in w.value for w in at.warning)
    assert not any(c.value.startswith("Data: uploaded file people.csv") for c in at.caption)  # not read yet
    table = next(d.value for d in at.dataframe if "category" in d.value.columns)  # filled from the file's words
    assert list(zip(table["column"], table["category"]))[:2] == [("region", "east"), ("region", "north")]
    box = next(c for c in at.checkbox if c.key.startswith("mix_categories_public_"))
    box.check().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("people.csv" in c.value and "shape 10" in c.value for c in at.caption)
    tables = [d.value for d in at.dataframe if "row" in d.value.columns]
    assert tables and "region=north" in tables[0].columns
    bad = categories_csv((("region", ("north", "south")), ("blood", BLOOD)))  # no east, west: their records refused
    at.file_uploader(key="mix_categories_file").set_value([("c.csv", bad, "text/csv")]).run()
    assert any("is not one of its public categories (north, south)" in e.value for e in at.error)
    partial = categories_csv((("region", REGIONS),))  # blood left out: its words are not numbers
    at.file_uploader(key="mix_categories_file").set_value([("c.csv", partial, "text/csv")]).run()
    assert any("column 'blood': 'AB' is not a number" in e.value for e in at.error)


def test_train_and_tradeoffs_sweeps_a_file_with_categories(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    at = AppTest.from_file(str(ROOT / "app_pages" / "train_tradeoffs.py"), default_timeout=120).run()
    at.radio(key="tr_mode").set_value("Build your own").run()
    at.selectbox(key="tr_dataset").set_value("own file").run()
    at.file_uploader(key="tr_own_upload").set_value([("people.csv", _people().encode(), "text/csv")]).run()
    next(c for c in at.checkbox if c.key.startswith("tr_own_categories_public_")).check().run()
    at.number_input(key="tr_own_lo").set_value(0.0)
    at.number_input(key="tr_own_hi").set_value(100_000.0)
    runs = launch_tiny_own_sweep(at, tmp_path / "results.sqlite")
    assert all(r.config["categories"][0] == ["region", sorted(REGIONS)] for r in runs)
    feature_range = runs[0].config["synthesis"]["feature_range"]
    assert feature_range[0] == [0, 100_000] and feature_range[1] == [0, 1]  # age, then region=east: (0, 1)


def test_the_privacy_audit_reads_a_file_with_categories(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    at = AppTest.from_file(str(ROOT / "app_pages" / "privacy_audit.py"), default_timeout=120).run()
    at.file_uploader(key="aud_own_upload").set_value([("people.csv", _people().encode(), "text/csv")]).run()
    assert any("tick *These categories are public*" in w.value for w in at.warning)
    next(c for c in at.checkbox if c.key.startswith("aud_own_categories_public_")).check().run()
    at.number_input(key="aud_own_lo").set_value(0.0)
    at.number_input(key="aud_own_hi").set_value(100_000.0).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("people.csv" in c.value and "shape 10" in c.value for c in at.caption)


def test_an_identifier_column_is_refused_on_the_page_not_listed(mixed_samples):
    rows = ["name,age,label"] + [f"person {i},{20 + i % 50},{i % 2}" for i in range(1200)]
    at = mixed_samples
    at.file_uploader(key="mix_upload").set_value([("names.csv", "\n".join(rows).encode(), "text/csv")]).run()
    assert not at.exception and any("'name' has 1,200 different words" in e.value for e in at.error)
    assert not [d for d in at.dataframe if "category" in d.value.columns]  # no table of 1,200 rows


def test_the_preview_shows_each_text_column_as_its_word_before_its_shares():
    from dpmix_core.synthesis.previews import mixing_preview

    ds = load_user_data(_people().encode(), "p.csv", categories=CATEGORIES)
    bounds = with_category_bounds((0.0, 200_000.0), feature_names=ds.feature_names, categories=CATEGORIES)
    preview = mixing_preview(ds, SynthesisConfig("dpmix", l=8, T=100, sigma_x=0.1, feature_range=bounds))
    table = preview.classes[0].rows(ds.feature_names, ds.categories)
    assert list(table.columns[:4]) == ["row", "age", "region", "region=north"]
    assert list(table.columns[7:9]) == ["blood", "blood=A"]
    for column, cats in CATEGORIES:
        shares = table[[f"{column}={c}" for c in cats]].to_numpy()
        assert (table[column] == np.array(cats)[shares.argmax(axis=1)]).all()  # records: their own word


def test_a_pages_table_reads_as_categories_and_bounds_leave_one_hot_columns_out():
    from dpmix_core.data import bounds_csv, bounds_rows, rows_categories

    cells = [("region", "north"), (None, None), ("", float("nan")), (" region ", "south ")]  # a data editor's cells
    assert rows_categories(cells) == (("region", ("north", "south")),)
    with pytest.raises(DatasetError, match="non-empty words"):
        rows_categories([("region", "north"), ("region", None), ("region", "south")])
    bounds = with_category_bounds((0.0, 120.0), feature_names=NAMES, categories=CATEGORIES)
    rows = bounds_rows(bounds, feature_names=NAMES, d=len(NAMES), categories=CATEGORIES)
    assert [r["column"] for r in rows] == ["age", "income"]
    text = bounds_csv(bounds, feature_names=NAMES, d=len(NAMES), categories=CATEGORIES)
    assert read_feature_bounds(text, feature_names=NAMES, d=len(NAMES), categories=CATEGORIES) == bounds
