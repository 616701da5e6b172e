"""The best ℓ (or T) of each series, chosen on the even test rows and read on the odd ones (experiments.best_axis),
the paper's best-value numbers a spec carries (spec.PublishedBest), and where a user sees them (page, report)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmix_core.experiments.best_axis import AxisPick, best_axis_notes, best_axis_values
from dpmix_core.experiments.presets import get_preset
from dpmix_core.experiments.results import certified_epsilon
from dpmix_core.experiments.spec import PublishedBest, SweepSpec
from dpmix_core.experiments.trade_offs import best_axis_table, reproduction_verdict

SPEC = get_preset("dpfmix-table1-m-quick")
POISSON = "Poisson / gdp-clt, eps = 1"
UNIFORM = "uniform / rdp-wor, eps = 1"


def _card(*entries: tuple[str, float, bool]) -> dict:
    return {"epsilons": [{"accountant": a, "epsilon": e, "upper_bound": bound} for a, e, bound in entries]}


# at m = 16 the CLT's nominal eps = 1 is a PLD-certified 1.52 (DPFMix Table 1's release): the table must say so
CARD16 = _card(("gdp-clt", 1.0, False), ("pld-poisson", 1.522, True), ("rdp-poisson", 2.527, True))
CARD64 = _card(("gdp-clt", 1.0, False), ("pld-poisson", 1.023, True), ("rdp-poisson", 1.106, True))


def _row(series: str, l: int, halves, *, accuracy=None, collapsed=False, card=None, seed=0) -> dict:
    cfg = next(r for r in SPEC.runs() if r.label == series and r.synthesis.l == l).replace(seed=seed)
    if accuracy is None:
        accuracy = sum(halves) / 2
    result = {"test_accuracy": accuracy, "test_accuracy_halves": halves, "collapsed": collapsed}
    if card is not None:
        result["privacy_card"] = card
    return {"config": cfg.to_dict(), "result": result}


RUNS = [
    _row(POISSON, 16, [0.80, 0.81], card=CARD16),
    _row(POISSON, 64, [0.76, 0.90], card=CARD64),  # best on the whole test set and on the odd rows, not on the even
    _row(POISSON, 32, None, accuracy=0.99, card=CARD64),  # no halves: left out
    _row(POISSON, 128, [0.95, 0.95], collapsed=True, card=CARD64),  # collapsed: no result, never chosen
]


def test_the_value_is_chosen_on_the_even_rows_and_read_on_the_odd_ones():
    (pick,) = best_axis_values(RUNS, "l")
    assert (pick.series, pick.chosen, pick.accuracy, pick.runs) == (POISSON, 16, 0.81, 1)
    assert (pick.tuned, pick.tuned_accuracy) == (64, pytest.approx(0.83))  # what a search on the test set reports
    assert (pick.epsilon, pick.accountant) == (1.522, "pld-poisson")  # the smallest rigorous bound, not the CLT's
    assert pick.values_compared == 3 and pick.std is None  # m = 32 has no halves; one seed: no spread


def test_seeds_are_averaged_before_the_choice():
    """A second seed at m = 16 pulls its even-row mean below m = 64's: m = 64 is chosen, its odd rows reported."""
    (pick,) = best_axis_values([*RUNS, _row(POISSON, 16, [0.70, 0.71], seed=1, card=CARD16)], "l")
    assert (pick.chosen, pick.accuracy, pick.epsilon) == (64, 0.90, 1.023)
    more = [_row(POISSON, 64, [0.85, h], seed=s, card=CARD64) for s, h in ((1, 0.70), (2, 0.86))]
    (pick,) = best_axis_values([*RUNS, *more], "l")
    assert pick.chosen == 64 and pick.runs == 3
    assert pick.accuracy == pytest.approx(statistics.mean([0.90, 0.70, 0.86]))
    assert pick.std == pytest.approx(statistics.stdev([0.90, 0.70, 0.86]))


def test_a_series_whose_every_value_collapsed_says_so_and_series_are_in_name_order():
    dead = [_row(UNIFORM, m, [0.1135, 0.1135], collapsed=True, card=_card(("rdp-wor", 1.0, True))) for m in (16, 64)]
    (pick,) = best_axis_values(dead, "l")
    assert pick.collapsed and pick.chosen is None and pick.accuracy is None
    picks = best_axis_values(dead + RUNS, "l")
    assert [p.series for p in picks] == [POISSON, UNIFORM]
    table = best_axis_table(picks)
    assert table["verdict"].tolist() == ["", "every value collapsed (no result)"]


