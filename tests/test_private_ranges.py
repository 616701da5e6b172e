"""Private feature ranges for a table's release (synthesis.private_ranges): privacy of the ranges, the composition the
card states, the calibration to a target, the release and its test map, the card's check, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from own_files import write_pets
from scipy.stats import norm

from dpmix_core.cli.main import main
from dpmix_core.experiments.release_files import verify_card
from dpmix_core.experiments.run_data import open_data_file
from dpmix_core.mechanisms.feature_ranges import FeatureRanges, bin_counts
from dpmix_core.privacy.accountants import get_accountant
from dpmix_core.privacy.budget import ADD_REMOVE, REPLACE_ONE, compose_budget, mixing_item
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.synthesis.export import privacy_card
from dpmix_core.synthesis.pipeline import SynthesisConfig, config_ranges, synthesize
from dpmix_core.synthesis.private_ranges import (
    composition_epsilon,
    private_ranges,
    range_noise_multiplier,
    ranges_item,
)
from dpmix_core.training.data import release_feature_map

LOOSE = (-50.0, 100.0)  # the pets' features lie in about (-3, 6): they fill ~6 % of these bounds
DELTA = 1e-5


def _gaussian_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """The Gaussian mechanism's exact delta(epsilon) (Balle & Wang 2018, Thm. 8), an independent oracle."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


@pytest.mark.parametrize(("relation", "sensitivity"), [("add/remove-one", 1.0), ("replace-one", math.sqrt(2.0))])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 2.0])
def test_the_ranges_noise_spends_exactly_their_epsilon(relation, sensitivity, epsilon):
    z = range_noise_multiplier(epsilon, DELTA, relation)
    assert _gaussian_delta(epsilon, z, sensitivity) == pytest.approx(DELTA, rel=1e-6)
    assert _gaussian_delta(epsilon, 0.99 * z, sensitivity) > DELTA  # the least such noise


def test_a_replaced_record_moves_the_counts_by_at_most_sqrt_2d():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(200, 5))
    low, high = np.zeros(5), np.ones(5)
    for _ in range(50):
        other = x.copy()
        other[rng.integers(200)] = rng.uniform(size=5)
        moved = np.linalg.norm(bin_counts(x, low, high, 16) - bin_counts(other, low, high, 16))
        assert moved <= math.sqrt(2 * 5) + 1e-12
    removed = np.linalg.norm(bin_counts(x, low, high, 16) - bin_counts(x[1:], low, high, 16))
    assert removed == pytest.approx(math.sqrt(5))


def test_the_replace_one_event_is_the_add_remove_one_scaled_by_sqrt_2():
    z = 3.0
    add_remove, replace_one = ranges_item(z, 3, ADD_REMOVE), ranges_item(z, 3, REPLACE_ONE)
    assert add_remove.event.event.noise_multiplier == pytest.approx(z * math.sqrt(3))
    assert replace_one.event.event.noise_multiplier == pytest.approx(z * math.sqrt(3) / math.sqrt(2))
    assert add_remove.event.count == replace_one.event.count == 3
    ranges = FeatureRanges(np.zeros(2), np.ones(2), z, 3, 16)  # DP-SGD's ranges: the same add/remove-one event
    assert ranges.dp_event() == add_remove.event


@pytest.mark.parametrize("mechanism", ["poisson", "dpmix"])
def test_the_composition_covers_both_parts_and_pld_beats_rdp(mechanism):
    if mechanism == "poisson":
        release = MixingRelease.poisson(n=3000, m=16, T=3000, sigma_x=0.3, sigma_y=0.3, clip_x=1, clip_y=1)
        alone = get_accountant("pld-poisson").epsilon(release, DELTA).epsilon
    else:
        release = MixingRelease.dpmix(n=3000, l=16, T=3000, sigma_x=0.3, sigma_y=0.3, dx=4, dy=3)
        alone = get_accountant("rdp-wor").epsilon(release, DELTA).epsilon
    relation = release.adjacency.value
    item = ranges_item(range_noise_multiplier(0.2, DELTA, relation), 3, relation)
    total = composition_epsilon(item, release, DELTA)
    assert total > alone and total > 0.2 * 0.9
    rdp_total = compose_budget([item, mixing_item("release", release)], DELTA).epsilon
    assert total <= rdp_total * (1 + 1e-9)  # replace-one: the RDP composition itself; add/remove: PLD, tighter
    if mechanism == "poisson":
        assert total < rdp_total


