"""train --release: a release made earlier by synthesize, read back with its card and trained on.

The round trip is the test that can fail: training on the written file must give exactly the run that
makes the same release itself (same seed, same split), for .npz and for .csv (6 significant digits).
"""

import json
import shutil
import zipfile

import numpy as np
import pytest

from dpmix_core.cli.main import main
from dpmix_core.data.scattering import feature_transform
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.release_files import (
    check_release_memory,
    file_sha256,
    read_release,
    release_run_options,
    release_synthesis,
)
from dpmix_core.experiments.runner import run_config
from dpmix_core.resources.limits import LimitExceeded, Limits
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training.data import flat

RELEASE = ["--dataset", "embedded", "--mechanism", "dpmix", "--l", "8", "--T", "600", "--sigma-x", "0.1"]
TRAIN = ["--model", "linear", "--epochs", "1", "--device", "cpu", "--json"]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """One DPMix release of the embedded sample, as .npz and as .csv (each with its card)."""
    folder = tmp_path_factory.mktemp("releases")
    for suffix in ("npz", "csv"):
        assert main(["synthesize", *RELEASE, "--out", str(folder / f"r.{suffix}")]) == 0
    return folder


def _train(capsys, *args) -> dict:
    capsys.readouterr()
    code = main(["train", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize("suffix", ["npz", "csv"])
def test_training_on_the_file_is_the_run_that_made_it(released, capsys, suffix):
    own = _train(capsys, *RELEASE, *TRAIN)
    from_file = _train(capsys, "--release", str(released / f"r.{suffix}"), *TRAIN)
    assert from_file["test_accuracy"] == pytest.approx(own["test_accuracy"], abs=0 if suffix == "npz" else 0.01)
    assert from_file["epsilon"] == pytest.approx(own["epsilon"])  # the card's, not recomputed
    assert from_file["release_file"]["sha256"] == file_sha256(released / f"r.{suffix}")
    assert any("post-processing" in note for note in from_file["notes"])


def test_csv_and_npz_hold_the_same_release(released):
    npz, csv = read_release(released / "r.npz"), read_release(released / "r.csv")
    np.testing.assert_allclose(csv.x, npz.x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(csv.y, npz.y, rtol=1e-5, atol=1e-6)
    assert csv.card["release"] == npz.card["release"] and npz.num_points == 600


def test_the_release_noise_reaches_the_run(released):
    syn = release_synthesis(read_release(released / "r.npz").card)
    assert syn.sigma_x == syn.sigma_y == pytest.approx(0.1) and syn.target_epsilon is None and syn.l == 8


def test_calibrated_release_reads_back_with_the_sigma_it_used(tmp_path):
    out = tmp_path / "cal.npz"
    args = ["--dataset", "embedded", "--mechanism", "dpmix", "--l", "8", "--T", "200"]
    assert main(["synthesize", *args, "--target-epsilon", "8", "--accountant", "rdp-wor", "--out", str(out)]) == 0
    card = read_release(out).card
    assert card["release"]["sigma_x"] > 0
    as_asked = {**card["parameters"], "sigma_x": None, "sigma_y": None, "target_epsilon": 8.0}
    syn = release_synthesis({**card, "parameters": as_asked})  # the noise used, not the target asked for
    assert syn.target_epsilon is None
    assert (syn.sigma_x, syn.sigma_y) == (card["release"]["sigma_x"], card["release"]["sigma_y"])


def test_identity_is_the_bytes_not_the_path(released, tmp_path):
    moved = tmp_path / "moved.npz"
    shutil.copy(released / "r.npz", moved)
    a = RunConfig("mixing", model="linear", **release_run_options(read_release(released / "r.npz")))
    b = RunConfig("mixing", model="linear", **release_run_options(read_release(moved)))
    assert a.release_file != b.release_file and run_key(a) == run_key(b)
    other = RunConfig("mixing", model="linear", **release_run_options(read_release(released / "r.csv")))
    assert run_key(other) != run_key(a)
    assert "release_sha256" not in RunConfig("non-private", model="linear").identity()


def test_a_file_changed_after_set_up_is_refused(released, tmp_path):
    path = tmp_path / "r.npz"
    shutil.copy(released / "r.npz", path)
    config = RunConfig("mixing", model="linear", epochs=1, device="cpu", **release_run_options(read_release(path)))
    release = read_release(path)
    with open(path, "wb") as fh:  # same shapes, other values: a different release under the same name
        np.savez(fh, x=release.x + 0.01, y=release.y, privacy_card=np.array(json.dumps(release.card)))
    with pytest.raises(ValueError, match="changed since the run was set up"):
        run_config(config)


def _rewrite(path, *, x=None, y=None, card=None, drop=()):
    release = read_release(path)
    arrays = {
        "x": release.x if x is None else x,
        "y": release.y if y is None else y,
        "privacy_card": np.array(json.dumps(release.card if card is None else card)),
    }
    with open(path, "wb") as fh:
        np.savez(fh, **{k: v for k, v in arrays.items() if k not in drop})


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: {"x": r.x[:-1], "y": r.y[:-1]}, "does not match its card"),
        (lambda r: {"x": np.where(np.arange(r.x.size).reshape(r.x.shape) == 3, np.nan, r.x)}, "NaN or infinite"),
        (lambda r: {"drop": ("y",)}, "needs arrays x and y"),
        (lambda r: {"card": {**r.card, "released": {**r.card["released"], "feature_dim": 10}}}, "does not match"),
        (lambda r: {"card": {k: v for k, v in r.card.items() if k != "epsilons"}}, "not a privacy card"),
    ],
)
def test_a_file_that_is_not_its_cards_release_is_refused(released, tmp_path, change, message):
    path = tmp_path / "r.npz"
    shutil.copy(released / "r.npz", path)
    _rewrite(path, **change(read_release(path)))
    with pytest.raises(ValueError, match=message):
        read_release(path)


