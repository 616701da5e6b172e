"""Best release for a budget on one's own file, and the private choice (issue #13 §5 on a table): the even held-out
rows choose through the exponential mechanism, the odd ones are reported, and the target covers both."""

import argparse
import dataclasses
import json

import numpy as np
import pytest
from own_files import write_pets

from dpmix_core.cli.best_release import add_best_release_arguments, search_from_args
from dpmix_core.cli.main import main
from dpmix_core.data import OWN_DATA
from dpmix_core.experiments.best_release import (
    PRIVATE_SHARE,
    BestReleaseSearch,
    Candidate,
    SearchSpace,
    Trial,
    candidate_run,
    chosen_collapse,
    class_predictor,
    default_space,
    even_row_count,
    odd_row_accuracy,
    own_data_space,
    planned_runs,
    private_choice,
    release_collapse,
    run_search,
    why_none,
)
from dpmix_core.experiments.run_data import open_data_file
from dpmix_core.experiments.runner import run_config, run_release
from dpmix_core.mechanisms.selection import SelectionRelease

TINY = SearchSpace(mix_degrees=(8, 32), num_points=(300, 600), sigma_ratios=(1.0,))
ROWS = 400  # test rows of the fake runs


def _search(**kw) -> BestReleaseSearch:
    base = dict(
        target_epsilon=4.0,
        dataset="embedded",
        space=TINY,
        short_epochs=1,
        long_epochs=2,
        finalists=2,
        device="cpu",
        selection="private",
        budget_covers="release",  # each candidate alone: the budget split's calibrations would triple the time
    )
    return BestReleaseSearch(**{**base, **kw})


def _rows(even: float, odd: float) -> np.ndarray:
    """Correct / wrong on ROWS test rows: an ``even`` share of the even rows right, an ``odd`` share of the odd."""
    idx = np.arange(ROWS)
    half = idx // 2
    return np.where(idx % 2 == 0, half < even * ROWS / 2, half < odd * ROWS / 2)


# the even rows favour (32, 300); the odd rows, the released points and the test accuracy all favour (8, 600)
EVEN = {(8, 300): 0.50, (8, 600): 0.55, (32, 300): 0.90, (32, 600): 0.60}
ODD = {(8, 300): 0.40, (8, 600): 0.95, (32, 300): 0.70, (32, 600): 0.30}


def _run(calls):
    def run(config):
        syn = config.synthesis
        key = (syn.l, syn.T)
        calls.append(config)
        return {
            "val_accuracy": ODD[key],
            "test_accuracy": ODD[key],
            "seconds": 0.01,
            "collapsed": False,
            "epsilon": {"pld-poisson": 3.9},
            "test_correct": _rows(EVEN[key] + 0.01 * config.epochs, ODD[key]),
        }

    return run


def test_the_private_choice_reads_the_even_rows_and_reports_the_odd_ones():
    calls = []
    search = _search(selection_epsilon=400.0)  # noise far below the gaps: the choice is the best even-row count
    best = run_search(search, run=_run(calls))
    assert len(calls) == planned_runs(search) == 6
    finalists = {t.candidate for t in best.trials if t.epochs == 2}
    assert finalists == {Candidate(32, 300, 1.0), Candidate(32, 600, 1.0)}  # the two best even-row counts
    assert best.chosen.candidate == Candidate(32, 300, 1.0) and best.chosen.epochs == 2
    assert best.test_rows == "odd" and best.test_accuracy == pytest.approx(0.70)  # its odd rows, not the best odd
    payload = json.loads(json.dumps(best.to_dict(), allow_nan=False))
    assert payload["chosen_test_rows"] == "odd" and payload["selection_epsilon"] == 400.0
    assert all("test" not in key for t in payload["trials"] for key in t)  # no candidate's score is published
    assert [p["k"] for p in payload["private_picks"]] == [2, 1]
    assert [p["epsilon"] for p in payload["private_picks"]] == pytest.approx([400 / 3, 400 / 3])
    assert "even rows of the held-out test split" in best.selection_note()
    assert "top-2 of 4" in best.selection_note() and "the best of 2" in best.selection_note()


