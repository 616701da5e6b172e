"""Private feature ranges for a table's release (synthesis.private_ranges): privacy of the ranges, the composition the
card states, the calibration to a target, the release and its test map, the card's check, and the CLI."""

from __future__ import annotations

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