def test_unreadable_files_get_one_line(tmp_path, released):
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="cannot be read as an .npz"):
        read_release(tmp_path / "junk.npz")
    np.save(tmp_path / "one.npy", np.zeros(3))
    shutil.move(tmp_path / "one.npy", tmp_path / "one.npz")
    with pytest.raises(ValueError, match="single array"):
        read_release(tmp_path / "one.npz")
    shutil.copy(released / "r.csv", tmp_path / "lonely.csv")
    with pytest.raises(ValueError, match="no privacy card beside"):
        read_release(tmp_path / "lonely.csv")
    with pytest.raises(ValueError, match="FILE.npz or FILE.csv"):
        read_release(released / "r.card.json")
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(ValueError, match="needs arrays x and y"):
        read_release(tmp_path / "empty.npz")


@pytest.mark.parametrize(
    "params, message",
    [
        ({"mechanism": "class-centric", "preprocessing": "zscore-private"}, "private data's statistics"),
        ({"mechanism": "label-laplace", "features": "pixels"}, "label-only Laplace"),
        ({"l": "many"}, "can read: l must be a positive integer"),
    ],
)
def test_cards_it_cannot_use_are_refused(released, params, message):
    card = read_release(released / "r.npz").card
    with pytest.raises(ValueError, match=message):
        release_synthesis({**card, "parameters": {**card["parameters"], **params}})


def test_a_card_without_a_public_test_split_is_refused(released):
    release = read_release(released / "r.npz")
    card = {**release.card, "dataset": {**release.card["dataset"], "name": "my-upload"}}
    with pytest.raises(ValueError, match="no public test split"):
        release_run_options(type(release)(release.path, release.x, release.y, card, release.sha256))


