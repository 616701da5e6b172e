from pathlib import Path

import pytest


def test_published_reference_points_are_drawn_as_not_ours_and_get_no_verdict():
    import pandas as pd

    from dpmix_core.experiments.presets import PRESETS
    from dpmix_core.experiments.spec import Published, load_spec
    from dpmix_core.experiments.trade_offs import published_comparison
    from dpmix_core.views.accuracy_figure import REFERENCE_PREFIX, trade_off_figure

    spec = PRESETS["all-methods"]
    refs = [p for p in spec.published if p.reference]
    assert {p.series for p in refs} == {"DP diffusion model", "DP-SGD, ScatterNet + linear"}
    assert load_spec(spec.to_dict()).published == spec.published  # the flag survives a stored spec
    plain = Published("s", 1.0, 0.9, "paper")
    assert "reference" not in plain.to_dict()  # specs stored before the flag keep their identity
    agg = pd.DataFrame(
        {
            "label": ["s"],
            "axis_value": [1.0],
            "test_accuracy_mean": [0.91],
            "test_accuracy_std": [0.0],
            "test_accuracy_count": [1],
        }
    )
    table = published_comparison(agg, (plain, *refs))
    assert list(table["series"]) == ["s"]  # references never get a verdict
    fig = trade_off_figure(agg, "target_epsilon", published=(plain, *refs))
    names = [t.name for t in fig.data]
    assert f"{REFERENCE_PREFIX}DP diffusion model" in names and "published — s" in names
    with pytest.raises(ValueError, match="reference"):
        Published("s", 1.0, 0.9, reference="yes")


def test_a_custom_sweep_on_a_scatternet_model_releases_features():
    """scatter-linear / scatter-cnn train on ScatterNet features: the page's sweep releases features, not pixels."""

    from dpmix_core.experiments.trade_offs import custom_spec

    knobs = dict(axis="sigma", values=(0.5,), repeats=1, loss="gkl", epochs=1, l=16, T=200, sigma=0.5)
    knobs.update(accountant="pld-poisson", delta=1e-5, dataset="embedded", baselines=("non-private",))
    spec = custom_spec(mechanisms=("poisson",), model="scatter-cnn", **knobs)
    runs = spec.runs()
    assert {r.features for r in runs} == {"scattering"} and {r.model for r in runs} == {"scatter-cnn"}
    assert [r.synthesis.features for r in runs if r.method == "mixing"] == ["scattering"]
    pixels = custom_spec(mechanisms=("poisson",), model="linear", **knobs)
    assert {r.features for r in pixels.runs()} == {"pixels"}
    with pytest.raises(ValueError, match="only the poisson mechanism"):
        custom_spec(mechanisms=("poisson", "dpmix"), model="scatter-linear", **knobs)


def test_a_custom_sweep_of_the_closed_form_model_has_one_step_runs_and_no_dp_sgd():

    from dpmix_core.experiments.trade_offs import custom_spec

    knobs = dict(axis="target_epsilon", values=(1.0,), repeats=1, loss="ce", epochs=30, l=16, T=200, sigma=0.5)
    knobs.update(accountant="rdp-wor", delta=1e-5, dataset="embedded")
    spec = custom_spec(mechanisms=("dpmix",), model="corrected-lsq", baselines=("non-private",), **knobs)
    assert {(r.model, r.epochs, r.features) for r in spec.runs()} == {("corrected-lsq", 1, "pixels")}
    with pytest.raises(ValueError, match="closed form; DP-SGD"):
        custom_spec(mechanisms=("dpmix",), model="corrected-lsq", baselines=("dp-sgd",), **knobs)