def test_a_small_selection_epsilon_is_a_coin_toss_and_the_seed_fixes_it():
    trials = [_trial(m, T) for m, T in EVEN]
    correct = [_rows(EVEN[key], ODD[key]) for key in EVEN]
    toss = SelectionRelease(4, 1, 1e-4)  # Gumbel noise of scale 2e4 counts swamps 200 rows
    chosen = [private_choice(trials, correct, toss, s)[0].candidate for s in range(40)]
    assert len(set(chosen)) == 4  # nearly uniform: all four in 40 draws (each missed with probability < 1e-4)
    assert private_choice(trials, correct, toss, 3) == private_choice(trials, correct, toss, 3)
    sure = SelectionRelease(4, 2, 400.0)
    assert [t.candidate for t in private_choice(trials, correct, sure, 0)] == [
        Candidate(32, 300, 1.0),
        Candidate(32, 600, 1.0),
    ]
    with pytest.raises(ValueError, match="4 trials and 3 score rows"):
        private_choice(trials, correct[:3], toss, 0)


def _trial(m, T):
    return Trial(Candidate(m, T, 1.0), 1, 0.1, 0.1, 3.9, 0.5, 1.0)


def test_a_closed_form_model_makes_one_pick_with_the_whole_selection_epsilon():
    search = _search(model="corrected-lsq", selection_epsilon=300.0)
    assert search.selection_picks(4)[0].epsilon == 300.0 and len(search.selection_picks(4)) == 1
    best = run_search(search, run=_run([]))
    assert best.chosen.candidate == Candidate(32, 300, 1.0) and [p.k for p in best.picks] == [1]
    assert "closed form: no finalist round" in best.selection_note()


def test_the_target_covers_the_releases_and_the_choice():
    search = _search(budget_covers="search", target_epsilon=3.0)
    assert search.selection_epsilon == pytest.approx(PRIVATE_SHARE * 3.0)
    assert search.release_budget == pytest.approx(3.0 - search.selection_epsilon)
    best = run_search(search, run=_run([]))
    assert best.release_epsilon <= search.release_budget * (1 + 1e-9)
    assert best.search_epsilon == pytest.approx(best.release_epsilon + search.selection_epsilon)
    assert best.search_epsilon <= 3.0 + 1e-9
    note = best.privacy_note()
    assert "within the target 3" in note and "exponential mechanism, delta 0" in note
    per_release = run_search(_search(target_epsilon=3.0), run=_run([]))  # each candidate at the whole target
    assert per_release.search_epsilon == pytest.approx(per_release.release_epsilon + 0.3)
    assert per_release.search_epsilon > 3.0 and "only if the choice is made without" in per_release.privacy_note()


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(selection="pooled", selection_epsilon=0.5), "selection_epsilon is the private choice's budget"),
        (dict(budget_covers="search", selection_epsilon=4.0), "leaves nothing of the target"),
        (dict(selection_epsilon=-1.0), "selection_epsilon must be a positive"),
        (dict(dataset=OWN_DATA), "give data_file"),
        (dict(data_file="x.csv", data_sha256="0" * 64), "give data_file"),
    ],
)
def test_bad_settings_are_one_line_value_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        _search(**kw)


def test_a_run_without_test_predictions_cannot_be_chosen_privately():
    def run(config):
        return {"val_accuracy": 0.5, "test_accuracy": 0.5, "seconds": 0.0, "collapsed": False, "epsilon": {}}

    with pytest.raises(ValueError, match="needs each run's predictions on the test rows"):
        run_search(_search(), run=run)


def test_even_and_odd_rows():
    correct = np.array([1, 0, 1, 1, 0, 1, 1], dtype=bool)
    assert even_row_count(correct) == 3  # rows 0, 2, 4, 6: 1, 1, 0, 1
    assert odd_row_accuracy(correct) == pytest.approx(2 / 3)  # rows 1, 3, 5: 0, 1, 1
    with pytest.raises(ValueError, match="fewer than 2"):
        odd_row_accuracy(np.array([True]))


def test_the_default_grid_is_the_papers_from_mnists_size_up():
    assert default_space(60_000) == SearchSpace() == SearchSpace((64, 256), (10000, 60000), (0.5, 1.0))
    assert default_space(4000) == own_data_space(4000) == SearchSpace((16, 64), (4000, 16000), (0.5, 1.0))
    assert _parse(["--target-epsilon", "1"]).space == SearchSpace()  # mnist
    assert _parse(["--target-epsilon", "1", "--dataset", "embedded"]).space == own_data_space(4000)
    assert _parse(["--target-epsilon", "1", "--train-limit", "2000"]).space == own_data_space(2000)
    assert _parse(["--target-epsilon", "1", "--dataset", "embedded", "--m", "8"]).space.mix_degrees == (8,)


