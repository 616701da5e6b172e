"""AppTest drives the "Mixed samples" page."""

import io
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dpmix_core.data import load_embedded
from dpmix_core.data.choice import app_dataset, describe_dataset, needs_feature_range
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.synthesis.previews import GROUPING, PREVIEW_MECHANISMS, mixing_preview

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "mixed_samples.py")


@pytest.fixture
def at():
    return AppTest.from_file(PAGE, default_timeout=120).run()


def eps_table(at):
    return at.dataframe[0].value


def test_renders_with_embedded_data(at):
    assert not at.exception and not at.error
    assert any("embedded MNIST sample" in c.value for c in at.caption)
    assert list(eps_table(at)["accountant"]) == ["lee2019", "dpcda", "rdp-wor"]
    assert "class-centric" in eps_table(at)["assumptions"].iloc[0]
    assert any(c.value == "noise-free" for c in at.caption) or any("noise-free" in m.value for m in at.markdown)
    assert [b for b in at.get("download_button") if "Images (PNG)" in b.proto.label]  # the preview as one image


def test_poisson_uses_poisson_accountants(at):
    at.selectbox(key="mix_mechanism").set_value("poisson").run()
    assert not at.exception
    assert set(eps_table(at)["accountant"]) == {"gdp-clt", "rdp-poisson", "pld-poisson"}


def test_guarantee_follows_preprocessing_and_label_protection(at):
    """Defaults are covered and protect labels; private z-scoring is 'not covered'; features-only says so."""
    assert not at.warning  # public z-score constants by default: no data-derived statistics
    assert set(eps_table(at)["guarantee"]) == {"rigorous upper bound"}
    assert float(eps_table(at).set_index("accountant").loc["rdp-wor", "ε"]) < 10  # meaningful protection
    at.selectbox(key="mix_prep").set_value("unit").run()
    at.selectbox(key="mix_prep").set_value("zscore").run()  # public constants, prefilled for MNIST
    assert not at.exception and not at.warning
    assert at.number_input(key="mix_z_mean").value == pytest.approx(0.1307 * 255)
    assert set(eps_table(at)["guarantee"]) == {"rigorous upper bound"}
    tightest = min(float(v) for v in eps_table(at)["ε"])  # the statement states the tightest, rounded up
    [statement] = [m.value for m in at.markdown if m.value.startswith("We release T = 1,000")]
    assert tightest <= float(statement.split("(ε, δ) = (")[1].split(",")[0]) <= tightest * 1.01
    at.selectbox(key="mix_prep").set_value("zscore-private").run()
    assert not at.exception and any("Not covered" in e.value for e in at.error)
    assert any("No differential-privacy guarantee is claimed" in m.value for m in at.markdown)
    assert set(eps_table(at)["guarantee"]) == {"not covered: normalisation constants computed from the private data"}
    assert any("not covered" in w.value for w in at.warning)
    at.selectbox(key="mix_prep").set_value("unit")
    at.checkbox(key="mix_protect_labels").uncheck().run()
    assert set(eps_table(at)["guarantee"]) == {"rigorous upper bound (features only; labels not protected)"}


def test_calibrate_to_target(at):
    at.checkbox(key="mix_use_target").check().run()
    at.number_input(key="mix_target").set_value(20.0)
    at.selectbox(key="mix_accountant").set_value("rdp-wor").run()
    assert not at.exception and not at.error
    table = eps_table(at).set_index("accountant")
    assert float(table.loc["rdp-wor", "ε"]) <= 20.0


def test_local_perturbation_is_shared_as_one_record_per_point(at):
    """'no mixing' leaves the ℓ box unused: the release other pages take has ℓ = 1, not the box's value."""
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY

    at.selectbox(key="mix_mechanism").set_value("local").run()
    shared = at.session_state[SHARED_RELEASE_KEY]
    assert not at.exception and (shared.mechanism, shared.l, shared.clip) == ("local", 1, None)


