"""Public bounds per feature column: the checks, the bounds file, the scaling every release and baseline uses, the
run identity, the CLI and the pages' table."""

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main
from dpmix_core.data import (
    DatasetError,
    bounds_csv,
    bounds_fit_note,
    per_feature_bounds,
    read_feature_bounds,
)
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.run_data import open_data_file
from dpmix_core.experiments.runner import run_config
from dpmix_core.mechanisms.mixing import dpmix, unit_features
from dpmix_core.mechanisms.pca import analyze_gauss_pca
from dpmix_core.privacy.checks import (
    check_feature_range,
    describe_feature_range,
    feature_range_vectors,
    json_feature_range,
)
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.synthesis.streaming import synthesize_streaming

NAMES = ("age", "income", "ratio")
BOUNDS = ((18.0, 90.0), (0.0, 200_000.0), (0.0, 1.0))


def _table(n=900, seed=0):
    """Three classes that differ in age and ratio, with an income column in other units (ages fill a sliver of
    (0, 200000), the one pair that holds every column)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    age = 30 + 15 * y + rng.normal(0, 4, n)
    income = rng.uniform(20_000, 150_000, n)
    ratio = 0.2 + 0.3 * y + rng.normal(0, 0.05, n)
    return np.column_stack([np.clip(age, 18, 90), income, np.clip(ratio, 0, 1)]).astype(np.float32), y


def _csv(path, n=900):
    x, y = _table(n)
    lines = ["age,income,ratio,label"] + [f"{a:.3f},{b:.1f},{c:.4f},{k}" for (a, b, c), k in zip(x, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _bounds_file(path, rows=BOUNDS, names=NAMES, header="column,low,high"):
    path.write_text("\n".join([header] + [f"{n},{lo:g},{hi:g}" for n, (lo, hi) in zip(names, rows, strict=True)]))
    return path


# --------------------------------------------------------------------------- the checks


def test_one_pair_or_one_pair_per_feature_and_equal_pairs_are_the_one_pair():
    assert check_feature_range("b", (0, 1)) == (0.0, 1.0)
    assert check_feature_range("b", [[0, 1], [0, 1], [0, 1]]) == (0.0, 1.0)  # the same scaling: the same run
    assert check_feature_range("b", [[0, 1], [0, 2]]) == ((0.0, 1.0), (0.0, 2.0))
    lo, hi = feature_range_vectors(BOUNDS, 3)
    assert lo.tolist() == [18, 0, 0] and hi.tolist() == [90, 200_000, 1]
    assert feature_range_vectors((0, 1), 2)[1].tolist() == [1, 1]
    assert describe_feature_range((0, 1)) == "(0, 1)"
    assert describe_feature_range(BOUNDS) == "per feature (3 features, lows 0 to 18, highs 1 to 200000)"
    assert json_feature_range((0, 1)) == [0.0, 1.0] and json_feature_range(BOUNDS) == [list(b) for b in BOUNDS]
    assert check_feature_range("b", json.loads(json.dumps(json_feature_range(BOUNDS)))) == BOUNDS


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ((1, 0), "low < high"),
        ([(0, 1), (2, 1)], "of feature 1 must satisfy low < high"),
        ([(0, 1), (0, float("inf"))], "of feature 1 must satisfy low < high, both finite"),
        ([], "one pair per feature"),
        ("0,1", "one pair per feature"),
        ([(0, 1), (0,)], "of feature 1 must be a pair"),
    ],
)
def test_bad_bounds_are_one_line(value, message):
    with pytest.raises(ValueError, match=message):
        check_feature_range("b", value)


def test_bounds_for_another_number_of_features_are_refused():
    with pytest.raises(ValueError, match="bounds for 3 features; the data has 4"):
        feature_range_vectors(BOUNDS, 4)
    with pytest.raises(ValueError, match="bounds for 3 features; the data has 2"):
        unit_features(np.zeros((5, 2), np.float32), BOUNDS)


# --------------------------------------------------------------------------- the scaling


def test_each_column_fills_the_unit_box_with_its_own_bounds_and_values_outside_are_clipped():
    x = np.array([[18, 0, 0], [54, 100_000, 0.5], [90, 200_000, 1], [10, 300_000, -1]], np.float32)
    feats, scale, note = unit_features(x, BOUNDS)
    expected = [[0, 0, 0], [0.5, 0.5, 0.5], [1, 1, 1], [0, 1, 0]]
    assert scale == 1.0 and np.allclose(feats, expected, atol=1e-6)
    assert "per feature (3 features" in note
    one_pair, _, _ = unit_features(x, (0.0, 200_000.0))
    assert one_pair[1, 0] == pytest.approx(54 / 200_000)  # the age in a sliver of the box


def test_a_release_with_bounds_per_column_is_the_release_of_the_prescaled_table():
    """The accountants assume records in [0,1]^d: bounds per column keep them there, so the release is exactly the
    one of the same table scaled beforehand and released with (0, 1), the same seed, the same guarantee."""
    x, y = _table(300)
    release = MixingRelease.dpmix(n=300, l=4, T=50, sigma_x=0.3, sigma_y=0.3, dx=3, dy=3)
    lo, hi = feature_range_vectors(BOUNDS, 3)
    prescaled = ((x - lo) / (hi - lo)).astype(np.float32)
    a = dpmix(x, y, num_classes=3, release=release, feature_range=BOUNDS, seed=5)
    b = dpmix(prescaled, y, num_classes=3, release=release, feature_range=(0.0, 1.0), seed=5)
    assert np.allclose(a.x, b.x, atol=1e-5) and np.array_equal(a.y, b.y)


def test_dp_pca_and_the_streaming_release_scale_with_the_same_bounds(tmp_path):
    x, y = _table(200)
    lo, hi = feature_range_vectors(BOUNDS, 3)
    prescaled = (x.astype(np.float64) - lo) / (hi - lo)
    a = analyze_gauss_pca(x, num_components=2, epsilon=0.5, delta=1e-5, feature_range=BOUNDS, seed=1)
    b = analyze_gauss_pca(prescaled, num_components=2, epsilon=0.5, delta=1e-5, seed=1)
    assert np.allclose(a.noisy_second_moment, b.noisy_second_moment, atol=1e-6)
    assert any("per feature (3 features" in n for n in a.notes)
    kw = dict(num_classes=3, mechanism="dpmix", l=1, T=300, sigma_x=0.0, sigma_y=0.0, seed=0)
    out = synthesize_streaming(x, y, out_path=tmp_path / "s", feature_range=BOUNDS, **kw)
    released = np.load(out.x_path)
    assert released.min() >= 0 and released.max() <= 1 and released[:, 0].max() > 0.5  # ages across the box
    assert out.card["parameters"]["feature_range"] == [list(b) for b in BOUNDS]
    with pytest.raises(ValueError, match="bounds for 3 features; the data has 2"):
        synthesize_streaming(x[:, :2], y, out_path=tmp_path / "t", feature_range=BOUNDS, **kw)
    assert not (tmp_path / "t").exists()


# --------------------------------------------------------------------------- the bounds file


def test_a_bounds_file_names_columns_and_leaves_the_rest_to_the_default(tmp_path):
    path = _bounds_file(tmp_path / "b.csv")
    assert read_feature_bounds(path, feature_names=NAMES, d=3) == BOUNDS
    some = _bounds_file(tmp_path / "some.csv", rows=BOUNDS[:1], names=NAMES[:1])
    assert read_feature_bounds(some, feature_names=NAMES, d=3, default=(0, 1)) == ((18, 90), (0, 1), (0, 1))
    # a page's download (and bounds-template) reads back as the same bounds, exactly; so does a spreadsheet's
    # UTF-8 with a byte-order mark
    odd = ((0.1, 0.30000000000000004), (-60000.5, 1e9), (0.4 - 1e-16, 1.6))
    data = bounds_csv(odd, feature_names=("a, b", "income", "ratio"), d=3)
    assert data.splitlines()[1] == b'"a, b",0.1,0.30000000000000004'
    assert read_feature_bounds(data, feature_names=("a, b", "income", "ratio"), d=3) == odd
    bom = b"\xef\xbb\xbf" + bounds_csv(BOUNDS, feature_names=NAMES, d=3)
    assert read_feature_bounds(bom, feature_names=NAMES, d=3) == BOUNDS
    # a file without column names (.npz, a memmap): indices
    assert read_feature_bounds(b"column,low,high\n1,0,5\n", feature_names=(), d=2, default=(0, 1)) == ((0, 1), (0, 5))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("column,low,high\nage,18,90\n", r"no bounds for 'income', 'ratio'; list every feature column, or give"),
        ("column,low,high\nwage,0,1\n", r"no feature column 'wage'; its feature columns are 'age', 'income', 'ratio'"),
        ("column,low,high\nlabel,0,2\n", "'label' is the label column, not a feature"),
        ("column,low,high\nage,18,90\nage,0,1\n", "'age' is listed twice"),
        ("column,low,high\nage,young,90\n", "low and high must be numbers"),
        ("column,low,high\nage,90,18\n", "low < high"),
        ("name,min,max\nage,18,90\n", "the first line must be the header column,low,high"),
        ("column,low,high\nage,18\n", "line 2: expected column,low,high"),
        ("", "the first line must be the header"),
    ],
)
def test_a_bad_bounds_file_is_one_line(text, message):
    with pytest.raises(DatasetError, match=message):
        read_feature_bounds(text.encode(), feature_names=NAMES, d=3, label_column="label")


def test_per_feature_bounds_from_a_table_refuse_an_empty_cell():
    with pytest.raises(DatasetError, match="bounds of 'age' must satisfy low < high, both finite"):
        per_feature_bounds([("age", float("nan"), 90)], feature_names=NAMES, d=3, default=(0, 1))


def test_the_bounds_note_names_the_column_that_fits_worst():
    x, _ = _table(400)
    loose = bounds_fit_note(x, (0.0, 200_000.0), NAMES)
    assert loose is not None and "of the bounds' width (0, 200000)" in loose
    assert "your columns span very different widths ('income' fills" in loose and "--feature-bounds" in loose
    same_units = bounds_fit_note(x[:, [0]], (0.0, 2000.0), NAMES[:1])
    assert same_units is not None and "of the bounds' width" in same_units and "different widths" not in same_units
    assert bounds_fit_note(x, BOUNDS, NAMES) is None  # every column fills its own bounds
    tight = bounds_fit_note(x, ((18, 40), (0, 200_000), (0, 1)), NAMES)
    assert tight is not None and "outside their bounds" in tight and "('age' most:" in tight
    assert bounds_fit_note(x, BOUNDS[:2], NAMES) is None  # bounds for other data: refused where they are used


# --------------------------------------------------------------------------- runs and their identity


def test_a_run_keeps_its_bounds_per_column_in_its_identity(tmp_path):
    own = open_data_file(_csv(tmp_path / "t.csv"), label_column="label")
    syn = SynthesisConfig("dpmix", l=8, T=200, sigma_x=0.5)
    pair = RunConfig("mixing", model="linear", synthesis=syn, feature_range=(0, 1), **own.options)
    same = RunConfig("mixing", model="linear", synthesis=syn, feature_range=[[0, 1]] * 3, **own.options)
    per = RunConfig("mixing", model="linear", synthesis=syn, feature_range=BOUNDS, **own.options)
    assert run_key(same) == run_key(pair) != run_key(per)
    assert per.synthesis.feature_range == BOUNDS  # the release holds the run's bounds
    assert run_key(RunConfig.from_dict(json.loads(json.dumps(per.to_dict())))) == run_key(per)
    other = SynthesisConfig("dpmix", l=8, T=200, sigma_x=0.5, feature_range=(0, 1))
    with pytest.raises(ValueError, match=r"differs from the data file's feature_range per feature \(3 features"):
        RunConfig("mixing", model="linear", synthesis=other, feature_range=BOUNDS, **own.options)


def test_bounds_per_column_let_a_release_learn_where_one_pair_leaves_it_near_chance(tmp_path):
    """The age and ratio columns carry the classes; with the one pair that holds the incomes they fill 0.0002 of
    the box, and the noise drowns them."""
    own = open_data_file(_csv(tmp_path / "t.csv", n=3000), label_column="label")
    accuracy = {}
    for name, bounds in (("pair", (0.0, 200_000.0)), ("columns", BOUNDS)):
        syn = SynthesisConfig("dpmix", l=4, T=4000, sigma_x=0.1)
        cfg = RunConfig("mixing", model="linear", synthesis=syn, feature_range=bounds, epochs=10, lr=1e-2,
                        batch_size=64, **own.options)  # fmt: skip
        accuracy[name] = run_config(cfg)["test_accuracy"]
    assert accuracy["columns"] > 0.6 and accuracy["pair"] < 0.45, accuracy  # 0.73 and 0.35 (chance: 0.33)


# --------------------------------------------------------------------------- the CLI


def test_synthesize_and_train_read_a_bounds_file(capsys, tmp_path):
    data, bounds = _csv(tmp_path / "t.csv"), _bounds_file(tmp_path / "b.csv")
    out = tmp_path / "rel.csv"
    args = ["synthesize", "--data-file", str(data), "--feature-bounds", str(bounds), "--mechanism", "dpmix",
            "--l", "4", "--T", "100", "--sigma-x", "0.5", "--out", str(out), "--json"]  # fmt: skip
    assert main(args) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["parameters"]["feature_range"] == [list(b) for b in BOUNDS]
    assert any("per feature (3 features, lows 0 to 18, highs 1 to 200000)" in c for c in card["caveats"])
    assert main(["train", "--data-file", str(data), "--feature-bounds", str(bounds), "--method", "non-private",
                 "--epochs", "2", "--json"]) == 0  # fmt: skip
    run = json.loads(capsys.readouterr().out)
    assert run["data"]["feature_range"] == [list(b) for b in BOUNDS] and "per feature" in run["data"]["note"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--feature-bounds", "{missing}"], "cannot read the bounds file"),
        (["--feature-bounds", "{partial}"], "no bounds for 'income', 'ratio'"),
        (["--feature-bounds", "{partial}", "--feature-range", "0,1", "--data-file", None], "only with --data-file"),
    ],
)
def test_a_bad_bounds_file_on_the_command_line_is_exit_2_and_one_line(capsys, tmp_path, extra, message):
    data = _csv(tmp_path / "t.csv", n=60)
    partial = _bounds_file(tmp_path / "p.csv", rows=BOUNDS[:1], names=NAMES[:1])
    paths = {"{missing}": str(tmp_path / "none.csv"), "{partial}": str(partial)}
    extra = [paths.get(a, a) for a in extra]
    args = ["train", "--method", "non-private", "--epochs", "1"]
    if "--data-file" in extra:  # drop the data file: the bounds have nothing to name
        extra = extra[: extra.index("--data-file")]
    else:
        args += ["--data-file", str(data)]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- the pages


@pytest.fixture
def mixed_samples():
    return AppTest.from_file(
        str(Path(__file__).parent.parent / "app_pages" / "mixed_samples.py"), default_timeout=120
    ).run()


def test_the_page_takes_bounds_per_column_from_a_file_and_says_a_bad_one_in_one_line(mixed_samples, tmp_path):
    at = mixed_samples
    data = _csv(tmp_path / "t.csv", n=300).read_bytes()
    at.file_uploader(key="mix_upload").set_value([("people.csv", data, "text/csv")]).run()
    at.number_input(key="mix_lo").set_value(0.0)
    at.number_input(key="mix_hi").set_value(200_000.0).run()
    assert not at.exception and any("of the bounds' width (0, 200000)" in w.value for w in at.warning)
    at.toggle(key="mix_per_column").set_value(True).run()
    assert not at.exception and not at.error
    good = _bounds_file(tmp_path / "b.csv").read_bytes()
    at.file_uploader(key="mix_bounds_file").set_value([("b.csv", good, "text/csv")]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any("width" in w.value for w in at.warning)  # every column fills its own bounds
    assert at.dataframe  # the release's privacy table is drawn
    bad = b"column,low,high\nwage,0,1\n"
    at.file_uploader(key="mix_bounds_file").set_value([("bad.csv", bad, "text/csv")]).run()
    assert not at.exception and len(at.error) == 1 and "no feature column 'wage'" in at.error[0].value


def test_a_sweep_on_ones_own_file_takes_a_bounds_file(capsys, tmp_path, monkeypatch):
    from dpmix_core.runtime.store import ResultStore

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    spec = {
        "name": "people",
        "axis": "target_epsilon",
        "values": [4],
        "repeats": 1,
        "base": {
            "method": "mixing",
            "model": "linear",
            "epochs": 1,
            "synthesis": {"mechanism": "dpmix", "l": 4, "T": 100, "target_epsilon": 4},
        },
        "series": [{"name": "dpmix"}],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    data, bounds = _csv(tmp_path / "t.csv", n=200), _bounds_file(tmp_path / "b.csv")
    args = ["sweep", str(tmp_path / "spec.json"), "--data-file", str(data), "--feature-bounds", str(bounds)]
    assert main([*args, "--max-parallel", "1", "--threads", "1"]) == 0
    (run,) = ResultStore(tmp_path / "results.sqlite").list_runs()
    assert run.status == "done" and run.config["synthesis"]["feature_range"] == [list(b) for b in BOUNDS]
    assert main(["sweep", str(tmp_path / "spec.json"), "--feature-bounds", str(bounds)]) == 2
    assert "--feature-bounds: only with --data-file" in capsys.readouterr().err


def test_a_bounds_template_names_every_feature_column_and_never_replaces_a_file(capsys, tmp_path):
    data = _csv(tmp_path / "t.csv", n=60)
    assert main(["bounds-template", "--data-file", str(data), "--feature-range=-1,1"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines() == ["column,low,high", "age,-1.0,1.0", "income,-1.0,1.0", "ratio,-1.0,1.0"]
    assert read_feature_bounds(text.encode(), feature_names=NAMES, d=3) == (-1.0, 1.0)  # no statistic of the records
    filled = _bounds_file(tmp_path / "filled.csv")
    before = filled.read_bytes()
    assert main(["bounds-template", "--data-file", str(data), "--out", str(filled)]) == 2
    assert "exists and may hold bounds you filled in: it is never replaced" in capsys.readouterr().err
    assert filled.read_bytes() == before
    out = tmp_path / "new.csv"
    assert main(["bounds-template", "--data-file", str(data), "--out", str(out)]) == 0
    assert "3 feature columns at (0, 1)" in capsys.readouterr().out
    assert read_feature_bounds(out, feature_names=NAMES, d=3) == (0.0, 1.0)
    x, y = _table(40)
    np.savez(tmp_path / "t.npz", x=x, y=y)
    assert main(["bounds-template", "--data-file", str(tmp_path / "t.npz")]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["0,0.0,1.0", "1,0.0,1.0", "2,0.0,1.0"]


def test_the_preview_shows_a_tables_mixtures_in_its_own_units(tmp_path):
    from dpmix_core.data import load_user_data
    from dpmix_core.synthesis.previews import mixing_preview

    data = load_user_data(_csv(tmp_path / "t.csv", n=120).read_bytes(), filename="t.csv")
    preview = mixing_preview(data, SynthesisConfig("dpmix", l=1, T=100, sigma_x=0.0, feature_range=BOUNDS))
    shown = np.vstack([p.clean for p in preview.classes])
    width = np.diff(np.array(BOUNDS), axis=1).ravel()
    gaps = np.abs(shown[:, None, :] - data.x_train[None, :, :]) / width  # in parts of each column's width
    assert np.all(gaps.max(axis=2).min(axis=1) < 1e-5)  # each shown row is one record, in the file's units
    assert "mapped back from [0,1] into the same units with the public bounds per feature" in preview.display_note
    clipped = mixing_preview(data, SynthesisConfig("poisson", l=4, T=100, sigma_x=0.0, feature_range=BOUNDS))
    assert np.vstack([p.clean for p in clipped.classes]).max() <= 1 + 1e-6  # clipped records: the release's space
    assert "in the release's feature space" in clipped.display_note


def test_a_bounds_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import dpmix_core.data.feature_bounds as fb

    path = _bounds_file(tmp_path / "b.csv")
    monkeypatch.setattr(fb, "MAX_BOUNDS_FILE_BYTES", 20)
    for source in (path, path.read_bytes()):
        with pytest.raises(DatasetError, match="larger than 20 bytes; a bounds file is one row a column"):
            read_feature_bounds(source, feature_names=NAMES, d=3)
