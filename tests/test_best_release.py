"""Best release for a budget (issue #13 §5): every candidate certified at the target, the choice made on a
validation score of released points (pooled over every release by default, or each release's own), the test
accuracy read only for the chosen run."""

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpmix_core.cli.main import main
from dpmix_core.experiments.best_release import (
    BestReleaseSearch,
    Candidate,
    SearchSpace,
    Trial,
    candidate_run,
    planned_runs,
    pool_held_out,
    pooled_accuracy,
    rank_trials,
    run_search,
    scaled_milestones,
    search_cost,
    search_refusal,
)
from dpmix_core.experiments.presets import estimate_seconds
from dpmix_core.resources.limits import LimitExceeded, Limits

TINY = SearchSpace(mix_degrees=(8, 32), num_points=(300, 600), sigma_ratios=(1.0,))


def _search(**kw) -> BestReleaseSearch:
    base = dict(
        target_epsilon=4.0, dataset="embedded", space=TINY, short_epochs=1, long_epochs=2, finalists=2, device="cpu"
    )
    return BestReleaseSearch(**{**base, **kw})


def _fake_run(val_of, test_of, calls):
    """A stand-in for run_config: validation accuracy from ``val_of(m, T, epochs)``, test from ``test_of``."""

    def run(config):
        syn = config.synthesis
        calls.append(config)
        return {
            "val_accuracy": val_of(syn.l, syn.T, config.epochs),
            "test_accuracy": test_of(syn.l, syn.T, config.epochs),
            "seconds": 0.01,
            "collapsed": False,
            "epsilon": {"pld-poisson": 3.9},
        }

    return run


def test_the_choice_is_the_best_validation_accuracy_and_ignores_the_test_set():
    calls = []
    val = {(8, 300): 0.50, (8, 600): 0.70, (32, 300): 0.60, (32, 600): 0.40}
    # test accuracies rank the candidates the other way round: a choice that looked at them would differ
    run = _fake_run(lambda m, T, e: val[(m, T)] + 0.01 * e, lambda m, T, e: 1.0 - val[(m, T)], calls)
    best = run_search(_search(selection="own"), run=run)
    first = [t for t in best.trials if t.epochs == 1]
    final = [t for t in best.trials if t.epochs == 2]
    assert len(first) == 4 and len(calls) == planned_runs(_search()) == 6
    assert {t.candidate for t in final} == {Candidate(8, 600, 1.0), Candidate(32, 300, 1.0)}  # top 2 of round 1
    assert best.chosen.candidate == Candidate(8, 600, 1.0) and best.chosen.epochs == 2
    assert best.chosen.val_accuracy == max(t.val_accuracy for t in final)
    assert best.test_accuracy == pytest.approx(0.30)  # the chosen run's own test accuracy, not the best one
    assert all(t.certified_epsilon <= 4.0 for t in best.trials)  # real pld-poisson calibrations
    assert all(c.synthesis.target_epsilon is None and c.synthesis.sigma_x > 0 for c in calls)  # calibrated once
    payload = json.loads(json.dumps(best.to_dict(), allow_nan=False))
    assert payload["chosen"]["candidate"] == {"m": 8, "T": 600, "sigma_ratio": 1.0}
    assert all("test_accuracy" not in t for t in payload["trials"])  # only the chosen run's, after the choice


def test_a_closed_form_model_has_no_finalist_round():
    calls = []
    val = {(8, 300): 0.50, (8, 600): 0.70, (32, 300): 0.60, (32, 600): 0.40}
    run = _fake_run(lambda m, T, e: val[(m, T)], lambda m, T, e: 0.9, calls)
    search = _search(selection="own", model="corrected-lsq")
    assert search.finalist_count == 0 and planned_runs(search) == 4  # a longer "training" is the same fit
    best = run_search(search, run=run)
    assert len(calls) == 4 and {c.model for c in calls} == {"corrected-lsq"} and {c.epochs for c in calls} == {1}
    assert best.chosen.candidate == Candidate(8, 600, 1.0)
    assert "among the candidates (closed form" in best.selection_note()
    assert (
        "among the finalists"
        in run_search(
            _search(selection="own"), run=_fake_run(lambda m, T, e: val[(m, T)], lambda m, T, e: 0.9, [])
        ).selection_note()
    )
    cost = search_cost(search)
    assert cost.what == "a search of 4 training runs"
    assert cost.seconds == pytest.approx(
        sum(estimate_seconds(candidate_run(search, c, epochs=1)) for c in TINY.candidates())
    )


