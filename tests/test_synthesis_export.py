"""synthesize(): mechanism by name, calibration, privacy card, export, CLI."""

import json
from dataclasses import replace

import numpy as np
import pytest

from dpmix_core.cli.main import main
from dpmix_core.data import load_embedded
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.synthesis.export import csv_bytes, privacy_card, write_release
from dpmix_core.synthesis.pipeline import MECHANISMS, SynthesisConfig, planned_release, synthesize


@pytest.fixture(scope="module")
def ds():
    return load_embedded()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_mechanism_runs_and_has_a_card(ds, mechanism):
    s = synthesize(SynthesisConfig(mechanism=mechanism, l=8, T=200, sigma_x=0.5, seed=1), ds)
    card = privacy_card(s)
    assert s.data.x.shape[1] == 784 and card["mechanism"] == mechanism
    assert card["epsilons"] and all("epsilon" in e and "guarantee" in e for e in card["epsilons"])
    assert card["dataset"]["n"] == ds.n_train and card["seed"] == 1
    if mechanism != "label-laplace":  # a mixing release: its guarantee in words, for a release note
        assert card["statement"].startswith("We release T = 200 synthetic points")
    json.dumps(card, allow_nan=False)  # strict JSON


def test_calibrated_release_meets_target(ds):
    cfg = SynthesisConfig(mechanism="poisson", l=32, T=500, target_epsilon=3.0, accountant="pld-poisson")
    s = synthesize(cfg, ds)
    eps = {e["accountant"]: e["epsilon"] for e in privacy_card(s)["epsilons"]}
    assert eps["pld-poisson"] <= 3.0 and s.config.sigma_x > 0
    assert planned_release(s.config, ds).sigma_x == pytest.approx(s.config.sigma_x)


@pytest.mark.parametrize(
    "config",
    [
        SynthesisConfig(mechanism="dpmix", l=8, T=100, sigma_x=0.5, clamp_negative=True),
        SynthesisConfig(mechanism="poisson", l=8, T=100, sigma_x=0.5, clip_x=2.0, clip_y=0.5, public_n=5000),
        SynthesisConfig(
            mechanism="class-centric", l=8, T=100, sigma_x=0.5, preprocessing="zscore", clip=2.0, protect_labels=False
        ),
        SynthesisConfig(mechanism="class-centric", l=8, T=100, sigma_x=0.5, clamp_negative=True),
    ],
    ids=["dpmix", "poisson", "class-centric", "class-centric-clamped"],
)
def test_one_description_from_recipe_to_mechanism_to_card(ds, config):
    """The release planned from a recipe is the object the mechanism ran, the card prints and the accountants read:
    a choice made on a page (what is protected, the public n, the clipping) cannot get lost on the way."""
    s = synthesize(config, ds)
    planned = planned_release(s.config, ds)
    assert s.data.release == planned and s.data.release.mechanism.value == config.mechanism
    card = privacy_card(s)
    assert card["release"] == planned.to_json()
    if config.clamp_negative:  # asked for, done, and said so (it was once dropped on the way for class-centric)
        assert card["release"]["clamp_negative"] and (s.data.x >= 0).all() and (s.data.y >= 0).all()
        assert (synthesize(replace(config, clamp_negative=False), ds).data.x < 0).any()
        assert any("set to 0" in note for note in s.data.notes)
        return
    if config.mechanism == "class-centric":
        assert card["release"]["protects"] == "features only; labels not protected"
        assert all(e["protects"] == card["release"]["protects"] for e in card["epsilons"])
        assert card["release"]["class_sizes"] == [int(c) for c in ds.class_counts()]
        assert card["release"]["bounds"] == "x: ||.||_2 <= 2, y: one-hot"
    if config.mechanism == "poisson":
        assert card["release"]["n"] == 5000 and card["release"]["bounds"] == "x: ||.||_2 <= 2, y: ||.||_2 <= 0.5"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mechanism="poisson", l=8, T=100, sigma_x=0.5),
        dict(mechanism="class-centric", l=8, T=100, sigma_x=0.5, preprocessing="zscore"),
        dict(mechanism="label-laplace"),
    ],
    ids=["poisson", "class-centric-zscore", "label-laplace"],
)
def test_clamp_negative_is_refused_where_negative_values_are_data(kwargs):
    with pytest.raises(ValueError, match="clamp_negative sets negative released values to 0"):
        SynthesisConfig(**kwargs, clamp_negative=True)
    with pytest.raises(ValueError, match="clamp_negative"):
        MixingRelease.class_centric(
            class_sizes=(5, 5), l=2, T=10, sigma_x=1, sigma_y=1, dx=3, dy=2, preprocessing="zscore", clamp_negative=True
        )