def test_a_tie_goes_to_the_smaller_value_and_an_approximation_alone_certifies_nothing():
    runs = [_row(UNIFORM, m, [0.6, 0.5 + m / 1000], card=_card(("gdp-clt", 0.5, False))) for m in (64, 16, 32)]
    (pick,) = best_axis_values(runs, "l")
    assert (pick.chosen, pick.accuracy) == (16, pytest.approx(0.516))
    assert pick.epsilon is None and pick.accountant is None
    assert certified_epsilon({}) is None
    assert certified_epsilon({"privacy_card": _card(("a", math.inf, True), ("b", 3.0, True))}) == (3.0, "b")


def test_only_axes_a_data_holder_tunes_are_read_and_one_value_is_no_choice():
    assert best_axis_values(RUNS, "sigma") == () and best_axis_values(RUNS, "target_epsilon") == ()
    assert best_axis_values(RUNS, None) == ()
    assert best_axis_values([RUNS[0]], "l") == ()  # one value: nothing to choose
    assert best_axis_values([RUNS[2]], "l") == ()  # no halves at all
    with pytest.raises(ValueError, match="two axis values"):
        AxisPick(POISSON, "l", 1)
    with pytest.raises(ValueError, match="along l or T"):
        AxisPick(POISSON, "sigma", 3)
    with pytest.raises(ValueError, match="accuracy"):
        AxisPick(POISSON, "l", 3, chosen=16.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from((16, 32, 64, 128, 256)),
            st.floats(0.05, 0.95),
            st.floats(0.05, 0.95),
            st.booleans(),
        ),
        min_size=2,
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_the_pick_is_the_best_even_mean_and_does_not_depend_on_the_order_of_the_runs(cells, rng):
    runs = [_row(POISSON, m, [e, o], collapsed=dead, seed=i) for i, (m, e, o, dead) in enumerate(cells)]
    picks = best_axis_values(runs, "l")
    values = {m for m, *_ in cells}
    if len(values) < 2:
        assert picks == ()
        return
    (pick,) = picks
    shuffled = list(runs)
    rng.shuffle(shuffled)
    assert best_axis_values(shuffled, "l") == picks
    # an independent reading: per m, the runs that learned (all of them where every run collapsed: no result)
    learned = {m: [(e, o) for mm, e, o, dead in cells if mm == m and not dead] for m in values}
    alive = {m: v for m, v in learned.items() if v}
    if not alive:
        assert pick.collapsed
        return
    even = {m: statistics.mean(e for e, _ in v) for m, v in alive.items()}
    top = max(even.values())
    assert pick.chosen == min(m for m, v in even.items() if v == top)
    assert pick.accuracy == pytest.approx(statistics.mean(o for _, o in alive[pick.chosen]))
    assert pick.runs == len(alive[pick.chosen])


def test_the_published_best_is_compared_with_the_honest_pick():
    paper = PublishedBest(POISSON, 0.7919, "DPFMix Table 1 (MNIST), best m")
    (pick,) = best_axis_values(RUNS, "l", published=(paper,))
    assert pick.gap == pytest.approx(100 * (0.81 - 0.7919))
    row = best_axis_table((pick,)).iloc[0]
    assert (row["ℓ chosen (even rows)"], row["ours, odd rows (%)"], row["published best (%)"]) == (16, 81.0, 79.19)
    assert row["verdict"] == "reproduced" and row["certified ε of the chosen release"] == 1.53  # rounded up
    assert [reproduction_verdict(g) for g in (None, 3.0, -3.01, 3.01)] == [
        "pending",
        "reproduced",
        "not reproduced",
        "above the paper",
    ]
    plain = best_axis_table(best_axis_values(RUNS, "l"))  # no paper's number: no empty columns
    assert "published best (%)" not in plain.columns and "verdict" not in plain.columns


def test_dpfmix_table1_m_carries_table_1_as_each_cells_best_m():
    """DPFMix Table 1 (MNIST) prints the best m of each (sampling, eps) cell; the numbers as the paper prints them."""
    printed = {
        "uniform / rdp-wor": (20.40, 47.63, 67.33, 73.75),
        "Poisson / gdp-clt": (79.19, 82.71, 84.09, 85.71),
        "uniform, Cx = Cy = 1 / rdp-wor": (20.40, 47.63, 67.33, 73.75),
    }
    for name in ("dpfmix-table1-m", "dpfmix-table1-m-quick"):
        best = {b.series: round(100 * b.accuracy, 2) for b in get_preset(name).published_best}
        assert best == {f"{s}, eps = {e:g}": acc for s, row in printed.items() for e, acc in zip((1, 2, 4, 8), row)}