def test_own_data_space_scales_with_the_records():
    grid = own_data_space(16_000)
    assert grid.mix_degrees == (16, 64) and grid.num_points == (16_000, 64_000) and grid.sigma_ratios == (0.5, 1.0)
    assert own_data_space(100).mix_degrees == (16,)  # m = 64 would mix a quarter of 100 records into every point
    assert own_data_space(20).mix_degrees == (5,)
    with pytest.raises(ValueError, match="at least 8"):
        own_data_space(7)


def test_a_search_on_a_file_mixes_its_columns_and_defaults_to_the_private_choice(tmp_path):
    own = open_data_file(write_pets(tmp_path / "pets.csv"), label_column="species")
    options = {k: v for k, v in own.options.items() if k != "dataset"}
    search = BestReleaseSearch(
        target_epsilon=4.0, dataset=OWN_DATA, space=own_data_space(own.dataset.n_train), device="cpu", **options
    )
    assert search.model == "corrected-lsq" and search.selection == "private" and search.selection_epsilon == 0.4
    run = candidate_run(search, search.space.candidates()[0], epochs=1)
    assert run.dataset == OWN_DATA and run.data_sha256 == own.options["data_sha256"]
    assert run.synthesis.features == "pixels" and run.synthesis.mechanism == "poisson" and run.features != "scattering"
    with pytest.raises(ValueError, match="mixes its columns"):
        BestReleaseSearch(target_epsilon=4.0, dataset=OWN_DATA, model="scatter-linear", **options)
    assert BestReleaseSearch(target_epsilon=4.0, dataset="embedded").selection == "pooled"  # as documented


def test_the_pooled_score_reaches_a_standardised_model_through_its_input_map(tmp_path):
    """The linear model on one's file standardises its inputs: another release's points, as released, go through
    the run's own map before its model sees them."""
    own = open_data_file(write_pets(tmp_path / "pets.csv"), label_column="species")
    options = {k: v for k, v in own.options.items() if k != "dataset"}
    search = BestReleaseSearch(
        target_epsilon=4.0, dataset=OWN_DATA, model="linear", space=SearchSpace((16,), (480,), (1.0,)), **options
    )
    keep: dict = {}
    run_config(candidate_run(search, search.space.candidates()[0], epochs=2), keep=keep)
    raw, mapped = keep["x_val_raw"], keep["x_val"]
    assert not np.allclose(raw, mapped) and np.allclose(keep["input_map"](raw), mapped, atol=1e-6)
    classes = class_predictor(keep["model"], keep["device"], keep["input_map"])(raw)
    unmapped = class_predictor(keep["model"], keep["device"])(mapped)
    assert np.array_equal(classes, unmapped)


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_best_release_arguments(parser)
    return search_from_args(parser.parse_args(argv))


def test_cli_on_a_file_end_to_end(tmp_path, capsys):
    data = write_pets(tmp_path / "pets.csv", n=900)
    out = tmp_path / "best.json"
    argv = ["best-release", "--data-file", str(data), "--label-column", "species", "--target-epsilon", "4"]
    assert main([*argv, "--m", "8,16", "--T", "700", "--lambda", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "odd held-out rows" in printed and "exponential mechanism" in printed
    stored = json.loads(out.read_text())
    assert stored["search"]["dataset"] == OWN_DATA and stored["search"]["model"] == "corrected-lsq"
    assert stored["chosen_test_rows"] == "odd" and 0.0 <= stored["chosen_test_accuracy"] <= 1.0
    assert stored["search_epsilon"] <= 4.0 + 1e-9 and stored["selection_epsilon"] == pytest.approx(0.4)
    assert len(stored["trials"]) == 2 and stored["chosen_test_accuracy"] > 0.45  # chance: 1/3
    defaults = _parse(["--target-epsilon", "1", "--data-file", str(data), "--label-column", "species"])
    n = open_data_file(data, label_column="species").dataset.n_train
    assert defaults.space == own_data_space(n)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--dataset", "embedded"], "--dataset and --data-file: give one"),
        (["--model", "scatter-linear"], "mixes its columns"),
        (["--selection", "pooled", "--selection-epsilon", "0.5"], "selection_epsilon is the private choice"),
        (["--label-column", "nope"], "nope"),
    ],
)
def test_cli_bad_input_on_a_file_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, extra, message):
    data = write_pets(tmp_path / "pets.csv")
    monkeypatch.chdir(tmp_path)
    argv = ["best-release", "--target-epsilon", "4", "--data-file", str(data), "--label-column", "species"]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pets.csv"]