def test_selection_cannot_see_a_test_accuracy():
    assert not any("test" in f.name for f in dataclasses.fields(Trial))


def _trial(m, val, eps=0.9, collapsed=False, error=None, T=100):
    return Trial(Candidate(m, T, 1.0), 5, 0.1, 0.1, eps, val, 1.0, collapsed=collapsed, error=error)


def test_rank_trials_keeps_only_certified_learned_scored_trials():
    trials = [
        _trial(1, 0.9, eps=1.01),  # over the target: never chosen, however good
        _trial(2, 0.8, collapsed=True),
        _trial(3, None, error="limit"),
        _trial(4, 0.5),
        _trial(5, 0.7),
        _trial(6, 0.7, T=50),  # a tie goes to the cheaper release
    ]
    ranked = rank_trials(trials, target_epsilon=1.0, selection="own")
    assert [t.candidate.m for t in ranked] == [6, 5, 4]
    assert rank_trials(trials, target_epsilon=1.0) == []  # no pooled score: nothing to rank by default
    pooled = [dataclasses.replace(t, pooled_accuracy=1.0 - (t.val_accuracy or 0.0)) for t in trials]
    assert [t.candidate.m for t in rank_trials(pooled, target_epsilon=1.0)] == [4, 6, 5]


def test_schedule_follows_the_paper_scaled():
    assert scaled_milestones(200) == (80, 120, 160)
    assert scaled_milestones(10) == (4, 6, 8)
    assert scaled_milestones(3) == ()
    run = candidate_run(_search(), Candidate(64, 1000, 2.0), epochs=3)
    assert run.schedule == "constant" and run.model == "scatter-linear" and run.loss == "gkl"
    assert run.synthesis.accountant == "pld-poisson" and run.synthesis.sigma_ratio == 2.0
    assert run.synthesis.features == "scattering" and run.synthesis.l == 64
    assert candidate_run(_search(model="scatter-cnn"), Candidate(64, 1000, 2.0), epochs=10).model == "scatter-cnn"


def test_over_budget_searches_are_refused_before_any_work():
    assert search_refusal(_search()) is None
    assert "over the budget of 5" in search_refusal(_search(max_runs=5))
    assert "min (estimate)" in search_refusal(_search(max_seconds=1.0))
    assert "DPMIX_MAX_MEMORY" in search_refusal(_search(), Limits(max_memory=1000))
    with pytest.raises(LimitExceeded, match="over the budget"):
        run_search(_search(max_runs=5), run=lambda c: pytest.fail("a refused search must not train"))
    too_big = _search(space=SearchSpace(mix_degrees=(8, 4001, 10**6), num_points=(300,)))  # 4,000 records
    assert search_refusal(too_big).startswith("m = 4,001, 1,000,000 is more than the 4,000 training records")
    assert "at most 1" in search_refusal(_search(space=TINY, train_limit=20))  # m = 32 > 20 records
    with pytest.raises(ValueError, match="a point mixes from"):
        run_search(too_big, run=lambda c: pytest.fail("a refused search must not train"))


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(target_epsilon=0.0), "target epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(long_epochs=0), "long_epochs"),
        (dict(short_epochs=3, long_epochs=2), "at least as long"),
        (dict(val_fraction=0.0), "val_fraction"),
        (dict(dataset="nope"), "Unknown dataset"),
        (dict(device="gpu7"), "device must be"),
        (dict(seed=-1), "seed must be"),
        (dict(model="thesis-cnn"), "model must be one of scatter-linear, scatter-cnn, linear"),
    ],
)
def test_bad_settings_are_one_line_value_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        _search(**kw)


@pytest.mark.parametrize(
    "space, message",
    [
        (dict(mix_degrees=()), "at least one"),
        (dict(mix_degrees=(0,)), "positive integers"),
        (dict(num_points=(10, 10)), "twice"),
        (dict(sigma_ratios=(-1.0,)), "lambda"),
    ],
)
def test_bad_grids_are_refused(space, message):
    with pytest.raises(ValueError, match=message):
        SearchSpace(**space)