def test_published_best_round_trips_and_is_checked():
    spec = get_preset("dpfmix-table1-m")
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    assert "published_best" not in get_preset("dpfmix-table1").to_dict()  # specs without keep their stored JSON
    d = spec.to_dict()
    with pytest.raises(ValueError, match="unknown series 'nope'"):
        SweepSpec.from_dict({**d, "published_best": [{"series": "nope", "accuracy": 0.5}]})
    with pytest.raises(ValueError, match="fraction"):
        SweepSpec.from_dict({**d, "published_best": [{"series": POISSON, "accuracy": 79.19}]})
    with pytest.raises(ValueError, match="each published best is a table"):
        SweepSpec.from_dict({**d, "published_best": [{"series": POISSON, "accuracy": 0.5, "value": 64}]})
    with pytest.raises(ValueError, match="not 'target_epsilon'"):
        SweepSpec.from_dict(
            {
                **get_preset("dpfmix-table1").to_dict(),
                "published_best": [{"series": "Poisson / gdp-clt", "accuracy": 0.8}],
            }
        )


def test_a_narrowed_or_moved_sweep_keeps_the_papers_best_only_where_it_applies():
    from dpmix_core.experiments.trade_offs import narrow_spec, with_dataset

    spec = get_preset("dpfmix-table1-m")
    narrowed = narrow_spec(spec, series=[POISSON], values=[16, 64])
    assert [b.series for b in narrowed.published_best] == [POISSON]
    assert with_dataset(spec, "fashion-mnist").published_best == ()  # MNIST's Table 1 is no reference for Fashion
    assert with_dataset(spec, "mnist", "/elsewhere").published_best == spec.published_best


def test_a_series_whose_certified_epsilon_moves_along_the_axis_says_its_best_value_is_another_privacy_level():
    """The CLT's nominal eps = 1 is certified at 1.52 at m = 16 and 1.02 at m = 64 (DPFMix Table 1's Poisson row):
    the best m is then also a privacy level; a series calibrated by a rigorous bound has one eps and no note."""
    (pick,) = best_axis_values(RUNS, "l")
    assert pick.epsilon_span == (1.023, 1.522)
    (note,) = best_axis_notes((pick,), "ℓ")
    assert note.startswith(f"“{POISSON}”: its certified ε runs from 1.02 to 1.52 across ℓ")
    flat = [_row(UNIFORM, m, [0.5, 0.5], card=_card(("rdp-wor", 0.99999 + m * 1e-7, True))) for m in (16, 64)]
    (flat_pick,) = best_axis_values(flat, "l")
    assert flat_pick.epsilon_span is None and best_axis_notes((flat_pick,), "ℓ") == []
    # several such series (DPFMix Table 1's four Poisson cells): one sentence, each series with its range
    other = [
        _row("Poisson / gdp-clt, eps = 8", m, [0.8, 0.8], card=_card(("pld-poisson", e, True)))
        for m, e in ((16, 10.5), (64, 9.45))
    ]
    picks = best_axis_values([*RUNS, *other, *flat], "l")
    (note,) = best_axis_notes(picks, "ℓ")
    assert note.startswith("In 2 series the certified ε moves across ℓ")
    assert f"“{POISSON}” 1.02 to 1.52; “Poisson / gdp-clt, eps = 8” 9.45 to 10.5." in note and UNIFORM not in note


def test_the_pick_reads_the_test_loader_asked_for():
    """A DP-CDA z-score release records the same trained model through several test loaders: the pick follows the
    one asked for, and a run without that reading is in neither the pick nor the test-set search."""
    runs = []
    for l, own, other in ((16, [0.9, 0.9], [0.5, 0.6]), (64, [0.5, 0.5], [0.8, 0.7])):
        row = _row(POISSON, l, own)
        row["result"]["test_accuracy_by_inputs"] = {"unclipped": {"accuracy": sum(other) / 2, "halves": other}}
        runs.append(row)
    (own_pick,) = best_axis_values(runs, "l")
    (other_pick,) = best_axis_values(runs, "l", test_inputs="unclipped")
    assert (own_pick.chosen, own_pick.accuracy) == (16, 0.9)
    assert (other_pick.chosen, other_pick.accuracy, other_pick.tuned) == (64, 0.7, 64)
    runs.append(_row(POISSON, 32, [0.99, 0.99]))  # no unclipped reading: left out of that loader's pick
    (other_pick,) = best_axis_values(runs, "l", test_inputs="unclipped")
    assert other_pick.values_compared == 2 and other_pick.tuned == 64