def test_cli_file_options_need_a_file(capsys):
    assert main(["best-release", "--target-epsilon", "4", "--dataset", "embedded", "--feature-range", "0,1"]) == 2
    assert "only with --data-file" in capsys.readouterr().err


def test_a_candidate_is_collapsed_by_its_release_never_by_the_test_split():
    calls = []
    base = _run(calls)

    def run(config):
        result = base(config)
        key = (config.synthesis.l, config.synthesis.T)
        # the run's own flag reads the test split: it must not reach the choice; the release's does
        return {**result, "collapsed": key == (32, 300), "release_collapse": "x" if key == (8, 300) else None}

    best = run_search(_search(selection_epsilon=400.0, finalists=1), run=run)
    collapsed = {t.candidate for t in best.trials if t.collapsed}
    assert collapsed == {Candidate(8, 300, 1.0)}
    assert best.chosen.candidate == Candidate(32, 300, 1.0)  # still chosen: its run's test-based flag was not read
    assert best.warning is None  # 70 % on the odd rows, far above their majority class


def test_release_collapse_reads_the_held_out_points_and_the_history():
    y_val = np.eye(3)[np.arange(300) % 3] + 0.1  # noisy labels whose argmax is balanced
    flat = [{"loss": 1.1, "val_accuracy": 0.34}, {"loss": 1.1, "val_accuracy": 0.34}]
    learning = [{"loss": 1.1, "val_accuracy": 0.5}, {"loss": 0.6, "val_accuracy": 0.8}]
    assert "release's held-out points" in release_collapse(learning, y_val, np.zeros(300))  # one class for all
    assert release_collapse(learning, y_val, np.arange(300) % 3) is None
    assert "majority-class rate" in release_collapse(flat, y_val, np.where(np.arange(300) < 200, 0, 1))
    assert release_collapse(flat, y_val[:0], np.zeros(0)) is None


def test_the_chosen_model_at_chance_on_the_reported_rows_is_said_so():
    labels = np.repeat([0, 1, 2], [60, 20, 20])
    assert "no better than always predicting the most frequent class" in chosen_collapse(labels == 0, labels)
    assert chosen_collapse(np.ones(100, dtype=bool), labels) is None


def test_why_none_names_the_causes_and_their_cures():
    flat = Trial(Candidate(8, 300, 1.0), 1, 0.1, 0.1, 3.9, 0.3, 1.0, collapsed=True)
    failed = Trial(Candidate(32, 300, 1.0), 0, None, None, None, None, 0.0, error="no sigma reaches it")
    text = why_none([flat, failed], own_data=True)
    assert "1 of 2 not calibrated or not run (no sigma reaches it)" in text
    assert "1 of 2 never left the constant predictor" in text and "public bounds closer" in text
    assert "public bounds" not in why_none([flat])


def test_run_release_makes_the_runs_own_release_again(tmp_path):
    own = open_data_file(write_pets(tmp_path / "pets.csv"), label_column="species")
    options = {k: v for k, v in own.options.items() if k != "dataset"}
    search = BestReleaseSearch(
        target_epsilon=4.0, dataset=OWN_DATA, space=SearchSpace((16,), (480,), (1.0,)), device="cpu", **options
    )
    config = candidate_run(search, search.space.candidates()[0], epochs=1, sigma_x=0.2, sigma_y=0.2)
    keep: dict = {}
    run_config(config, keep=keep)
    again = run_release(config)
    assert np.array_equal(again.data.x, keep["synthesis"].data.x) and np.array_equal(
        again.data.y, keep["synthesis"].data.y
    )
    other = run_release(dataclasses.replace(config, seed=1))
    assert not np.array_equal(other.data.x, again.data.x)  # the seed is what makes it the same release
    with pytest.raises(ValueError, match="mixing run"):
        run_release(dataclasses.replace(config, method="non-private", synthesis=None))