@pytest.fixture(scope="module")
def pets(tmp_path_factory):
    path = write_pets(tmp_path_factory.mktemp("pets") / "pets.csv", n=3000)
    return open_data_file(path, label_column="species", test_fraction=0.2).dataset


@pytest.mark.parametrize("mechanism", ["poisson", "dpmix"])
def test_a_target_holds_for_the_ranges_and_the_points_together(pets, mechanism):
    plain = synthesize(SynthesisConfig(mechanism, l=16, T=2400, target_epsilon=2.0, feature_range=LOOSE), pets)
    config = SynthesisConfig(mechanism, l=16, T=2400, target_epsilon=2.0, feature_range=LOOSE, range_epsilon=0.2)
    syn = synthesize(config, pets)
    card = privacy_card(syn)
    (total,) = card["epsilons"]
    assert total["accountant"] == ("pld-composition" if mechanism == "poisson" else "rdp-composition")
    assert total["upper_bound"] and 0.98 * 2.0 <= total["epsilon"] <= 2.0
    assert syn.config.sigma_x > plain.config.sigma_x  # the ranges cost some noise ...
    assert syn.config.sigma_x < 1.25 * plain.config.sigma_x  # ... little of it
    alone = [e["epsilon"] for e in card["feature_ranges"]["release_alone"] if e["upper_bound"]]
    assert min(alone) < total["epsilon"] and card["feature_ranges"]["total_epsilon"] == total["epsilon"]
    assert "released privately" in card["caveats"][0] and "covers them and the points together" in card["statement"]


def test_the_ranges_narrow_loose_bounds_and_the_test_map_reads_the_same_ones(pets):
    config = SynthesisConfig("dpmix", l=16, T=2400, sigma_x=0.3, feature_range=LOOSE, range_epsilon=1.0)
    syn = synthesize(config, pets)
    ranges = syn.ranges
    assert ranges is not None and ranges.narrowed() == 4
    low, high = np.array(ranges.low), np.array(ranges.high)
    assert np.all(low >= LOOSE[0]) and np.all(high <= LOOSE[1]) and np.all(high - low < 0.5 * (LOOSE[1] - LOOSE[0]))
    x = pets.x_train.astype(np.float64)
    inside = np.mean((x >= low) & (x <= high))
    assert inside > 0.95  # narrowed onto the records, not past them
    assert config_ranges(config, pets.x_train) == ranges  # deterministic: the test map computes the same ranges
    mapped = release_feature_map(config, pets.x_train)(pets.x_test)
    expected = np.clip((pets.x_test - low) / (high - low), 0, 1)
    np.testing.assert_allclose(mapped, expected, atol=1e-6)
    again = private_ranges(pets.x_train, LOOSE, epsilon=1.0, delta=DELTA, relation="replace-one", seed=0)
    assert again == ranges  # the ranges of a config are those of its records, bounds, budget and seed