def test_calibration_offers_the_accountants_of_the_mechanisms_sampling(at):
    """Poisson mixing is calibrated by pld-poisson first (a rigorous bound; the CLT last), uniform mixing by rdp-wor:
    an accountant of the other sampling scheme, which would refuse the release, is not offered."""
    at.checkbox(key="mix_use_target").check().run()
    assert at.selectbox(key="mix_accountant").options == ["rdp-wor", "lee2019", "dpcda"]
    at.selectbox(key="mix_mechanism").set_value("poisson").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="mix_accountant").options == ["pld-poisson", "rdp-poisson", "gdp-clt"]
    assert at.selectbox(key="mix_accountant").value == "pld-poisson"  # rdp-wor was picked: not Poisson's
    table = eps_table(at).set_index("accountant")
    assert float(table.loc["pld-poisson", "ε"]) <= at.number_input(key="mix_target").value * (1 + 1e-3)


def test_bad_input_is_an_error_next_to_controls(at):
    at.text_input(key="mix_l").input("1000").run()  # classes have 400 records
    assert not at.exception and any("fewer than l=1000" in e.value for e in at.error)


def test_new_draw_changes_seed(at):
    before = at.number_input(key="mix_seed").value
    at.button(key="mix_redraw").click().run()
    assert at.number_input(key="mix_seed").value == before + 1 and not at.exception


def test_export_prepares_without_error(at):
    at.text_input(key="mix_T").input("200").run()
    at.button(key="mix_prepare").click().run()
    assert not at.exception and not at.error
    assert any("Models on a release file" in c.value and "verify FILE" in c.value for c in at.caption)


def test_preview_noise_free_and_released_share_the_mixture():
    ds = load_embedded()
    p = mixing_preview(ds, SynthesisConfig(mechanism="dpmix", l=8, T=1000, sigma_x=1e-6, seed=3))
    cls = p.classes[0]
    np.testing.assert_allclose(cls.clean, cls.noisy, atol=1e-4)
    assert p.classes[0].originals.max() <= 1.0 and len(p.classes) == 10


@pytest.mark.parametrize("mechanism", PREVIEW_MECHANISMS)
def test_the_preview_says_how_its_points_are_sorted_into_classes(mechanism):
    """Class-centric points hold one class; DPMix and Poisson points mix classes and go under their largest share."""
    p = mixing_preview(load_embedded(), SynthesisConfig(mechanism=mechanism, l=8, T=200, sigma_x=0.5, seed=0))
    assert p.display_note.endswith(GROUPING[mechanism])
    assert ("largest label share" in p.display_note) == (mechanism in ("dpmix", "poisson"))


def test_upload_and_feature_range_rules(tmp_path):
    csv = "label,a,b\n" + "\n".join(f"{i % 2},0.{i % 9},0.5" for i in range(20))
    ds = app_dataset(csv.encode(), "mine.csv")
    assert ds.n_train == 20 and needs_feature_range(ds) and "20 training records" in describe_dataset(ds)
    assert not needs_feature_range(load_embedded())
    assert describe_dataset(ds).endswith("2 classes") and describe_dataset(load_embedded()).endswith("10 classes")
    pets = app_dataset(("label,a\n" + "\n".join(f"{('cat', 'bird')[i % 2]},{i}" for i in range(8))).encode(), "p.csv")
    assert describe_dataset(pets).endswith("2 classes (bird, cat)")
    with pytest.raises(ValueError, match="not a number"):
        app_dataset(b"label,a\n1,x\n0,1\n", "bad.csv")
    # tabular data gets a tabular preview: records, noise-free mixtures and released rows, with its epsilons
    p = mixing_preview(ds, SynthesisConfig(mechanism="dpmix", l=2, T=10, sigma_x=0.1, feature_range=(0, 1)))
    assert not p.images and p.epsilons
    table = p.classes[0].rows()
    assert list(table.columns) == ["row", "x0", "x1"] and set(table["row"]) >= {"record", "released"}
    assert ds.feature_names == ("a", "b") and list(p.classes[0].rows(ds.feature_names).columns) == ["row", "a", "b"]