def test_card_caveats(ds):
    private = SynthesisConfig(mechanism="class-centric", l=8, T=100, sigma_x=1.0, preprocessing="zscore-private")
    cc = privacy_card(synthesize(private, ds))
    assert any("not covered" in c for c in cc["caveats"])
    fixed = SynthesisConfig(
        mechanism="class-centric", l=8, T=100, sigma_x=1.0, preprocessing="zscore", zscore_constants=(33.3, 78.6)
    )
    assert not any("not covered" in c for c in privacy_card(synthesize(fixed, ds))["caveats"])
    po = privacy_card(synthesize(SynthesisConfig(mechanism="poisson", l=8, T=100, sigma_x=1.0), ds))
    assert any("not an upper bound" in c for c in po["caveats"])
    lab = privacy_card(synthesize(SynthesisConfig(mechanism="label-laplace", label_epsilon=2.0), ds))
    assert any("NOT private" in c for c in lab["caveats"]) and lab["epsilons"][0]["epsilon"] == 2.0


def test_same_seed_same_release(ds):
    cfg = SynthesisConfig(mechanism="dpmix", l=8, T=50, sigma_x=0.3, seed=7)
    np.testing.assert_array_equal(synthesize(cfg, ds).data.x, synthesize(cfg, ds).data.x)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mechanism="mixup"), "Unknown mechanism"),
        (dict(mechanism="dpmix"), "sigma_x"),
        (dict(mechanism="poisson", target_epsilon=1.0, accountant="rdp-wor"), "cannot calibrate a poisson release"),
        (dict(mechanism="dpmix", sigma_x=1.0, sigma_ratio=0.0), "lambda"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SynthesisConfig(**kwargs)


def test_write_npz_and_csv(ds, tmp_path):
    s = synthesize(SynthesisConfig(mechanism="dpmix", l=4, T=20, sigma_x=0.1), ds)
    npz, card = write_release(s, tmp_path / "r.npz")
    with np.load(npz, allow_pickle=False) as z:
        assert z["x"].shape == (20, 784) and json.loads(str(z["privacy_card"]))["mechanism"] == "dpmix"
    assert json.loads(card.read_text())["release_description"]
    csv, _ = write_release(s, tmp_path / "r.csv")
    rows = csv.read_text().splitlines()
    assert len(rows) == 21 and rows[0].startswith("y0,") and len(rows[1].split(",")) == 794
    assert csv_bytes(s).decode().splitlines()[0] == rows[0]
    with pytest.raises(ValueError, match=".npz or .csv"):
        write_release(s, tmp_path / "r.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.card.json", "r.csv", "r.npz"]  # no temp files left


def test_cli_synthesize(tmp_path, capsys):
    out = tmp_path / "s.npz"
    code = main(
        [
            "synthesize",
            "--mechanism",
            "class-centric",
            "--l",
            "4",
            "--T",
            "100",
            "--sigma-x",
            "1",
            "--out",
            str(out),
            "--json",
        ]
    )
    card = json.loads(capsys.readouterr().out)
    assert code == 0 and out.exists() and card["mechanism"] == "class-centric"
    assert {e["accountant"] for e in card["epsilons"]} == {"lee2019", "dpcda", "rdp-wor"}


def test_cli_synthesize_user_csv(tmp_path, capsys):
    csv = tmp_path / "mine.csv"
    rng = np.random.default_rng(0)
    rows = ["label,a,b,c"] + [f"{i % 2},{rng.random():.3f},{rng.random():.3f},{rng.random():.3f}" for i in range(60)]
    csv.write_text("\n".join(rows))
    code = main(
        [
            "synthesize",
            "--data-file",
            str(csv),
            "--mechanism",
            "dpmix",
            "--l",
            "5",
            "--T",
            "10",
            "--sigma-x",
            "0.5",
            "--out",
            str(tmp_path / "o.csv"),
            "--feature-range",
            "0,1",
        ]
    )
    assert code == 0 and "wrote" in capsys.readouterr().out
    code = main(
        [
            "synthesize",
            "--data-file",
            str(csv),
            "--mechanism",
            "dpmix",
            "--l",
            "5",
            "--T",
            "10",
            "--sigma-x",
            "0.5",
            "--out",
            str(tmp_path / "o2.csv"),
        ]
    )
    assert code == 2 and "public bounds" in capsys.readouterr().err


def test_cli_synthesize_class_names_and_a_negative_feature_range(tmp_path, capsys):
    """Class names in the label column reach the card (which class each label column holds), and
    ``--feature-range -1,1`` is read as the pair, not as an option."""
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{rng.normal():.3f},{rng.normal():.3f},{('dog', 'cat', 'bird')[i % 3]}" for i in range(60)]
    (tmp_path / "pets.csv").write_text("\n".join(rows))
    args = ["synthesize", "--data-file", str(tmp_path / "pets.csv"), "--mechanism", "dpmix", "--l", "5", "--T", "10"]
    args += ["--csv-units", "release"]  # the release's space: label columns y0.. (the default CSV is the table's)
    code = main([*args, "--sigma-x", "0.5", "--out", str(tmp_path / "o.csv"), "--feature-range", "-3,3"])
    out = capsys.readouterr().out
    assert code == 0 and "label columns: y0 = bird, y1 = cat, y2 = dog (the list of classes" in out
    card = json.loads((tmp_path / "o.card.json").read_text())
    assert card["released"]["label_classes"] == ["bird", "cat", "dog"] and card["parameters"]["feature_range"] == [
        -3,
        3,
    ]
    assert any(c.startswith("label columns: y0 = bird") for c in card["caveats"])
    assert card["released"]["feature_names"] == ["a", "b"]
    released = np.loadtxt(tmp_path / "o.csv", delimiter=",", skiprows=1)
    assert released.shape == (10, 5)  # y0..y2 then x0, x1


def test_cli_synthesize_label_column(tmp_path, capsys):
    rows = ["a,b,species"] + [f"{i % 7 / 7:.3f},{i % 5 / 5:.3f},{('iris', 'rose')[i % 2]}" for i in range(60)]
    (tmp_path / "f.csv").write_text("\n".join(rows))
    args = ["synthesize", "--data-file", str(tmp_path / "f.csv"), "--mechanism", "dpmix", "--l", "5", "--T", "10"]
    args += ["--sigma-x", "0.5", "--feature-range", "0,1"]
    assert main([*args, "--out", str(tmp_path / "o.npz"), "--label-column", "species"]) == 0
    card = json.loads((tmp_path / "o.card.json").read_text())
    assert card["released"]["label_classes"] == ["iris", "rose"] and card["released"]["feature_names"] == ["a", "b"]
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "p.npz"), "--label-column", "kind"]) == 2
    assert "label column 'kind' not found; the columns are 'a', 'b', 'species'" in capsys.readouterr().err
    plain = ["synthesize", "--mechanism", "dpmix", "--T", "10", "--sigma-x", "1", "--label-column", "species"]
    assert main([*plain, "--out", str(tmp_path / "q.npz")]) == 2
    assert "--label-column names a column of a --data-file CSV" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv", "o.card.json", "o.npz"]