def test_a_custom_sweep_calibrates_each_mechanism_with_an_accountant_that_covers_it():
    """'auto': pld-poisson for Poisson mixing, rdp-wor for uniform and class-centric mixing, so one sweep compares them
    at the same certified epsilon; a named accountant that cannot calibrate a mechanism's release is refused in one line
    before any run is queued (it used to fail in the background)."""

    from dpmix_core.experiments.trade_offs import AUTO_ACCOUNTANT, custom_spec

    knobs = dict(axis="target_epsilon", values=(2.0,), repeats=1, model="linear", loss="ce", epochs=1, l=16, T=200)
    knobs.update(sigma=0.5, delta=1e-5, dataset="embedded")
    mechanisms = ("dpmix", "poisson", "class-centric")
    spec = custom_spec(mechanisms=mechanisms, accountant=AUTO_ACCOUNTANT, **knobs)
    chosen = {r.synthesis.mechanism: r.synthesis.accountant for r in spec.runs()}
    assert chosen == {"dpmix": "rdp-wor", "poisson": "pld-poisson", "class-centric": "rdp-wor"}
    with pytest.raises(ValueError, match="'rdp-wor' cannot calibrate a poisson release") as exc:
        custom_spec(mechanisms=mechanisms, accountant="rdp-wor", **knobs)
    assert (
        "\n" not in str(exc.value)
        and "pld-poisson, rdp-poisson, gdp-clt" in str(exc.value)
        and "'auto'" in str(exc.value)
    )
    same = custom_spec(mechanisms=("dpmix",), accountant="lee2019", **knobs)  # a named one that covers it is kept
    assert {r.synthesis.accountant for r in same.runs()} == {"lee2019"}
    on_sigma = custom_spec(mechanisms=mechanisms, accountant="rdp-wor", **{**knobs, "axis": "sigma"})
    assert len(on_sigma.runs()) == 3  # sigma given: nothing is calibrated, nothing to refuse


def test_a_sweep_at_one_axis_value_puts_its_series_side_by_side():
    """Models on one release file: no curve to draw, so the series are the (categorical) x-axis."""
    import pandas as pd

    from dpmix_core.experiments.spec import Published
    from dpmix_core.views.accuracy_figure import trade_off_figure

    agg = pd.DataFrame(
        {
            "label": ["linear", "corrected-lsq"],
            "axis_value": [600.0, 600.0],
            "test_accuracy_mean": [0.75, 0.83],
            "test_accuracy_std": [0.01, 0.02],
            "test_accuracy_count": [2, 2],
        }
    )
    fig = trade_off_figure(agg, "T")
    assert fig.layout.xaxis.type == "category" and "= 600" in fig.layout.xaxis.title.text
    assert [list(t.x) for t in fig.data] == [["linear"], ["corrected-lsq"]]
    two = pd.concat([agg, agg.assign(axis_value=1200.0)], ignore_index=True)
    assert trade_off_figure(two, "T").layout.xaxis.type == "log"  # a curve: the axis stays numeric
    published = (Published("linear", 600.0, 0.8, "paper"),)
    assert trade_off_figure(agg, "T", published=published).layout.xaxis.type == "log"  # stars need the axis


