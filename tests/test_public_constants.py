"""Per-feature public z-score constants from a file (synthesis.public_constants; issue 13, DP-CDA's per-pixel z-score).

- the numbers' sha256 is their identity: the same numbers in two files are one run, other numbers another;
- the constants of a test split are numpy's per-feature mean and population std of exactly those rows;
- a release z-scored with them is the mechanism run with those vectors, is covered, and never reads the training
  split's statistics (replacing one record moves only the points that hold it);
- the test split of a run is mapped with the same vectors; a file that changed, has another width or is missing
  is refused with one line (CLI: exit 2).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from dpmix_core.cli.main import main
from dpmix_core.data import load_dataset
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.mechanisms import class_centric_mix
from dpmix_core.synthesis.pipeline import (
    SynthesisConfig,
    guarantee_label,
    planned_release,
    public_zscore_arrays,
    synthesize,
)
from dpmix_core.synthesis.public_constants import (
    ZScoreConstants,
    read_zscore_constants,
    stored_zscore_constants,
    write_zscore_constants,
    zscore_constants_from_bytes,
    zscore_constants_from_test_split,
)
from dpmix_core.training.data import release_feature_map


@pytest.fixture(scope="module")
def ds():
    return load_dataset("embedded")


@pytest.fixture(scope="module")
def even(ds):
    return zscore_constants_from_test_split(ds, "even")


@pytest.fixture
def even_file(tmp_path, even):
    return write_zscore_constants(tmp_path / "even.npz", even)


def _config(path, **kw) -> SynthesisConfig:
    base = dict(l=4, T=200, sigma_x=0.3, preprocessing="zscore", zscore_constants_file=str(path), seed=1)
    return SynthesisConfig("class-centric", **{**base, **kw})


def test_split_constants_are_the_mean_and_population_std_of_exactly_those_test_rows(ds, even):
    x = ds.x_test.reshape(len(ds.x_test), -1).astype(np.float64)
    np.testing.assert_allclose(even.mean, x[0::2].mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(even.std, x[0::2].std(axis=0), rtol=1e-9, atol=1e-9)
    odd = zscore_constants_from_test_split(ds, "odd")
    np.testing.assert_allclose(odd.mean, x[1::2].mean(axis=0), rtol=1e-12, atol=1e-9)
    assert "even rows (500 of 1000" in even.source and odd.sha256 != even.sha256
    # the training split (the private data) never enters
    shuffled = replace(ds, x_train=ds.x_train[::-1] // 2)
    assert zscore_constants_from_test_split(shuffled, "even").sha256 == even.sha256
    with pytest.raises(ValueError, match="rows must be one of"):
        zscore_constants_from_test_split(ds, "first")


def test_the_identity_is_the_numbers_not_the_file(tmp_path, even):
    a = write_zscore_constants(tmp_path / "a.npz", even)
    b = write_zscore_constants(tmp_path / "b.npz", ZScoreConstants(even.mean.copy(), even.std.copy(), "a copy"))
    assert read_zscore_constants(a).sha256 == read_zscore_constants(b).sha256 == even.sha256
    moved = even.mean.copy()
    moved[400] += 1e-9  # one feature, one part in 10^10
    assert ZScoreConstants(moved, even.std, even.source).sha256 != even.sha256
    assert ZScoreConstants(even.std, even.mean, even.source).sha256 != even.sha256  # mean and std are not symmetric
    assert read_zscore_constants(a).source == even.source


@pytest.mark.parametrize(
    ("mean", "std", "source", "match"),
    [
        (np.zeros(3), np.ones(4), "x", r"std must have shape \(3,\)"),
        (np.zeros((2, 2)), np.ones((2, 2)), "x", r"mean must have shape \(4,\)"),
        (np.zeros(0), np.ones(0), "x", "at least one feature"),
        (np.array([0.0, np.nan]), np.ones(2), "x", "mean must be finite"),
        (np.zeros(2), np.array([1.0, -1.0]), "x", "std must be >= 0"),
        (np.zeros(2), np.ones(2), "two\nlines", "one line"),
    ],
)
def test_bad_constants_are_refused_with_one_line(mean, std, source, match):
    with pytest.raises(ValueError, match=match):
        ZScoreConstants(mean, std, source)


def test_bad_files_are_refused_with_one_line(tmp_path, even):
    with pytest.raises(ValueError, match="not found"):
        read_zscore_constants(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable .npz"):
        read_zscore_constants(tmp_path / "junk.npz")
    np.savez(tmp_path / "nostd.npz", mean=even.mean)
    with pytest.raises(ValueError, match="lacks std"):
        read_zscore_constants(tmp_path / "nostd.npz")
    path = write_zscore_constants(tmp_path / "c.npz", even)
    with pytest.raises(ValueError, match="the file changed"):
        read_zscore_constants(path, sha256="0" * 64)
    with pytest.raises(ValueError, match="ends in .npz"):
        write_zscore_constants(tmp_path / "c.csv", even)


def test_config_fills_in_the_numbers_sha256_and_refuses_what_does_not_fit(even_file, even):
    cfg = _config(even_file)
    assert cfg.zscore_constants_sha256 == even.sha256 and cfg.zscore_constants_file == str(even_file.resolve())
    with pytest.raises(ValueError, match="give the file"):
        SynthesisConfig(
            "class-centric", l=4, T=200, sigma_x=0.3, preprocessing="zscore", zscore_constants_sha256="a" * 64
        )
    with pytest.raises(ValueError, match="not both"):
        _config(even_file, zscore_constants=(33.0, 78.0))
    with pytest.raises(ValueError, match="class-centric preprocessing 'zscore' only"):
        _config(even_file, preprocessing="unit")
    with pytest.raises(ValueError, match="class-centric preprocessing 'zscore' only"):
        SynthesisConfig("dpmix", l=4, T=200, sigma_x=0.3, zscore_constants_file=str(even_file))
    with pytest.raises(ValueError, match="64 lower-case hex"):
        _config(even_file, zscore_constants_sha256="ABC")
    with pytest.raises(ValueError, match="not found"):
        _config(even_file.with_name("nowhere.npz"))


def test_release_is_the_mechanism_run_with_the_files_vectors_and_is_covered(ds, even_file, even):
    cfg = _config(even_file)
    out = synthesize(cfg, ds)
    X = ds.x_train.reshape(ds.n_train, -1)
    direct = class_centric_mix(
        X, ds.y_train, num_classes=10, release=planned_release(cfg, ds), seed=1, mean=even.mean, std=even.std
    )
    np.testing.assert_array_equal(out.data.x, direct.x)
    # one pair repeated over every pixel is another release
    scalar = synthesize(replace(cfg, zscore_constants_file=None, zscore_constants_sha256=None), ds)
    assert not np.array_equal(scalar.data.x, out.data.x)
    assert out.data.release.covered and guarantee_label(cfg) == "covered"
    assert out.data.release == scalar.data.release  # the accounting does not depend on which public constants
    assert any(even.source in note and even.sha256[:12] in note for note in out.data.notes)


def test_public_constants_never_let_one_record_move_points_it_is_not_in(ds, even_file):
    """The accountants' assumption (a record moves only the points holding it), which private statistics break."""
    cfg = _config(even_file, sigma_x=0.0, sigma_y=0.0, l=64)
    X2 = ds.x_train.copy()
    target = int(np.flatnonzero(ds.y_train == 0)[0])
    X2[target] = 255
    a = synthesize(cfg, ds).data
    b = synthesize(cfg, replace(ds, x_train=X2)).data
    others = a.y[:, 0] < 0.5  # points of the other classes cannot hold record `target`
    np.testing.assert_array_equal(a.x[others], b.x[others])
    private = replace(cfg, preprocessing="zscore-private", zscore_constants_file=None, zscore_constants_sha256=None)
    pa, pb = synthesize(private, ds).data, synthesize(private, replace(ds, x_train=X2)).data
    assert not np.array_equal(pa.x[others], pb.x[others])