def test_end_to_end_on_the_embedded_sample(tmp_path, capsys):
    out = tmp_path / "best.json"
    argv = ["best-release", "--dataset", "embedded", "--target-epsilon", "4", "--m", "16", "--T", "500"]
    argv += ["--lambda", "1,2", "--short-epochs", "1", "--long-epochs", "2", "--finalists", "1"]
    assert main([*argv, "--device", "cpu", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    stored = json.loads(out.read_text())
    assert printed["chosen"] == stored["chosen"] and len(stored["trials"]) == 3
    assert all(t["certified_epsilon"] <= 4.0 for t in stored["trials"])
    assert 0.0 <= stored["chosen_test_accuracy"] <= 1.0 and stored["chosen"]["epochs"] == 2
    assert stored["chosen_epsilons"]["pld-poisson"] is not None
    # the default budget covers the search: the two candidates together stay within the target of 4
    assert stored["search"]["budget_covers"] == "search"
    assert stored["chosen"]["certified_epsilon"] < stored["search_epsilon"] <= 4.0 + 1e-9
    assert "within the target 4" in stored["search_epsilon_note"]


def test_budget_for_each_release_reports_the_larger_search_epsilon(tmp_path, capsys):
    argv = ["best-release", "--dataset", "embedded", "--target-epsilon", "4", "--m", "16", "--T", "500"]
    argv += ["--lambda", "1,2", "--short-epochs", "1", "--long-epochs", "1", "--budget-covers", "release"]
    assert main([*argv, "--device", "cpu", "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["search"]["model"] == "scatter-linear"  # the default: DPFMix's linear layer
    # two releases of the same data, each at eps <= 4: together more than either, at most their sum
    assert all(3.9 < t["certified_epsilon"] <= 4.0 for t in stored["trials"])
    assert stored["chosen"]["certified_epsilon"] < stored["search_epsilon"] <= 2 * 4.0 + 1e-9
    assert "only if the choice is made without the private data" in stored["search_epsilon_note"]


def test_cli_model_reaches_every_candidate_run():
    import argparse

    from dpmix_core.cli.best_release import add_best_release_arguments, search_from_args

    parser = argparse.ArgumentParser()
    add_best_release_arguments(parser)
    search = search_from_args(parser.parse_args(["--target-epsilon", "1", "--model", "scatter-cnn"]))
    assert search.model == "scatter-cnn"
    assert {candidate_run(search, c, epochs=2).model for c in search.space.candidates()} == {"scatter-cnn"}
    assert search_from_args(parser.parse_args(["--target-epsilon", "1"])).model == "scatter-linear"


def test_split_budget_is_the_largest_share_whose_composition_fits():
    from dpmix_core.data import load_embedded
    from dpmix_core.experiments.best_release import calibrated_sigmas, composed_epsilon, split_budget

    search = _search(target_epsilon=2.0)
    ds = load_embedded()
    candidates = search.space.candidates()
    t = split_budget(search, candidates, ds)
    assert 2.0 / len(candidates) <= t < 2.0

    def composed(share: float) -> float:
        cal = [calibrated_sigmas(search, c, ds, target_epsilon=share, accountant="rdp-poisson") for c in candidates]
        return composed_epsilon([x[3] for x in cal], search.delta)

    assert composed(t) <= 2.0 < composed(1.02 * t)  # feasible, and within 2 % of the largest feasible share
    assert split_budget(search, candidates[:1], ds) == 2.0
    with pytest.raises(ValueError, match="budget_covers"):
        _search(budget_covers="everything")


def test_composed_epsilon_of_one_release_is_its_rdp_bound_and_grows_with_more():
    from dpmix_core.data import load_embedded
    from dpmix_core.experiments.best_release import calibrated_sigmas, composed_epsilon
    from dpmix_core.privacy.accountants import get_accountant

    search = _search()
    _, _, certified, one = calibrated_sigmas(search, Candidate(16, 500, 1.0), load_embedded())
    *_, two = calibrated_sigmas(search, Candidate(32, 500, 1.0), load_embedded())
    alone = composed_epsilon([one], 1e-5)
    # an RDP bound of the same release: above the exact PLD certificate, at most rdp-poisson's (coarser orders)
    assert certified <= alone <= get_accountant("rdp-poisson").epsilon(one, 1e-5).epsilon * 1.001
    assert composed_epsilon([one, two], 1e-5) > max(alone, composed_epsilon([two], 1e-5))
    with pytest.raises(ValueError, match="at least one"):
        composed_epsilon([], 1e-5)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--target-epsilon", "-1"], "not positive"),
        (["--target-epsilon", "1", "--m", "16,x"], "not a number"),
        (["--target-epsilon", "1", "--lambda", "0"], "not positive"),
        (["--target-epsilon", "1", "--budget-runs", "3"], "over the budget of 3"),
        (["--target-epsilon", "1", "--out", "x.txt"], "must end in .json"),
        (["--target-epsilon", "1", "--long-epochs", "1"], "at least as long"),
        (["--target-epsilon", "1", "--model", "thesis-cnn"], "invalid choice: 'thesis-cnn'"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    assert main(["best-release", "--dataset", "embedded", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- pooled validation (issue #13 leftovers)

K = 3  # classes of the fake held-out points
# the fake-run searches certify each candidate alone (budget_covers="release"): the pooled score does not
# depend on the budget mode, and the budget split's calibrations would triple these tests' time


def _held_out(m: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """Fake held-out points of a release: 10 % of T rows; column 0 is the noisy label's argmax, column 1 the source."""
    rng = np.random.default_rng(m * 100_003 + T)
    labels = rng.integers(0, K, size=round(0.1 * T))
    y = rng.dirichlet(np.ones(K), size=len(labels)) * 0.5
    y[np.arange(len(labels)), labels] += 1.0  # noisy, but its argmax is ``labels``
    x = np.stack([labels, np.full(len(labels), m * 10**6 + T), rng.normal(size=len(labels))], axis=1)
    return x.astype(np.float32), y.astype(np.float32)


def _probe_run(own_of, skill_of, seen):
    """A stand-in for run_with_held_out: own validation ``own_of((m, T))``, a model right on a ``skill_of((m, T))``
    share of any points (by row position), and every array it was asked to predict on recorded in ``seen``."""

    def run(config):
        syn = config.synthesis
        key = (syn.l, syn.T)

        def predict(x):
            seen.append((key, config.epochs, x))
            right = (np.arange(len(x)) % 100) < round(100 * skill_of(key))
            return np.where(right, x[:, 0], (x[:, 0] + 1) % K).astype(np.int64)

        return {
            "val_accuracy": own_of(key),
            "test_accuracy": 0.5,
            "seconds": 0.01,
            "collapsed": False,
            "epsilon": {"pld-poisson": 3.9},
            "held_out": _held_out(*key),
            "predict": predict,
        }

    return run


OWN = {(8, 300): 0.70, (8, 600): 0.50, (32, 300): 0.60, (32, 600): 0.40}  # own splits favour (8, 300)
SKILL = {(8, 300): 0.55, (8, 600): 0.80, (32, 300): 0.60, (32, 600): 0.65}  # the pooled set favours (8, 600)


def test_every_candidate_is_scored_on_the_same_pooled_set_of_all_held_out_points():
    seen = []
    best = run_search(_search(budget_covers="release"), run=_probe_run(OWN.get, SKILL.get, seen))
    assert len(seen) == planned_runs(_search())  # every trained model scored once, finalists included
    pooled = seen[0][2]
    assert all(x is pooled or np.array_equal(x, pooled) for _, _, x in seen)
    expected = np.concatenate([_held_out(c.m, c.T)[0] for c in TINY.candidates()])  # union, grid order
    assert np.array_equal(pooled, expected)
    assert [(c, n) for c, n in best.pooled_sources] == [(c, round(0.1 * c.T)) for c in TINY.candidates()]
    for t in best.trials:  # the pooled score is the model's accuracy on those points, labels = noisy argmax
        right = (np.arange(len(pooled)) % 100) < round(100 * SKILL[(t.candidate.m, t.candidate.T)])
        assert t.pooled_accuracy == pytest.approx(right.mean())
        assert t.val_accuracy == OWN[(t.candidate.m, t.candidate.T)]  # the own score is kept beside it


def test_the_choice_follows_the_pooled_score_by_default_and_the_own_score_on_request():
    pooled = run_search(_search(budget_covers="release"), run=_probe_run(OWN.get, SKILL.get, []))
    assert pooled.chosen.candidate == Candidate(8, 600, 1.0)  # best pooled; worst but one on its own split
    assert {t.candidate for t in pooled.trials if t.epochs == 2} == {Candidate(8, 600, 1.0), Candidate(32, 600, 1.0)}
    own = run_search(_search(budget_covers="release", selection="own"), run=_probe_run(OWN.get, SKILL.get, []))
    assert own.chosen.candidate == Candidate(8, 300, 1.0)
    assert own.chosen.pooled_accuracy is not None  # both columns in either mode
    assert "pooled held-out points of all 4" in pooled.selection_note()
    assert "own held-out points" in own.selection_note()


def test_pooled_selection_without_held_out_points_is_a_clear_error():
    run = _fake_run(lambda m, T, e: 0.5, lambda m, T, e: 0.5, [])
    with pytest.raises(ValueError, match="selection 'own'"):
        run_search(_search(budget_covers="release"), run=run)


def test_pool_held_out_labels_are_the_noisy_argmax_and_empty_is_an_error():
    a, b = Candidate(8, 300, 1.0), Candidate(8, 600, 1.0)
    y_a = np.array([[0.2, 0.9, -0.1], [1.3, 0.1, 0.0]])
    pool = pool_held_out([(a, (np.zeros((2, 2, 2)), y_a)), (b, (np.ones((1, 4)), np.array([[0.0, 0.1, 0.2]])))])
    assert pool.x.shape == (3, 4) and list(pool.labels) == [1, 0, 2] and pool.sources == ((a, 2), (b, 1))
    assert pooled_accuracy(lambda x: np.array([1, 0, 0]), pool) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="classes for"):
        pooled_accuracy(lambda x: np.array([1]), pool)
    with pytest.raises(ValueError, match="empty"):
        pool_held_out([(a, (np.zeros((0, 4)), np.zeros((0, 3))))])
    with pytest.raises(ValueError, match="selection"):
        _search(selection="test")


def test_the_pooled_points_are_part_of_the_memory_estimate():
    small, large = _search(val_fraction=0.1), _search(val_fraction=0.5)
    grown = search_cost(large).memory - search_cost(small).memory
    assert grown == pytest.approx(0.4 * sum(c.T for c in TINY.candidates()) * (81 * 7 * 7 + 10) * 4, rel=0.01)


def test_cli_prints_both_scores_and_the_json_holds_both(tmp_path, capsys):
    out = tmp_path / "best.json"
    # big enough that the candidates learn (1 epoch on 300 points stays at chance, and such a run is collapsed)
    argv = ["best-release", "--dataset", "embedded", "--target-epsilon", "4", "--m", "16", "--T", "1000,2000"]
    argv += ["--lambda", "1", "--short-epochs", "2", "--long-epochs", "2", "--budget-covers", "release"]
    argv += ["--device", "cpu", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "pooled held-out points of every release" in printed and "own held-out points" in printed
    assert "pooled val.*" in printed and "own val." in printed  # the trial table, the ranking column starred
    stored = json.loads(out.read_text())
    assert stored["search"]["selection"] == "pooled" and "pooled held-out points of all 2" in stored["selection"]
    assert [p["points"] for p in stored["pooled_validation"]] == [100, 200]
    for t in stored["trials"]:
        assert 0.0 <= t["pooled_accuracy"] <= 1.0 and 0.0 <= t["val_accuracy"] <= 1.0
    learned = [t for t in stored["trials"] if not t["collapsed"]]  # a collapsed model is never chosen
    best = max(learned, key=lambda t: (t["pooled_accuracy"], -t["candidate"]["T"]))
    assert stored["chosen"] == best


@settings(max_examples=50)
@given(
    power=st.floats(0.2, 3.0),
    scale=st.floats(0.05, 20.0),
    target=st.floats(0.1, 10.0),
    n=st.integers(2, 64),
)
def test_largest_feasible_is_feasible_within_one_percent_and_cheaper_than_bisection(power, scale, target, n):
    """For f(t) = scale * (n t / target)^power (a share's composed epsilon, near a power law), from the bracket
    [target / n, target] that split_budget starts with."""
    from dpmix_core.experiments.best_release import largest_feasible

    calls = []

    def f(t: float) -> float:
        calls.append(t)
        return scale * (n * t / target) ** power

    lo, hi = target / n, target
    assume(f(lo) <= target < f(hi))
    calls.clear()
    t = largest_feasible(f, target, lo, f(lo), hi, f(hi))
    assert lo <= t < hi and f(t) <= target < f(t * 1.01 * 1.0001)
    bisection_steps = math.ceil(math.log2(math.log(hi / lo) / math.log(1.01)))
    assert len(calls) - 2 <= bisection_steps


def test_largest_feasible_refuses_a_bracket_that_does_not_hold_the_target():
    from dpmix_core.experiments.best_release import largest_feasible

    with pytest.raises(ValueError, match="needs f\\(lo\\) <= target < f\\(hi\\)"):
        largest_feasible(lambda t: t, 1.0, 2.0, 2.0, 4.0, 4.0)