def test_a_preset_on_another_dataset_keeps_only_that_datasets_published_numbers():
    """DP-CDA Table 2 printed FashionMNIST and CIFAR10 rows: NAME@dataset draws those; MNIST numbers never."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.spec import load_spec
    from dpmix_core.experiments.trade_offs import with_dataset

    full, quick = get_preset("dpcda-table2"), get_preset("dpcda-table2-quick")
    assert all("(MNIST)" in p.source for p in full.published_for("mnist"))
    assert {p.dataset for p in full.published} == {"", "fashion-mnist", "cifar10"}  # one list, tagged by dataset
    for spec in (full, quick):
        fashion = with_dataset(spec, "fashion-mnist")
        assert fashion.name == f"{spec.name}@fashion-mnist"
        assert fashion.title == f"{spec.title} (on Fashion-MNIST)"  # its charts say which data
        assert with_dataset(fashion, "fashion-mnist").title == fashion.title
        cells = {(p.series, p.value): round(p.accuracy * 100, 2) for p in fashion.published}
        assert len(cells) == 30 and {v for _, v in cells} == set(spec.values)  # the whole printed grid
        assert cells[("eps = inf (no noise)", 4.0)] == 84.54 and cells[("eps = 20", 4.0)] == 67.91
        assert cells[("eps = 10", 1.0)] == 36.19 and cells[("eps = 10", 512.0)] == 45.74
        assert all(p.source == "DP-CDA Table 2 (FashionMNIST)" for p in fashion.published)
        assert {p.source for p in with_dataset(spec, "cifar10").published} == {"DP-CDA Table 2 (CIFAR10)"}
        assert with_dataset(spec, "embedded").published == ()  # a sample of MNIST: not the paper's setting
        assert with_dataset(spec, "embedded").title.endswith("(on the embedded MNIST sample)")
        assert with_dataset(spec, "mnist", data_dir="/elsewhere").published == spec.published_for("mnist")
        assert load_spec(fashion.to_dict()).published == fashion.published  # the tag survives a stored spec
    assert with_dataset(get_preset("dpfmix-table1"), "fashion-mnist").published == ()  # no such row printed


@pytest.mark.parametrize(
    "name", ["dpcda-table2-public-pixel-zscore-test-unclipped-lr1e-4", "dpcda-table2-quick-public-pixel-zscore"]
)
def test_a_documented_spec_run_on_fashion_mnist_is_compared_with_the_papers_fashion_mnist_row(name):
    """docs/specs variants of DP-CDA Table 2 carry its rows tagged by dataset: `--dataset fashion-mnist` compares."""
    from pathlib import Path

    from dpmix_core.experiments.spec import load_spec
    from dpmix_core.experiments.trade_offs import with_dataset

    spec = load_spec(Path(__file__).resolve().parents[1] / "docs" / "specs" / f"{name}.json")
    fashion = with_dataset(spec, "fashion-mnist")
    cells = {(p.series, p.value): round(p.accuracy * 100, 2) for p in fashion.published}
    assert cells[("eps = 20", 4.0)] == 67.91 and cells[("eps = 10", 4.0)] == 67.48
    assert {p.source for p in fashion.published} == {"DP-CDA Table 2 (FashionMNIST)"}
    assert {p.source for p in spec.published_for("mnist")} == {"DP-CDA Table 2 (MNIST)"}


def test_a_preset_on_another_dataset_z_scores_with_that_datasets_public_constants():
    """DP-CDA's preset bakes in MNIST's documented mean/std; on Fashion-MNIST they must become its own
    (0.2860/0.3530 of 255), in every run and the run keys, while constants a user stated stay as stated."""
    from dataclasses import replace

    from dpmix_core.data import public_zscore_constants
    from dpmix_core.experiments.config import run_key
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.spec import Series, load_spec
    from dpmix_core.experiments.trade_offs import with_dataset

    spec = get_preset("dpcda-table2")
    fashion_constants = public_zscore_constants("fashion-mnist")
    assert spec.base.synthesis.zscore_constants == public_zscore_constants("mnist")
    fashion = with_dataset(spec, "fashion-mnist")
    assert [round(v / 255, 4) for v in fashion.base.synthesis.zscore_constants] == [0.2860, 0.3530]
    assert {cfg.synthesis.zscore_constants for cfg in fashion.runs()} == {fashion_constants}
    assert not {run_key(c) for c in fashion.runs()} & {run_key(c) for c in spec.runs()}  # a new release: new keys
    assert with_dataset(fashion, "mnist").base == spec.base  # and back
    cifar = with_dataset(fashion, "cifar10")
    assert cifar.base.synthesis.zscore_constants == public_zscore_constants("cifar10")
    # a spec file written with MNIST's constants spelled out (docs/specs/*.json) moves the same way
    assert with_dataset(load_spec(spec.to_dict()), "fashion-mnist").base == fashion.base
    stated = replace(
        spec, base=replace(spec.base, synthesis=replace(spec.base.synthesis, zscore_constants=(40.0, 80.0)))
    )
    assert with_dataset(stated, "fashion-mnist").base.synthesis.zscore_constants == (40.0, 80.0)
    # one spec comparing the datasets: a series that switches the data gets that data's constants too
    both = replace(
        spec, series=(*spec.series[:1], Series("on Fashion-MNIST", {"dataset": "fashion-mnist"})), published=()
    )
    by_label = {cfg.label: cfg.synthesis.zscore_constants for cfg in both.runs()}
    assert by_label == {spec.series[0].name: public_zscore_constants("mnist"), "on Fashion-MNIST": fashion_constants}
    unit = get_preset("thesis-4.2-l")  # [0,1] features: no constants to move
    assert with_dataset(unit, "fashion-mnist").base.synthesis.zscore_constants is None


def test_training_data_lists_every_official_dataset_on_disk(tmp_path, monkeypatch):
    import gzip
    import struct

    import numpy as np

    from dpmix_core.data.choice import available_datasets
    from dpmix_core.data.formats import IDX_FILES

    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DPMIX_DATA_DIR", raising=False)
    assert list(available_datasets(str(tmp_path))) == ["embedded"]
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for name in IDX_FILES:  # present is enough: the list reads no file
        (folder / name).write_bytes(
            gzip.compress(bytes([0, 0, 8, 1]) + struct.pack(">I", 1) + np.zeros(1, "u1").tobytes())
        )
    listed = available_datasets(str(tmp_path))
    assert list(listed) == ["fashion-mnist", "embedded"]
    assert (
        listed["fashion-mnist"]
        == f"full Fashion-MNIST (60,000 train / 10,000 test) from local folder {folder} (IDX .gz files)"
    )
    monkeypatch.setenv("DPMIX_SYSTEM_DATA_DIRS", str(tmp_path))  # the same files as a system folder
    assert "system folder" in available_datasets()["fashion-mnist"]
    # a data folder that does not exist fails every load: nothing but the sample is offered
    assert list(available_datasets(str(tmp_path / "absent"))) == ["embedded"]


def test_a_custom_sweep_z_scores_the_class_centric_records_as_dp_cda_or_says_why_not(tmp_path):
    """DP-CDA's records from the page: z-scored with public constants and clipped to ||x|| <= 1, for the class-centric
    series only; per-pixel constants from the test split's even rows make a sweep read on the odd rows."""
    from fake_datasets import tiny_arrays, write_idx_folder

    from dpmix_core.data import load_dataset
    from dpmix_core.experiments.trade_offs import AUTO_ACCOUNTANT, custom_spec
    from dpmix_core.synthesis.public_constants import read_zscore_constants, test_split_constants_file

    knobs = dict(axis="sigma", values=(0.5,), repeats=1, model="linear", loss="ce", epochs=1, l=4, T=200, sigma=0.5)
    knobs.update(accountant=AUTO_ACCOUNTANT, delta=1e-5, dataset="embedded")
    unit = custom_spec(mechanisms=("class-centric", "dpmix"), **knobs)
    dpcda = custom_spec(mechanisms=("class-centric", "dpmix"), records="zscore", **knobs)
    assert dpcda.name != unit.name and dpcda.test_rows == "all"
    assert unit.name == "custom-sigma-22d31c7078"  # the default names a sweep as before the records choice existed
    records = {r.synthesis.mechanism: (r.synthesis.preprocessing, r.synthesis.clip) for r in dpcda.runs()}
    assert records == {"class-centric": ("zscore", 1.0), "dpmix": ("unit", 1.0)}
    assert {r.synthesis.zscore_constants for r in dpcda.runs() if r.synthesis.mechanism == "class-centric"} == {
        (0.1307 * 255, 0.3081 * 255)  # the embedded sample is MNIST's: its documented constants, in pixel units
    }
    write_idx_folder(tmp_path / "fashion-mnist", tiny_arrays(3, n_train=60, n_test=20))
    path, constants = test_split_constants_file(
        load_dataset("fashion-mnist", data_dir=tmp_path, download=False), "even", tmp_path / "constants"
    )
    assert path.name == f"{constants.sha256}.npz" and read_zscore_constants(path).sha256 == constants.sha256
    per_pixel = custom_spec(
        mechanisms=("class-centric",),
        records="zscore-test-even",
        zscore_constants_file=str(path),
        **{**knobs, "dataset": "fashion-mnist"},
    )
    assert per_pixel.test_rows == "odd" and per_pixel.name not in (unit.name, dpcda.name)
    assert {r.synthesis.zscore_constants_sha256 for r in per_pixel.runs()} == {constants.sha256}
    for kwargs, message in (
        ({"mechanisms": ("dpmix",), "records": "zscore"}, "add class-centric, or keep"),
        ({"mechanisms": ("class-centric",), "records": "clip"}, "one of unit, zscore, zscore-test-even. Found 'clip'"),
        ({"mechanisms": ("class-centric",), "zscore_constants_file": str(path)}, "need the test split's constants"),
        ({"mechanisms": ("class-centric",), "records": "zscore-test-even"}, "need the test split's constants"),
    ):
        with pytest.raises(ValueError, match=message):
            custom_spec(**kwargs, **knobs)