def test_tabular_upload_on_the_page(tmp_path):
    """A valid tabular CSV (3 features) gets its epsilons, a table preview and the export, not an error."""
    csv = "label,a,b,c\n" + "\n".join(
        f"{i % 2},{(i % 7) / 7:.3f},{(i % 5) / 5:.3f},{(i % 3) / 3:.3f}" for i in range(400)
    )
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["mix_mechanism"] = "dpmix"
    at.run()
    from dpmix_core.data.choice import app_dataset as load

    ds = load(csv.encode(), "mine.csv")
    p = mixing_preview(ds, SynthesisConfig(mechanism="dpmix", l=4, T=100, sigma_x=0.2, feature_range=(0, 1)))
    assert not p.images and len(p.classes) == 2 and p.classes[1].rows().shape[1] == 4


@pytest.mark.parametrize(
    "key, text, message",
    [("mix_T", "0", "invalid: T = 0 must be at least 1"), ("mix_delta", "-0.1", "invalid: δ = -0.1 must be greater")],
)
def test_bad_entries_are_refused_next_to_the_control_and_no_epsilon_stays(key, text, message):
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert at.dataframe  # epsilons on screen
    at.text_input(key=key).input(text).run()
    assert not at.exception and any(message in e.value for e in at.error), [e.value for e in at.error]
    assert not at.dataframe and not any("ε" in str(s.value) for s in at.subheader)


def test_large_T_in_scientific_notation():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.text_input(key="mix_T").input("1e5").run()
    assert not at.exception and not at.error
    assert any("T = 100,000 points" in m.value for m in at.markdown)


def test_feature_maps_tile_each_channel_in_its_own_cell():
    from dpmix_core.synthesis.previews import feature_maps

    channels, h, w = 5, 2, 3  # 5 maps -> a 3 x 2 grid (3 columns), one blank cell
    rows = np.repeat(np.arange(channels, dtype=np.float32), h * w)[None, :]  # map c holds the value c
    [grid] = feature_maps(rows, (channels, h, w))
    assert grid.shape == (2 * h, 3 * w)
    for c in range(channels):
        r, col = divmod(c, 3)
        assert (grid[r * h : (r + 1) * h, col * w : (col + 1) * w] == c).all()
    assert np.isnan(grid[h:, 2 * w :]).all()  # the blank cell: drawn white, never mistaken for a value


def test_feature_mixing_on_the_page_releases_scatternet_features(at):
    """Poisson mixing of ScatterNet features (DPFMix): the preview shows feature maps, every ε names the extractor."""
    at.selectbox(key="mix_mechanism").set_value("poisson").run()
    at.text_input(key="mix_T").input("200").run()
    at.selectbox(key="mix_features").set_value("scattering").run()
    assert not at.exception and not at.error
    assert all("ScatterNet" in a and "per-sample GroupNorm" in a for a in eps_table(at)["assumptions"])
    assert any("ScatterNet features, not pixels" in c.value for c in at.caption)
    assert [b for b in at.get("download_button") if "Images (PNG)" in b.proto.label]  # digits next to feature maps
    at.button(key="mix_prepare").click().run()
    assert not at.exception and not at.error
    at.selectbox(key="mix_mechanism").set_value("dpmix").run()  # only Poisson mixing offers features
    assert not at.exception and "mix_features" not in [s.key for s in at.selectbox]
    assert "ScatterNet" not in " ".join(eps_table(at)["assumptions"])


def test_feature_mixing_preview_shows_feature_maps():
    ds = load_embedded()
    config = SynthesisConfig(mechanism="poisson", l=32, T=100, sigma_x=0.05, features="scattering", seed=1)
    p = mixing_preview(ds, config)
    cls = next(c for c in p.classes if len(c.clean))
    assert cls.originals.shape[1:] == (28, 28) and cls.clean.shape[1:] == (63, 63) == cls.noisy.shape[1:]
    assert 0.0 <= cls.noisy.min() and cls.noisy.max() <= 1.0
    assert "ScatterNet" in p.display_note and p.statement and "ScatterNet" in p.statement
    from PIL import Image

    from dpmix_core.views.exports import preview_png

    png = Image.open(io.BytesIO(preview_png(p)))  # the page's PNG download: digits and feature maps in one grid
    assert png.size[1] > 63 * 3