def test_test_split_is_mapped_with_the_same_vectors_clipped_or_not(ds, even_file, even):
    cfg = _config(even_file, clip=3.0)
    x = ds.x_test[:50].reshape(50, -1)
    z = (x - even.mean) / np.where(even.std == 0, 1.0, even.std)
    np.testing.assert_allclose(
        release_feature_map(cfg, ds.x_train, clip=False)(ds.x_test[:50]), z, rtol=1e-5, atol=1e-4
    )
    clipped = release_feature_map(cfg, ds.x_train)(ds.x_test[:50])
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    np.testing.assert_allclose(clipped, z * np.minimum(1.0, 3.0 / norms), rtol=1e-5, atol=1e-4)


def test_a_changed_or_wider_file_is_refused_before_mixing(ds, even_file, even, tmp_path):
    cfg = _config(even_file)
    write_zscore_constants(even_file, ZScoreConstants(even.mean + 1, even.std, "edited"))  # same path, new numbers
    with pytest.raises(ValueError, match="the file changed"):
        synthesize(cfg, ds)
    wide = write_zscore_constants(tmp_path / "wide.npz", ZScoreConstants(np.zeros(785), np.ones(785), "785 features"))
    with pytest.raises(ValueError, match="has 785 features; the data has 784"):
        public_zscore_arrays(_config(wide), 784)