def test_a_release_of_another_dataset_is_refused_before_training(released, tmp_path):
    path = tmp_path / "r.npz"
    shutil.copy(released / "r.npz", path)
    release = read_release(path)
    wide = np.zeros((release.num_points, 100), np.float32)
    _rewrite(path, x=wide, card={**release.card, "released": {**release.card["released"], "feature_dim": 100}})
    config = RunConfig("mixing", model="linear", epochs=1, device="cpu", **release_run_options(read_release(path)))
    with pytest.raises(ValueError, match="not a release of this dataset"):
        run_config(config)


def test_too_big_a_file_is_refused_before_it_is_read(released):
    with pytest.raises(LimitExceeded, match="DPMIX_MAX_MEMORY"):
        check_release_memory(released / "r.npz", Limits(max_memory=1024))
    check_release_memory(released / "r.npz", Limits(max_memory=1 << 34))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--l", "4"], "drop --l"),
        (["--dataset", "mnist"], "drop --dataset"),
        (["--method", "non-private"], "drop --method"),
    ],
)
def test_cli_refuses_options_the_card_decides(released, capsys, extra, message):
    code = main(["train", "--release", str(released / "r.npz"), *extra, "--model", "linear"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_missing_file_is_one_line(tmp_path, capsys):
    code = main(["train", "--release", str(tmp_path / "nope.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "does not exist" in err and err.count("\n") == 1


def test_run_config_checks_the_release_fields():
    with pytest.raises(ValueError, match="needs both"):
        RunConfig("non-private", release_file="x.npz")
    with pytest.raises(ValueError, match="method must be 'mixing'"):
        RunConfig("non-private", release_file="x.npz", release_sha256="0" * 64)
    with pytest.raises(ValueError, match="64 lower-case hex"):
        RunConfig("mixing", synthesis=SynthesisConfig("dpmix", sigma_x=0.1), release_file="x.npz", release_sha256="XYZ")


def test_no_records_map_to_no_rows():
    assert flat(np.zeros((0, 28, 28), np.uint8)).shape == (0, 784)
    assert feature_transform("scattering", np.zeros((0, 28, 28), np.uint8)).shape == (0, 81 * 7 * 7)


def test_an_upload_is_kept_once_under_its_hash(released, tmp_path):
    from dpmix_core.experiments.release_files import save_release_upload

    csv = {"r.csv": (released / "r.csv").read_bytes(), "r.card.json": (released / "r.card.json").read_bytes()}
    first = save_release_upload(csv, tmp_path / "releases")
    again = save_release_upload(csv, tmp_path / "releases")
    assert first.path == again.path and first.sha256 == file_sha256(released / "r.csv")
    assert sorted(p.name for p in (tmp_path / "releases").iterdir()) == [
        f"{first.sha256}.card.json",
        f"{first.sha256}.csv",
    ]
    other_card = {**csv, "r.card.json": csv["r.card.json"].replace(b'"seed"', b'"seed" ')}
    with pytest.raises(ValueError, match="exists with other contents"):
        save_release_upload(other_card, tmp_path / "releases")
    for files in ({"r.csv": csv["r.csv"]}, {"a.npz": b"", "b.npz": b""}, {"r.txt": b"x"}, {}):
        with pytest.raises(ValueError, match="Upload one FILE.npz"):
            save_release_upload(files, tmp_path / "releases")
    with pytest.raises(ValueError, match="cannot be read"):
        save_release_upload({"bad.npz": b"junk"}, tmp_path / "releases")
    assert len(list((tmp_path / "releases").iterdir())) == 2  # the refused upload was not kept


def test_one_release_many_models_is_a_sweep_of_series_at_its_own_setting(released):
    from dpmix_core.experiments.trade_offs import release_file_spec, release_model_choices
    from dpmix_core.views.release_card import release_summary

    release = read_release(released / "r.npz")
    choices, default = release_model_choices(release)
    assert "scatter-linear" not in choices and set(default) <= set(choices)
    spec = release_file_spec(release, models=("linear", "corrected-lsq"), epochs=2, repeats=3, display_name="r.npz")
    runs = spec.runs()
    assert len(runs) == 6 and spec.values == (600,) and "r.npz" in spec.title
    assert {r.release_sha256 for r in runs} == {release.sha256} and {r.model for r in runs} == set(default)
    assert {r.epochs for r in runs if r.model == "corrected-lsq"} == {1}  # fitted once, whatever the epochs
    assert "rdp-wor" in release_summary(release) and "T = 600" in release_summary(release)
    with pytest.raises(ValueError, match="at least one model"):
        release_file_spec(release, models=(), epochs=1, repeats=1)
    with pytest.raises(ValueError, match="needs features = 'scattering'"):
        release_file_spec(release, models=("scatter-linear",), epochs=1, repeats=1)


def _edited(card: dict, edit) -> dict:
    copy = json.loads(json.dumps(card))
    edit(copy)
    return copy


def test_a_cards_epsilons_are_recomputed_from_its_description(released):
    from dpmix_core.experiments.release_files import verify_card

    card = read_release(released / "r.npz").card
    check = verify_card(card)
    assert check.matches and {r["accountant"] for r in check.rows} == {e["accountant"] for e in card["epsilons"]}
    assert all(r["card"] == pytest.approx(r["recomputed"], rel=1e-9) for r in check.rows)

    def halve(c):
        c["epsilons"][-1]["epsilon"] /= 2

    lowered = verify_card(_edited(card, halve))
    assert not lowered.matches and card["epsilons"][-1]["accountant"] in lowered.reason
    assert [r["matches"] for r in lowered.rows] == [True] * (len(card["epsilons"]) - 1) + [False]

    def more_noise(c):  # noise claimed on the card but not in the description: the description no longer follows
        c["parameters"]["sigma_x"] = c["release"]["sigma_x"] * 2
        c["release"]["sigma_x"] = None

    assert "does not follow from its parameters (sigma_x)" in verify_card(_edited(card, more_noise)).reason

    def other_noise(c):  # the parameters say one noise, the description (which the epsilons follow) another
        c["parameters"]["sigma_y"] = c["release"]["sigma_y"] * 2

    other = verify_card(_edited(card, other_noise))
    assert not other.matches and "parameters and its release description differ (sigma_y)" in other.reason

    def relabel(c):  # an approximation sold as a bound
        c["epsilons"][0]["upper_bound"] = not c["epsilons"][0]["upper_bound"]

    assert not verify_card(_edited(card, relabel)).matches
    no_release = verify_card(_edited(card, lambda c: c.pop("release")))
    assert not no_release.matches and "no release description" in no_release.reason


@pytest.mark.parametrize(
    "args",
    [
        ["--mechanism", "poisson", "--l", "16", "--T", "300", "--target-epsilon", "2", "--accountant", "pld-poisson"],
        ["--mechanism", "class-centric", "--preprocessing", "zscore", "--l", "8", "--T", "200", "--sigma-x", "0.5"],
        ["--mechanism", "label-laplace", "--label-epsilon", "2"],
    ],
)
def test_verify_cli_confirms_each_kind_of_card_and_exits_1_on_an_edit(tmp_path, capsys, args):
    out = tmp_path / "r.npz"
    assert main(["synthesize", "--dataset", "embedded", *args, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "verified:" in capsys.readouterr().out
    card = json.loads((tmp_path / "r.card.json").read_text())
    card["epsilons"][0]["epsilon"] = 0.001
    (tmp_path / "r.card.json").write_text(json.dumps(card))
    assert main(["verify", str(tmp_path / "r.card.json"), "--json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["matches"] is False and answer["rows"][0]["matches"] is False
    assert main(["verify", str(tmp_path / "missing.card.json")]) == 2


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_any_bytes_are_a_release_or_one_value_error(tmp_path_factory, suffix):
    """Random files, random zips with x/y members and mangled CSVs: read_release raises ValueError only."""
    import io

    from hypothesis import given
    from hypothesis import strategies as st

    folder = tmp_path_factory.mktemp("fuzz")
    card = {"dataset": {"name": "embedded"}, "parameters": {}, "released": {"points": 2, "feature_dim": 2,
            "label_dim": 1}, "epsilons": [], "delta": 1e-5}  # fmt: skip
    (folder / f"f{suffix}".replace(suffix, ".card.json")).write_text(json.dumps(card))

    def zipped(members: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        return buf.getvalue()

    raw = st.binary(max_size=300)
    npz = st.one_of(raw, st.dictionaries(st.sampled_from(["x.npy", "y.npy", "privacy_card.npy"]), raw).map(zipped))
    csv = st.one_of(raw, st.text(max_size=200).map(lambda t: ("y0,x0,x1\n" + t).encode("utf-8", "replace")))

    @given(npz if suffix == ".npz" else csv)
    def check(data: bytes) -> None:
        (folder / f"f{suffix}").write_bytes(data)
        try:
            read_release(folder / f"f{suffix}")
        except ValueError:
            pass

    check()


def test_a_release_of_a_dataset_this_machine_lacks_is_refused_before_launch(released):
    from dpmix_core.experiments.trade_offs import release_file_spec

    release = read_release(released / "r.npz")
    card = {**release.card, "dataset": {**release.card["dataset"], "name": "mnist"}}
    of_mnist = type(release)(release.path, release.x, release.y, card, release.sha256)
    with pytest.raises(ValueError, match="not on this machine"):
        release_file_spec(of_mnist, models=("linear",), epochs=1, repeats=1, available={"embedded": "sample"})
    assert release_file_spec(release, models=("linear",), epochs=1, repeats=1, available={"embedded": "sample"})


def test_an_upload_that_cannot_be_kept_is_one_line(released, tmp_path):
    from dpmix_core.experiments.release_files import save_release_upload

    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(ValueError, match="cannot keep the upload"):
        save_release_upload({"r.npz": (released / "r.npz").read_bytes()}, blocker / "releases")


def test_any_card_is_read_verified_and_turned_into_a_run_or_one_value_error(released, tmp_path_factory):
    """A card edited into any JSON shape: reading, verifying and setting up a run raise ValueError only."""
    from hypothesis import given
    from hypothesis import strategies as st

    from dpmix_core.experiments.release_files import verify_card
    from dpmix_core.views.release_card import release_summary

    release = read_release(released / "r.npz")
    folder = tmp_path_factory.mktemp("cards")
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.text(max_size=8)
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=6,
    )
    fields = st.sampled_from(["dataset", "parameters", "released", "epsilons", "release", "delta"])
    inner_keys = st.sampled_from(["name", "sigma_x", "l", "T", "mechanism", "points", "feature_dim", "n", "epsilon"])

    @given(fields, st.one_of(values, st.dictionaries(inner_keys, values, max_size=3)), st.booleans())
    def check(field, value, merge):
        card = json.loads(json.dumps(release.card))
        if merge and isinstance(card.get(field), dict) and isinstance(value, dict):
            card[field].update(value)
        else:
            card[field] = value
        path = folder / "r.npz"
        _save(path, release, card)
        try:
            verify_card(read_release(path).card)
            release_run_options(read_release(path))
            release_summary(read_release(path))
        except ValueError:
            pass

    check()
    odd = json.loads(json.dumps(release.card))
    odd["epsilons"][0]["epsilon"] = {"not": "a number"}
    _save(folder / "r.npz", release, odd)
    assert "?" in release_summary(read_release(folder / "r.npz"))
    assert not verify_card(odd).matches


def _save(path, release, card):
    with open(path, "wb") as fh:
        np.savez(fh, x=release.x, y=release.y, privacy_card=np.array(json.dumps(card)))