def test_dpmix_on_clipped_records_on_the_page(at):
    """DPFMix App. E.3's DPMix: l distinct records clipped to ||x||, ||y|| <= 1; the page's epsilons are those of
    exactly that release (not [0,1] pixels), and the images are min-max scaled for display."""
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.release import MixingRelease

    at.selectbox(key="mix_mechanism").set_value("dpmix").run()
    unit = float(eps_table(at).set_index("accountant").loc["rdp-wor", "ε"].replace(",", ""))
    at.selectbox(key="mix_dpmix_prep").set_value("clip").run()
    assert not at.exception and not at.error
    table = eps_table(at).set_index("accountant")
    assert table["assumptions"].str.contains(r"x: \|\|.\|\|_2 <= 1, y: \|\|.\|\|_2 <= 1").all()
    n = load_embedded().n_train
    release = MixingRelease.dpmix(n=n, l=32, T=1000, sigma_x=0.2, sigma_y=0.2, dx=784, dy=10, clip=(1.0, 1.0))
    expected = get_accountant("rdp-wor").epsilon(release, 1e-5).epsilon
    assert float(table.loc["rdp-wor", "ε"]) == pytest.approx(expected, rel=0.01) and expected < unit / 10
    assert any("min-max scaled for display" in c.value for c in at.caption)
    from dpmix_core.views.shared_release import SHARED_RELEASE_KEY

    shared = at.session_state[SHARED_RELEASE_KEY]  # other pages account the release on its clipped bounds
    assert shared.mechanism == "dpmix" and shared.clip == (1.0, 1.0)
    at.selectbox(key="mix_mechanism").set_value("class-centric").run()  # the choice belongs to uniform mixing
    assert not at.exception and "class-centric" in eps_table(at)["assumptions"].iloc[0]


@pytest.fixture
def fresh_dataset_list():
    """The pages cache the list of datasets on disk for a minute and the loaded datasets by name: start and leave
    with empty caches (another test's files under the same name must not be served)."""
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def test_data_picker_offers_every_official_dataset_on_disk(tmp_path, monkeypatch, fresh_dataset_list):
    """With Fashion-MNIST and CIFAR-10 in DPMIX_DATA_DIR, the page offers them beside the sample, and mixes each."""
    from fake_datasets import tiny_arrays, write_cifar_tar, write_idx_folder

    write_idx_folder(tmp_path / "fashion-mnist", tiny_arrays(1, n_train=600, n_test=50))
    write_cifar_tar(tmp_path / "cifar-10-binary.tar.gz", tiny_arrays(2, shape=(32, 32, 3), n_train=600, n_test=50))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception and not at.error
    picker = at.selectbox(key="mix_dataset")
    assert picker.options == [
        "full Fashion-MNIST (60,000 train / 10,000 test) from local folder "
        f"{tmp_path / 'fashion-mnist'} (IDX .gz files)",
        f"full CIFAR-10 (50,000 train / 10,000 test) from local file {tmp_path / 'cifar-10-binary.tar.gz'}",
        "embedded MNIST sample (4,000 train / 1,000 test; offline, for demos)",
    ]
    assert picker.value == "embedded"  # no full MNIST here: the sample, as before
    picker.set_value("fashion-mnist").run()
    assert not at.exception and not at.error
    assert any(f"local folder {tmp_path / 'fashion-mnist'}" in c.value for c in at.caption)
    assert at.number_input(key="mix_z_mean").value == pytest.approx(0.2860 * 255)  # its public constants
    assert "pool N_min-1=59" in eps_table(at)["assumptions"].iloc[0]  # class-centric: 60 records a class
    at.selectbox(key="mix_dataset").set_value("cifar10").run()
    assert not at.exception and not at.error
    assert any("600 training records of shape 32×32×3" in c.value for c in at.caption)
    assert len(eps_table(at)) == 3