def test_ranges_help_a_release_with_loose_bounds(pets):
    """The point of the ranges: features scaled by loose bounds drown in the noise (least squares on the release
    stays at chance), narrowed ones carry the classes through it."""

    def accuracy(config: SynthesisConfig) -> float:
        syn = synthesize(config, pets)
        ones = np.ones((len(syn.data.x), 1))
        weights = np.linalg.lstsq(np.hstack([syn.data.x, ones]), syn.data.y, rcond=None)[0]
        test = release_feature_map(syn.config, pets.x_train)(pets.x_test)
        scores = np.hstack([test, np.ones((len(test), 1))]) @ weights
        return float(np.mean(np.argmax(scores, axis=1) == pets.y_test))

    common = dict(l=16, T=2400, target_epsilon=4.0, feature_range=LOOSE)
    plain = accuracy(SynthesisConfig("dpmix", **common))
    narrowed = accuracy(SynthesisConfig("dpmix", **common, range_epsilon=0.4))
    assert plain < 0.4 and narrowed > plain + 0.2


def test_the_card_check_recomputes_the_ranges_and_catches_edits(pets):
    config = SynthesisConfig("poisson", l=16, T=2400, target_epsilon=2.0, feature_range=LOOSE, range_epsilon=0.2)
    card = json.loads(json.dumps(privacy_card(synthesize(config, pets))))
    check = verify_card(card)
    assert check.matches, check.reason
    assert {r["accountant"] for r in check.rows} >= {"pld-composition", "pld-poisson (points alone)"}
    edited = json.loads(json.dumps(card))
    edited["epsilons"][0]["epsilon"] = 1.0
    assert not verify_card(edited).matches
    edited = json.loads(json.dumps(card))
    edited["feature_ranges"]["noise_multiplier"] *= 2
    assert "do not follow" in verify_card(edited).reason
    edited = json.loads(json.dumps(card))
    del edited["feature_ranges"]
    assert "disagree" in verify_card(edited).reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(range_epsilon=0.5), "give them"),
        (dict(range_epsilon=0.5, feature_range=LOOSE, target_epsilon=0.5), "below the target"),
        (dict(range_epsilon=-1.0, feature_range=LOOSE), "positive finite"),
        (dict(range_epsilon=0.5, feature_range=LOOSE, features="scattering", mechanism="poisson"), "mixes scattering"),
    ],
)
def test_private_ranges_are_refused_where_they_cannot_apply(kwargs, message):
    kwargs = {"mechanism": "dpmix", "sigma_x": 1.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        SynthesisConfig(**kwargs)


@dataclass(frozen=True)
class _Done:
    returncode: int
    stdout: str
    stderr: str


def _cli(capsys, *args: str) -> _Done:
    """The CLI in this process (as ``python -m dpmix_core``, without the interpreter's start-up)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return _Done(code, out, err)


def test_the_cli_releases_with_private_ranges_and_refuses_in_one_line(tmp_path, capsys):
    data = write_pets(tmp_path / "pets.csv", n=1500)
    out = tmp_path / "release.csv"
    common = ["synthesize", "--data-file", str(data), "--label-column", "species", "--feature-range=-50,100"]
    common += ["--mechanism", "dpmix"]
    done = _cli(
        capsys, *common, "--l", "8", "--T", "1200", "--target-epsilon", "2", "--private-ranges", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    card = json.loads((tmp_path / "release.card.json").read_text())
    assert card["parameters"]["range_epsilon"] == pytest.approx(0.2)
    assert card["epsilons"][0]["accountant"] == "rdp-composition" and card["epsilons"][0]["epsilon"] <= 2.0
    assert "private ranges inside the public bounds" in done.stdout
    checked = _cli(capsys, "verify", str(tmp_path / "release.card.json"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for bad, said in (
        (["--sigma-x", "1", "--private-ranges"], "10% of --target-epsilon"),
        (["--sigma-x", "1", "--private-ranges", "0"], "must be positive"),
    ):
        refused = _cli(capsys, *common, *bad, "--out", str(tmp_path / "x.csv"))
        assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) <= 2


def test_train_on_a_release_with_private_ranges_reads_the_test_records_through_them(tmp_path, capsys):
    data = write_pets(tmp_path / "pets.csv", n=1500)
    args = ["train", "--data-file", str(data), "--label-column", "species", "--feature-range=-50,100"]
    args += ["--mechanism", "poisson", "--l", "8", "--T", "1200", "--target-epsilon", "8", "--private-ranges"]
    done = _cli(capsys, *args, "--model", "linear", "--epochs", "5", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result["epsilon"]) == {"pld-composition"} and result["epsilon"]["pld-composition"] <= 8.0
    assert "ranges it released privately" in json.dumps(result)
    assert result["test_accuracy"] > 0.5  # chance is 1/3; with the bounds as they are it stays there


def test_the_accountant_page_says_what_a_ranges_card_covers(tmp_path, capsys):
    from streamlit.testing.v1 import AppTest

    data = write_pets(tmp_path / "pets.csv", n=1500)
    rel = tmp_path / "rel.npz"
    args = ["synthesize", "--data-file", str(data), "--label-column", "species", "--feature-range=-50,100"]
    args += ["--mechanism", "dpmix", "--l", "8", "--T", "1200", "--target-epsilon", "2", "--private-ranges"]
    assert _cli(capsys, *args, "--out", str(rel)).returncode == 0
    page = Path(__file__).resolve().parents[1] / "app_pages" / "privacy_accountant.py"
    at = AppTest.from_file(str(page), default_timeout=120).run()
    at.file_uploader(key="acc_card_file").set_value([(rel.name, rel.read_bytes(), "application/octet-stream")])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    notes = [w.value for w in at.warning if "released privately with it" in w.value]
    assert len(notes) == 1 and "covers the points alone" in notes[0]
    report = tmp_path / "report.html"
    done = _cli(capsys, "report", "--release", str(rel), "--out", str(report))
    assert done.returncode == 0 and "note: The bounds of this release" in done.stdout
    assert "What this ε does not cover" in report.read_text() and "released privately with it" in report.read_text()


# ------------------------------------------------------------------ one-hot features: exact bounds, left out
COLOURS = ("red", "green", "blue", "grey", "black")


def _coloured_pets(path: Path, n: int) -> Path:
    """The pets with a text column ``colour`` (unrelated to the species) after the label: one-hot over COLOURS."""
    lines = write_pets(path, n=n).read_text().splitlines()
    rng = np.random.default_rng(1)
    path.write_text("\n".join([lines[0] + ",colour", *(f"{r},{rng.choice(COLOURS)}" for r in lines[1:])]) + "\n")
    return path


@pytest.fixture(scope="module")
def coloured(tmp_path_factory):
    path = _coloured_pets(tmp_path_factory.mktemp("coloured") / "pets.csv", n=3000)
    return open_data_file(path, label_column="species", categories=(("colour", COLOURS),))


def test_one_hot_features_keep_their_bounds_and_add_no_noise_to_the_others(coloured):
    from dpmix_core.data import with_category_bounds

    data = coloured.dataset
    exact = coloured.exact_features
    assert [data.feature_names[j] for j in exact] == [f"colour={c}" for c in COLOURS]
    bounds = with_category_bounds(LOOSE, feature_names=data.feature_names, categories=data.categories)
    common = dict(epsilon=0.3, delta=DELTA, relation="replace-one", seed=3)
    ranges = private_ranges(data.x_train, bounds, exact=exact, **common)
    assert all((ranges.low[j], ranges.high[j]) == (0.0, 1.0) for j in exact) and ranges.exact == exact
    counted = [j for j in range(data.feature_dim) if j not in exact]
    alone = private_ranges(data.x_train[:, counted], LOOSE, **common)  # the table without its text column
    # the same noise draws at the same scale: the one-hot columns neither count nor widen the others' noise
    assert [ranges.low[j] for j in counted] == list(alone.low) and [ranges.high[j] for j in counted] == list(alone.high)
    assert alone.narrowed() == ranges.narrowed() == 4
    counting_them = private_ranges(
        data.x_train, bounds, **common
    )  # as before: every column counted, sqrt(9/4) more noise
    assert counting_them.exact == () and [counting_them.low[j] for j in counted] != list(alone.low)
    assert "5 one-hot features kept at (0, 1)" in ranges.describe() and "of 4 counted features" in ranges.describe()
    with pytest.raises(ValueError, match="nothing to narrow"):  # the text column alone: bounds (0, 1), a pair
        private_ranges(data.x_train[:, list(exact)], (0.0, 1.0), exact=range(5), **common)


@pytest.mark.parametrize(
    ("exact", "bounds", "message"),
    [
        ((0,), ((-50.0, 100.0), (0.0, 1.0)), "must be \\(0, 1\\)"),
        ((5,), ((-50.0, 100.0), (0.0, 1.0)), "not one of the 2 features"),
        ((-1,), ((-50.0, 100.0), (0.0, 1.0)), "non-negative"),
        ((True,), ((-50.0, 100.0), (0.0, 1.0)), "non-negative"),
        ("1", ((-50.0, 100.0), (0.0, 1.0)), "list of feature indices"),
    ],
)
def test_exact_features_are_one_hot_features_of_some_not_all_features(exact, bounds, message):
    with pytest.raises(ValueError, match=message):
        SynthesisConfig("dpmix", sigma_x=1.0, feature_range=bounds, range_epsilon=0.5, exact_features=exact)


def test_exact_features_are_part_of_a_ranged_release_only_and_of_its_identity_only_when_there_are_some():
    from dpmix_core.experiments.config import identity_synthesis, synthesis_from_dict

    bounds = ((-50.0, 100.0), (0.0, 1.0), (0.0, 1.0))
    plain = SynthesisConfig("dpmix", sigma_x=1.0, feature_range=bounds, exact_features=(2, 1))
    assert plain.exact_features == ()  # no ranges: nothing for them to shape
    ranged = SynthesisConfig("dpmix", sigma_x=1.0, feature_range=bounds, range_epsilon=0.5, exact_features=[2, 1, 2])
    assert ranged.exact_features == (1, 2)
    as_json = json.loads(json.dumps(dataclasses.asdict(ranged)))
    assert synthesis_from_dict(as_json) == ranged
    assert identity_synthesis(as_json)["exact_features"] == [1, 2]
    without = json.loads(json.dumps(dataclasses.asdict(SynthesisConfig("dpmix", sigma_x=1.0, feature_range=bounds))))
    assert "exact_features" not in identity_synthesis(without)  # the key of a release stored before the field


def test_the_cli_leaves_a_tables_one_hot_features_out_of_its_ranges_and_the_card_says_so(tmp_path, capsys):
    from dpmix_core.data import categories_csv

    data = _coloured_pets(tmp_path / "pets.csv", n=1500)
    cats = tmp_path / "categories.csv"
    cats.write_bytes(categories_csv((("colour", COLOURS),)))
    out = tmp_path / "release.csv"
    args = ["synthesize", "--data-file", str(data), "--label-column", "species", "--categories", str(cats)]
    args += ["--feature-range=-50,100", "--mechanism", "poisson", "--l", "8", "--T", "1200", "--target-epsilon", "2"]
    done = _cli(capsys, *args, "--private-ranges", "--out", str(out))
    assert done.returncode == 0, done.stderr
    card_path = tmp_path / "release.card.json"
    card = json.loads(card_path.read_text())
    assert card["parameters"]["exact_features"] == card["feature_ranges"]["exact_features"] == [4, 5, 6, 7, 8]
    assert card["feature_ranges"]["narrowed"] == 4
    assert "The 5 one-hot features of the public categories kept their exact bounds (0, 1)." in card["statement"]
    assert verify_card(card).matches
    edited = json.loads(card_path.read_text())
    edited["feature_ranges"]["exact_features"] = [4, 5]
    assert "the features left at their exact bounds" in verify_card(edited).reason
    train = ["train", "--data-file", str(data), "--label-column", "species", "--categories", str(cats)]
    train += ["--feature-range=-50,100", "--mechanism", "poisson", "--l", "8", "--T", "1200", "--target-epsilon", "8"]
    trained = _cli(capsys, *train, "--private-ranges", "--model", "linear", "--epochs", "5", "--json")
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout)["test_accuracy"] > 0.5  # chance 1/3: read through the same ranges


def test_a_search_on_a_table_with_categories_leaves_its_one_hot_features_out(coloured):
    from dpmix_core.data import with_category_bounds
    from dpmix_core.experiments.best_release import candidate_run
    from dpmix_core.experiments.best_release_jobs import page_search, search_config, search_from_config

    data = coloured.dataset

    common = dict(
        target_epsilon=4.0,
        delta=DELTA,
        mix_degrees=(8,),
        num_points=(600,),
        sigma_ratios=(1.0,),
        model="corrected-lsq",
        selection="pooled",
        own=coloured,
        feature_range=with_category_bounds(LOOSE, feature_names=data.feature_names, categories=data.categories),
    )
    ranged = page_search(**common, range_epsilon=0.4)
    assert ranged.exact_features == coloured.exact_features
    assert search_from_config(json.loads(json.dumps(search_config(ranged)))) == ranged
    run = candidate_run(ranged, ranged.space.candidates()[0], epochs=1)
    assert run.synthesis.exact_features == coloured.exact_features
    plain = page_search(**common)
    assert plain.exact_features == () and "exact_features" not in search_config(plain)


def test_dp_sgd_finds_its_ranges_as_a_release_does_and_keeps_the_first_version_for_stored_runs(coloured):
    from dpmix_core.data import with_category_bounds
    from dpmix_core.experiments.config import RunConfig, run_key
    from dpmix_core.experiments.runner import run_config
    from dpmix_core.synthesis.private_ranges import ROUNDS
    from dpmix_core.training.protocols import protocol_options

    data = coloured.dataset
    bounds = with_category_bounds(LOOSE, feature_names=data.feature_names, categories=data.categories)
    steps = {**protocol_options("linear", method="dp-sgd", own_data=True), "epochs": 1}
    config = RunConfig("dp-sgd", model="linear", dpsgd_epsilon=4.0, feature_range=bounds, **coloured.options, **steps)
    assert config.input_norm == "private-ranges"
    ranges = run_config(config)["dpsgd_ranges"]
    assert ranges["rounds"] == ROUNDS and ranges["exact_features"] == list(coloured.exact_features)
    assert [(ranges["low"][j], ranges["high"][j]) for j in coloured.exact_features] == [(0.0, 1.0)] * 5
    first = dataclasses.replace(config, input_norm="dp-ranges")  # as stored before: 3 rounds over every column
    assert run_key(first) != run_key(config)
    old = run_config(first)["dpsgd_ranges"]
    assert old["rounds"] == 3 and old["exact_features"] == []


def test_the_budgets_ranges_item_takes_its_releases_adjacency():
    from dpmix_core.views.budget import ranges_budget_item

    poisson = MixingRelease.poisson(n=3000, m=16, T=3000, sigma_x=0.3, sigma_y=0.3, clip_x=1, clip_y=1)
    dpmix = MixingRelease.dpmix(n=3000, l=16, T=3000, sigma_x=0.3, sigma_y=0.3, dx=4, dy=3)
    for release, relation in ((poisson, ADD_REMOVE), (dpmix, REPLACE_ONE), (None, REPLACE_ONE)):
        item = ranges_budget_item(epsilon=0.2, delta=DELTA, release=release)
        assert item.relation == relation and item.name == f"private feature ranges (ε = 0.2, {relation})"
        z = range_noise_multiplier(0.2, DELTA, relation)
        assert item.event == ranges_item(z, 10, relation).event  # the ranges a release of that kind publishes