def test_run_identity_holds_the_sha256_not_the_path_and_old_keys_do_not_move(tmp_path, even):
    a = write_zscore_constants(tmp_path / "a.npz", even)
    b = write_zscore_constants(tmp_path / "b.npz", even)
    other = write_zscore_constants(tmp_path / "o.npz", ZScoreConstants(even.mean, even.std + 1, "other"))
    runs = [RunConfig("mixing", synthesis=_config(p), model="linear") for p in (a, b, other)]
    assert run_key(runs[0]) == run_key(runs[1]) != run_key(runs[2])
    ident = runs[0].identity()["synthesis"]
    assert ident["zscore_constants_sha256"] == even.sha256 and "zscore_constants_file" not in ident
    assert RunConfig.from_dict(json.loads(json.dumps(runs[0].to_dict()))) == runs[0]
    plain = RunConfig("mixing", synthesis=SynthesisConfig("class-centric", l=4, T=200, sigma_x=0.3), model="linear")
    assert not {"zscore_constants_file", "zscore_constants_sha256"} & set(plain.identity()["synthesis"])


def test_cli_writes_the_constants_and_releases_with_them(tmp_path, capsys, even):
    out = tmp_path / "c.npz"
    assert main(["zscore-constants", "--dataset", "embedded", "--rows", "even", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sha256"] == even.sha256 == read_zscore_constants(out).sha256
    release = tmp_path / "r.npz"
    argv = ["synthesize", "--mechanism", "class-centric", "--l", "4", "--T", "100", "--sigma-x", "0.5"]
    argv += ["--preprocessing", "zscore", "--zscore-constants-file", str(out), "--out", str(release)]
    assert main(argv) == 0
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["parameters"]["zscore_constants_sha256"] == even.sha256
    capsys.readouterr()
    assert main([*argv[:-4], "--zscore-constants-file", str(tmp_path / "none.npz"), "--out", str(release)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: z-score constants file") and "not found" in err and "\n" not in err
    assert main(["zscore-constants", "--dataset", "embedded", "--out", str(tmp_path / "c.json")]) == 2
    assert "--out must end in .npz" in capsys.readouterr().err


def test_uploaded_bytes_and_the_content_addressed_copy(tmp_path, even):
    """An upload is read like a file; the page keeps it as <sha256>.npz, written once, a damaged copy replaced."""
    path = write_zscore_constants(tmp_path / "up.npz", even)
    up = zscore_constants_from_bytes(path.read_bytes(), "up.npz")
    assert up.sha256 == even.sha256 and up.source == even.source
    with pytest.raises(ValueError, match="'junk.npz' is not a readable .npz"):
        zscore_constants_from_bytes(b"junk", "junk.npz")
    with pytest.raises(ValueError, match="'up.npz' has 784 features; the data has 3072"):
        up.fitting(3072, "'up.npz'")
    folder = tmp_path / "store"
    kept = stored_zscore_constants(up, folder)
    assert kept == folder / f"{even.sha256}.npz" and read_zscore_constants(kept, sha256=even.sha256)
    before = kept.stat().st_mtime_ns
    assert stored_zscore_constants(up, folder) == kept and kept.stat().st_mtime_ns == before  # not rewritten
    kept.write_bytes(b"damaged")
    assert read_zscore_constants(stored_zscore_constants(up, folder)).sha256 == even.sha256


def test_the_mechanism_checks_its_vectors_with_the_same_rule(ds, even):
    """class_centric_mix and ZScoreConstants share one check: shape (d,), finite, std >= 0."""
    cfg = SynthesisConfig("class-centric", l=4, T=200, sigma_x=0.3, preprocessing="zscore")
    release = planned_release(cfg, ds)
    X = ds.x_train.reshape(ds.n_train, -1)
    bad_std = even.std.copy()
    bad_std[3] = -1.0
    for mean, std, match in [(even.mean, bad_std, "std must be >= 0"), (even.mean[:10], even.std, r"shape \(784,\)")]:
        with pytest.raises(ValueError, match=match):
            class_centric_mix(X, ds.y_train, num_classes=10, release=release, seed=0, mean=mean, std=std)