PAPERS = Path(__file__).resolve().parents[2] / "shared" / "papers"


@pytest.mark.skipif(not (PAPERS / "README.md").is_file(), reason="the papers folder (../shared/papers) is not here")
def test_the_dpcda_preset_carries_table_2_as_the_paper_prints_it():
    """Every cell of DP-CDA Table 2 (3 datasets x 10 l x 3 eps), read from the paper's text, against the preset."""
    import re

    from dpmix_core.experiments.presets import get_preset

    text = next(p for p in PAPERS.glob("*.txt") if "DP-CDA (Ours)" in p.read_text()).read_text()
    table = text[text.index("Table 2: Average Accuracy") : text.index("Table 3: Performance comparison")]
    printed, dataset = {}, None
    names = {"MNIST": "mnist", "FashionMNIST": "fashion-mnist", "CIFAR10": "cifar10"}
    for line in table.splitlines()[3:]:
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        dataset = names.get(fields[0], dataset)
        means = [float(re.match(r"\s*([0-9.]+)", cell).group(1)) for cell in fields[2:]]
        for series, mean in zip(("eps = inf (no noise)", "eps = 20", "eps = 10"), means, strict=True):
            printed[(dataset, series, float(fields[1]))] = round(100 * mean, 2)
    preset = get_preset("dpcda-table2")
    ours = {(p.dataset or "mnist", p.series, p.value): round(100 * p.accuracy, 2) for p in preset.published if p.source}
    assert len(printed) == 90 and ours == printed