def test_a_broken_dataset_on_disk_gets_one_line_not_a_traceback(tmp_path, monkeypatch, fresh_dataset_list):
    from dpmix_core.data.formats import IDX_FILES

    (tmp_path / "fashion-mnist").mkdir()
    for name in IDX_FILES:  # located (the files exist) but not readable
        (tmp_path / "fashion-mnist" / name).write_bytes(b"not gzip")
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception and not at.error  # starts on the sample
    at.selectbox(key="mix_dataset").set_value("fashion-mnist").run()
    assert not at.exception
    assert len(at.error) == 1 and "fashion-mnist" in at.error[0].value.lower()
    assert not at.dataframe  # nothing computed from other data


def test_per_pixel_public_constants_on_the_page(at, tmp_path, monkeypatch):
    """The test split's even rows give per-pixel constants on the page: covered, with the same epsilons."""
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path))
    one = eps_table(at).set_index("accountant")["ε"]
    at.selectbox(key="mix_z_source").set_value("test").run()
    assert not at.exception and not at.error and not at.warning
    assert any("784 per-feature means and stds: embedded test split, even rows" in c.value for c in at.caption)
    assert set(eps_table(at)["guarantee"]) == {"rigorous upper bound"}
    assert list(eps_table(at).set_index("accountant")["ε"]) == list(one)  # the accounting ignores which constants
    assert len(list((tmp_path / "zscore-constants").glob("*.npz"))) == 1  # kept by the numbers' sha256
    at.selectbox(key="mix_z_source").set_value("file").run()  # nothing uploaded yet: says so, computes nothing
    assert not at.exception and any("Upload a file of per-feature public constants" in i.value for i in at.info)
    assert not at.dataframe


def test_an_upload_picks_its_label_column(at):
    """A CSV whose classes sit in its last column (no 'label' column): the page looks past the header and offers
    'species' (the last column that reads like classes), which gives the classes and leaves the other two as
    features; another column can be picked."""
    rows = ["height,width,species"] + [f"{i % 7 / 7:.3f},{i % 5 / 5:.3f},{('iris', 'rose')[i % 2]}" for i in range(200)]
    at.file_uploader(key="mix_upload").set_value([("flowers.csv", "\n".join(rows).encode(), "text/csv")]).run()
    box = next(s for s in at.selectbox if s.label == "Label column")
    assert box.options == ["height", "width", "species"] and box.value == "species"
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("2 classes (iris, rose)" in c.value and "200 training records" in c.value for c in at.caption)
    tables = [d.value for d in at.dataframe if "row" in d.value.columns]
    assert tables and list(tables[0].columns) == ["row", "height", "width"]


def test_private_ranges_on_the_page():
    """One's own table with loose bounds: narrowing them privately shows one epsilon, of the ranges and the points
    together, says so in the statement and the preview; a refused ranges epsilon stops the page under its control."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from own_files import pets_bytes

    at = AppTest.from_file(PAGE, default_timeout=180)
    at.session_state["mix_mechanism"] = "dpmix"
    at.run()
    at.file_uploader(key="mix_upload").set_value([("pets.csv", pets_bytes(1500), "text/csv")]).run()
    next(s for s in at.selectbox if s.label == "Label column").set_value("species").run()
    at.number_input(key="mix_lo").set_value(-50.0).run()
    at.number_input(key="mix_hi").set_value(100.0).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert set(eps_table(at)["accountant"]) >= {"rdp-wor"}
    at.toggle(key="mix_private_ranges").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert list(eps_table(at)["accountant"]) == ["rdp-composition"]
    assert any("covers them and the points together" in m.value for m in at.markdown)
    assert any("private ranges (inside the public bounds)" in c.value for c in at.caption)
    at.number_input(key="mix_ranges_eps").set_value(0.0).run()
    assert any("ε of the ranges" in e.value for e in at.error) and not at.dataframe
    at.checkbox(key="mix_use_target").check().run()
    at.number_input(key="mix_target").set_value(2.0).run()
    at.number_input(key="mix_ranges_eps").set_value(2.0).run()
    assert any("must be below the target 2" in e.value for e in at.error) and not at.dataframe
    at.number_input(key="mix_ranges_eps").set_value(0.2).run()
    assert not at.error and list(eps_table(at)["accountant"]) == ["rdp-composition"]
    assert float(eps_table(at)["ε"].iloc[0]) <= 2.0