def test_cli_writes_the_chosen_release_with_a_card_that_says_it_was_chosen(tmp_path, capsys):
    data = write_pets(tmp_path / "pets.csv", n=900)
    rel = tmp_path / "best.npz"
    argv = ["best-release", "--data-file", str(data), "--label-column", "species", "--target-epsilon", "4"]
    argv += ["--m", "8,16", "--T", "700", "--lambda", "1", "--release-out", str(rel), "--json"]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    card = json.loads((tmp_path / "best.card.json").read_text())
    assert payload["release_file"] == str(rel) and rel.is_file()
    assert card["search"]["search_epsilon"] == pytest.approx(payload["search_epsilon"])
    assert payload["search_epsilon"] <= 4.0 + 1e-9
    assert card["caveats"][0].startswith("This release was chosen by best-release among 2 candidate releases")
    chosen = payload["chosen"]
    assert card["parameters"]["sigma_x"] == pytest.approx(chosen["sigma_x"])
    assert card["parameters"]["l"] == chosen["candidate"]["m"] and card["dataset"]["held_out"]
    assert main(["verify", str(rel)]) == 0  # the card's epsilons follow from its parameters
    capsys.readouterr()
    assert main(["train", "--release", str(rel), "--data-file", str(data), "--model", "linear", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert 0.0 <= trained["test_accuracy"] <= 1.0


@pytest.mark.parametrize(
    ("name", "message"), [("best.json", "must end in .npz or .csv"), ("nowhere/best.npz", "does not exist")]
)
def test_cli_refuses_a_bad_release_path_before_any_work(tmp_path, capsys, monkeypatch, name, message):
    data = write_pets(tmp_path / "pets.csv")
    monkeypatch.chdir(tmp_path)
    argv = ["best-release", "--data-file", str(data), "--label-column", "species", "--target-epsilon", "4"]
    assert main([*argv, "--release-out", name]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pets.csv"]


def test_private_ranges_are_one_more_release_the_target_covers(tmp_path, capsys):
    """Loose bounds narrowed privately: every candidate scales with the same ranges, the search's composition counts
    them once within the target, the chosen release's card states both, and the held-out records score better."""
    data = write_pets(tmp_path / "pets.csv", n=1500)
    argv = ["best-release", "--data-file", str(data), "--label-column", "species", "--target-epsilon", "4"]
    argv += ["--feature-range=-50,100", "--m", "8,16", "--T", "1200", "--lambda", "1"]
    plain_out, ranged_out = tmp_path / "plain.json", tmp_path / "ranged.json"
    assert main([*argv, "--out", str(plain_out)]) == 0
    assert main([*argv, "--private-ranges", "--out", str(ranged_out), "--release-out", str(tmp_path / "r.npz")]) == 0
    capsys.readouterr()
    plain, ranged = json.loads(plain_out.read_text()), json.loads(ranged_out.read_text())
    assert ranged["search"]["range_epsilon"] == pytest.approx(0.4) and plain["search"]["range_epsilon"] is None
    assert (
        ranged["search_epsilon"] <= 4.0 + 1e-9 and "the feature ranges every candidate" in ranged["search_epsilon_note"]
    )
    # the ranges take part of the releases' budget: each candidate's own epsilon is smaller than without them
    assert ranged["trials"][0]["certified_epsilon"] < plain["trials"][0]["certified_epsilon"]
    assert ranged["chosen_test_accuracy"] > plain["chosen_test_accuracy"] + 0.15
    card = json.loads((tmp_path / "r.card.json").read_text())
    assert card["epsilons"][0]["accountant"] == "pld-composition" and "feature_ranges" in card
    assert card["search"]["search_epsilon"] == pytest.approx(ranged["search_epsilon"])


def test_private_ranges_in_a_search_need_a_file_bounds_and_room_in_the_target(tmp_path):
    with pytest.raises(ValueError, match="give both"):
        _search(range_epsilon=0.5)
    data = write_pets(tmp_path / "pets.csv", n=300)
    own = open_data_file(data, label_column="species")
    file_fields = {k: v for k, v in own.options.items() if k != "dataset"}
    with pytest.raises(ValueError, match="leaves nothing of the target"):
        _search(
            dataset=OWN_DATA, feature_range=(-50.0, 100.0), range_epsilon=3.8, budget_covers="search", **file_fields
        )