def test_a_narrowed_sweep_keeps_the_papers_numbers_at_the_values_it_runs():
    """A piece of a sweep (narrow_spec, as for its series) carries the paper's numbers at the values it runs only."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import narrow_spec

    spec = narrow_spec(get_preset("dpcda-table2"), values=[4], series=["eps = 20", "eps = 10"])
    assert {(p.series, p.value) for p in spec.published_for("mnist")} == {("eps = 20", 4), ("eps = 10", 4)}
    references = narrow_spec(get_preset("all-methods"), values=[get_preset("all-methods").values[0]]).published
    assert references and all(p.reference for p in references)  # another method's number is no verdict: kept


def test_a_progress_refresh_with_settled_cells_parses_no_result_and_shows_what_a_full_read_shows(tmp_path):
    """The page's 2 s refresh passes the cells it read when the last run finished: the same table, no result
    parsed (the done runs' results are made unreadable below); a run done since shows its accuracy only after the
    cells are read again."""
    import sqlite3

    import pandas as pd

    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.spec import axis_value
    from dpmix_core.experiments.trade_offs import axis_column, narrow_spec, run_table, settled_cells, sweep_jobs
    from dpmix_core.runtime.store import ResultStore

    store = ResultStore(tmp_path / "runs.sqlite")
    spec = narrow_spec(get_preset("dpfmix-table1-m"), repeats=1)
    jobs = list(sweep_jobs(spec))[:4]
    ids = [store.submit(kind, config, key).id for kind, config, key in jobs]
    for run_id, result in zip(ids, ({"test_accuracy": 0.7}, {"test_accuracy": 0.11, "collapse_reason": "one class"})):
        store.claim(run_id)
        store.finish(run_id, result)
    store.claim(ids[2])
    store.update_progress(ids[2], {"epoch": 3, "epochs": 200, "eta_seconds": 90.0})
    settled = settled_cells(store, ids, axis=spec.axis)
    full = run_table(store, ids, axis=spec.axis)
    pd.testing.assert_frame_equal(run_table(store, ids, axis=spec.axis, settled=settled), full)
    assert list(full[axis_column(spec.axis)]) == [axis_value(config, spec.axis) for _, config, _ in jobs]
    assert list(full["note"][:2]) == ["", "one class"] and full["test accuracy"][0] == 0.7

    store.finish(ids[2], {"test_accuracy": 0.5})
    stale = run_table(store, ids, axis=spec.axis, settled=settled)
    assert stale["status"][2] == "done" and pd.isna(stale["test accuracy"][2])
    settled = settled_cells(store, ids, axis=spec.axis)
    assert run_table(store, ids, axis=spec.axis, settled=settled)["test accuracy"][2] == 0.5

    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE runs SET result_json = '{' WHERE status = 'done'")
    refreshed = run_table(store, ids, axis=spec.axis, settled=settled)
    assert list(refreshed["test accuracy"][:3]) == [0.7, 0.11, 0.5]
    with pytest.raises(ValueError):  # without the cells, the table parses every result
        run_table(store, ids, axis=spec.axis)


def test_the_sweep_picker_labels_stay_put_while_runs_move_and_activity_is_said_beside_it(tmp_path):
    """Streamlit keeps a keyed picker's first label for its value, so a label must not carry a changing status."""
    from dpmix_core.experiments.trade_offs import sweep_activity, sweep_choices
    from dpmix_core.runtime.store import ResultStore

    store = ResultStore(tmp_path / "s.sqlite")
    a, b = store.create_sweep("a"), store.create_sweep("b")
    runs = store.submit_many([("fake_jobs:quick", {"x": 1}, None), ("fake_jobs:quick", {"x": 2}, None)], sweep=a.id)
    labels = sweep_choices(store)
    assert sweep_activity(store, a.id) == "Still in progress: this sweep: 2 queued."
    store.claim(runs[0][0].id, pid=1)
    assert sweep_activity(store, b.id) == f"Still in progress: {labels[a.id]}: 1 running, 1 queued."
    for run, _ in runs:
        store.claim(run.id, pid=1)
        store.finish(run.id, {"acc": 0.5}, pid=1)
    assert sweep_activity(store, a.id) is None
    assert sweep_choices(store) == labels == {a.id: f"a (#{a.id}, local)", b.id: f"b (#{b.id}, local)"}