def test_card_names_label_columns_only_when_the_classes_have_names(ds):
    digits = synthesize(SynthesisConfig(mechanism="dpmix", l=4, T=10, sigma_x=1.0), ds)
    card = privacy_card(digits)
    assert card["released"]["label_classes"] == [str(k) for k in range(10)]
    assert not any(c.startswith("label columns") for c in card["caveats"])  # 0..9 are their own names
    assert "feature_names" not in card["released"]  # pixels have no names


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--out", "/nonexistent/x.npz", "--sigma-x", "1"], "does not exist"),
        (["--out", "x.txt", "--sigma-x", "1"], ".npz or .csv"),
        (["--out", "x.npz"], "sigma_x"),
        (["--out", "x.npz", "--target-epsilon", "1", "--accountant", "moments"], "unknown accountant"),
        (["--out", "x.npz", "--sigma-x", "1", "--l", "5000"], "l"),
        (["--out", "x.npz", "--sigma-x", "1", "--data-file", "/nonexistent.csv"], "cannot read"),
    ],
)
def test_cli_synthesize_errors(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    code = main(["synthesize", "--mechanism", "dpmix", "--T", "10", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_save_npz_reads_back_like_np_savez(tmp_path):
    from dpmix_core.synthesis.export import save_npz

    rng = np.random.default_rng(0)
    arrays = {
        "x": rng.random((7, 5), dtype=np.float32),
        "y": np.arange(12, dtype=np.int64).reshape(3, 4).T,
        "z": np.zeros((0, 3)),
        "card": np.array(json.dumps({"a": [1, "inf"]})),
    }
    with open(tmp_path / "ours.npz", "wb") as fh:
        save_npz(fh, arrays)
    np.savez(tmp_path / "numpy.npz", **arrays)
    with np.load(tmp_path / "ours.npz", allow_pickle=False) as ours, np.load(tmp_path / "numpy.npz") as ref:
        assert ours.files == ref.files
        for key in ref.files:
            assert ours[key].dtype == ref[key].dtype
            np.testing.assert_array_equal(ours[key], ref[key])


def test_cli_clamp_negative_refused_for_poisson(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(
        ["synthesize", "--mechanism", "poisson", "--T", "10", "--sigma-x", "1", "--clamp-negative", "--out", "x.npz"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "clamp_negative" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
