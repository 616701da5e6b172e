"""Plain data for pages: curves cached by what they depend on, the typed shared release."""

import math
from dataclasses import replace

import numpy as np
import pytest

from dpmix_core.privacy.accountants import MixingSetting
from dpmix_core.privacy.curves import default_axis_values
from dpmix_core.views.privacy_scale import format_epsilon
from dpmix_core.views.reports import curve_anchor, curve_waiting_text, epsilon_curves, epsilon_table
from dpmix_core.views.shared_release import SharedRelease

S = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)


@pytest.mark.parametrize(
    "axis, knob, values",
    [
        ("sigma", "sigma_x", (0.04, 0.0711, 0.2)),
        ("T", "T", (2000, 5000, 10000)),
        ("l", "l", (16, 256, 1000)),
    ],
)
def test_a_curve_does_not_depend_on_its_own_knob_within_a_decade(axis, knob, values):
    anchors = {curve_anchor(replace(S, **{knob: v}), axis) for v in values}
    assert len(anchors) == 1  # one cache entry for the whole decade
    grid = default_axis_values(anchors.pop(), axis)
    assert all(min(grid) <= v <= max(grid) for v in values)  # the current value stays inside the curve


def test_curve_waiting_text_says_how_many_curves_are_ahead():
    assert curve_waiting_text("T", 0) == (
        "Computing ε along T for this release (a second or two); the table above is current."
    )
    assert "once 1 other curve ahead of it is done (other users" in curve_waiting_text("σx", 1)
    assert "once 3 other curves ahead of it are done" in curve_waiting_text("ℓ", 3)
    with pytest.raises(ValueError, match="ahead"):
        curve_waiting_text("T", -1)


def test_anchored_curve_equals_the_curve_at_the_same_grid():
    anchor = curve_anchor(S, "sigma")
    grid = default_axis_values(anchor, "sigma")[:4]
    a = epsilon_curves(S, 1e-5, axis="sigma", values=grid, accountants=["lee2019"])
    b = epsilon_curves(anchor, 1e-5, axis="sigma", values=grid, accountants=["lee2019"])
    np.testing.assert_allclose(a["epsilon"], b["epsilon"], rtol=0)


def test_l_curve_of_a_label_protecting_class_centric_setting_stays_valid():
    s = replace(S, class_sizes=(6000,) * 10, l=128, T=12000)
    grid = default_axis_values(s, "l")
    assert max(grid) == 5999
    assert len(epsilon_curves(s, 1e-5, axis="l", values=grid[-2:], accountants=["rdp-wor"])) == 2


def test_shared_release_is_validated():
    r = SharedRelease(page="Mixed samples", n=4000, l=4, T=10000, sigma_x=0.1, sigma_y=0.1, delta=1e-5)
    assert "ℓ = 4" in r.label()
    with pytest.raises(ValueError, match="T must be a positive integer"):
        SharedRelease(page="x", n=10, l=1, T=0, sigma_x=0.1, sigma_y=0.1, delta=1e-5)
    clipped = SharedRelease(
        page="x", n=10, l=2, T=5, sigma_x=0.1, sigma_y=0.1, delta=1e-5, mechanism="dpmix", clip=(1, 2)
    )
    assert clipped.clip == (1.0, 2.0) and "‖x‖ ≤ 1, ‖y‖ ≤ 2" in clipped.label()
    for bad in ((1.0,), (0.0, 1.0), (1.0, math.inf), (True, 1.0), ("1", 1.0)):
        with pytest.raises(ValueError, match="clip must be two positive finite bounds"):
            SharedRelease(page="x", n=10, l=2, T=5, sigma_x=0.1, sigma_y=0.1, delta=1e-5, clip=bad)


@pytest.mark.parametrize(
    ("model", "class_centric", "mechanism", "clip"),
    [
        ("dpmix", False, "dpmix", None),
        ("dpmix-clip", False, "dpmix", (2.0, 0.5)),
        ("poisson", False, "poisson", (2.0, 0.5)),
        ("dpcda", False, None, None),
        ("dpmix", True, "class-centric", None),
        ("dpmix-clip", True, "class-centric", None),
    ],
)
def test_the_accountant_pages_release_is_shared_with_its_bounds(model, class_centric, mechanism, clip):
    """What another page needs to account the same release: the mechanism and, for clipped records, (Cx, Cy)."""
    setting = replace(S, clip_x=2.0, clip_y=0.5, class_sizes=(6000,) * 10 if class_centric else None)
    shared = SharedRelease.of_model("Privacy accountant", setting, 1e-5, model)
    assert (shared.mechanism, shared.clip) == (mechanism, clip)
    assert (shared.n, shared.l, shared.T, shared.sigma_x, shared.delta) == (S.n, S.l, S.T, S.sigma_x, 1e-5)


def test_epsilon_curve_figure_drops_enormous_points_and_keeps_the_marker_on_its_line():
    import math

    import pandas as pd

    from dpmix_core.views.figures import epsilon_curve_figure

    curves = pd.DataFrame(
        {
            "accountant": ["lee2019"] * 3,
            "sigma": [0.0, 0.05, 0.1],
            "epsilon": [math.inf, 1e216, 12.0],
            "upper_bound": [True] * 3,
            "guarantee": ["rigorous upper bound"] * 3,
        }
    )
    fig = epsilon_curve_figure(curves, "sigma", delta=1e-5, current=0.1)
    assert list(fig.data[0].y) == [12.0]  # no 1e216 point stretching the axis
    line, label = fig.layout.shapes[0], fig.layout.annotations[0]
    assert line.x0 == 0.1 and label.x == pytest.approx(math.log10(0.1)) and label.text == "current"


def test_curves_of_another_release_are_marked_and_drawn_thin_and_dotted():
    """The curves' accountants that bound another release than the chosen model (as the table says) are no bound
    for it: the figure draws them dotted and thin and its legend says so; the chosen release's stay solid."""
    curves = epsilon_curves(S, 1e-5, axis="sigma", values=[0.0711], model="dpmix")
    chosen = dict(zip(curves["accountant"], curves["chosen"]))
    table = epsilon_table(S, 1e-5, model="dpmix")
    in_table = dict(zip(table["accountant"], table["release analysed"].str.endswith("(chosen)")))
    assert chosen == in_table  # the same verdict as the table's, per accountant
    assert chosen["lee2019"] and chosen["rdp-wor"] and not chosen["pld-poisson"] and not chosen["dpcda"]
    assert epsilon_curves(S, 1e-5, axis="sigma", values=[0.0711])["chosen"].all()  # no model: nothing is "other"

    from dpmix_core.views.figures import epsilon_curve_figure

    traces = {t.name: t for t in epsilon_curve_figure(curves, "sigma", delta=1e-5).data}
    assert traces["lee2019"].line.dash == "solid" and traces["lee2019"].line.width == 2.5
    assert traces["pld-poisson (another release)"].line.dash == "dot"
    assert traces["gdp-clt (approx., another release)"].line.width < traces["rdp-wor"].line.width
    clipped = epsilon_curves(replace(S, clip=1.0), 1e-5, axis="sigma", values=[0.0711], model="dpmix")
    names = [t.name for t in epsilon_curve_figure(clipped, "sigma", delta=1e-5).data]
    assert "rdp-wor (clipped; another release)" in names and "rdp-wor" in names  # one bracket, both tags


def test_second_axis_offers_only_accountants_with_numbers():
    import pandas as pd

    from dpmix_core.views.accuracy_figure import epsilon_columns

    agg = pd.DataFrame({"epsilon_none": [float("inf")], "epsilon_rdp-wor": [3.0], "epsilon_lee2019": [float("nan")]})
    assert epsilon_columns(agg) == ["epsilon_rdp-wor"]


def test_table_shows_the_pld_error_bar_and_the_clt_gap():
    from dpmix_core.privacy.accountants import clt_gap
    from dpmix_core.views.reports import epsilon_table

    s = MixingSetting(n=60000, l=64, T=6000, sigma_x=0.05, sigma_y=0.05)
    table = epsilon_table(s, 1e-5).set_index("accountant")
    assert table.loc["pld-poisson", "PLD error bar"]  # an interval or the grid error, never empty
    note = table.loc["gdp-clt", "notes"]
    gap = clt_gap(s, 1e-5, relative_accuracy=0.1)
    assert f"{gap:+.3g}" in note and "pld-poisson" in note


@pytest.mark.parametrize(
    ("eps", "nearest", "bound"),
    [
        (11.83, "11.8", "11.9"),
        (0.5641, "0.564", "0.565"),
        (1923.4, "1,923", "1,924"),
        (2.5e7, "2.5e+07 (enormous)", None),
    ],
)
def test_a_rigorous_bound_is_printed_rounded_up(eps, nearest, bound):
    assert format_epsilon(eps) == nearest  # an approximation or a lower bound: nearest
    printed = format_epsilon(eps, upper_bound=True)
    assert printed == (bound or nearest) and float(printed.split()[0].replace(",", "")) >= eps
    assert format_epsilon(float("inf"), upper_bound=True) == "∞"


def test_the_accountant_table_never_prints_a_bound_below_its_value():
    s = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)
    table = epsilon_table(s, 1e-5)
    bounds = table[table["upper_bound"]]
    assert len(bounds) >= 4
    assert all(float(p.replace(",", "")) >= e for p, e in zip(bounds["ε"], bounds["epsilon"], strict=True))


@pytest.mark.parametrize(
    ("model", "rows"),
    [
        ("dpmix", {"lee2019", "rdp-wor"}),  # [0,1] data, l distinct records of n
        ("dpcda", {"dpcda", "rdp-wor (clipped)"}),  # clipped, l distinct records of n
        ("poisson", {"gdp-clt", "rdp-poisson", "pld-poisson"}),
        ("dpmix-clip", {"rdp-wor (clipped x, y)"}),  # records clipped to ||x||, ||y|| <= 1 (DPFMix App. E.3)
    ],
)
def test_the_table_names_the_release_each_row_bounds_and_never_calls_another_releases_bound_this_ones(model, rows):
    from dpmix_core.views.reports import OTHER_RELEASE

    s = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711, clip=1.0)
    plain = epsilon_table(s, 1e-5, model=None if model != "dpmix-clip" else "dpmix-clip").set_index("accountant")
    plain["release analysed"] = plain["release analysed"].str.removesuffix(" (chosen)")
    plain["guarantee"] = plain["guarantee"].str.removesuffix(", not for the chosen release model")
    table = epsilon_table(s, 1e-5, model=model)
    assert list(table["accountant"][: len(rows)]) == [a for a in plain.index if a in rows]  # the chosen rows first
    assert set(table["accountant"]) == set(plain.index)
    for _, row in table.iterrows():
        ours = row["accountant"] in rows
        assert row["release analysed"].endswith("(chosen)") == ours
        if ours:
            assert row["guarantee"] == plain.loc[row["accountant"], "guarantee"]
        else:  # an upper bound of another release is never printed as this one's
            assert row["guarantee"] == f"{plain.loc[row['accountant'], 'guarantee']}, {OTHER_RELEASE}"
    assert "(chosen)" not in "".join(epsilon_table(s, 1e-5)["release analysed"])  # no model, no choice
    with pytest.raises(ValueError, match="release model"):
        epsilon_table(s, 1e-5, model="laplace")


def test_uniform_mixing_of_clipped_records_is_its_own_release_model():
    """DPFMix App. E.3's DPMix (||x||, ||y|| <= 1, l distinct records): rdp-wor on exactly the release the
    synthesize card describes, a headline, curves and calibration on it; never the [0,1] or DP-CDA release."""
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.release import MixingRelease
    from dpmix_core.views.reports import NO_ACCOUNTANT, model_accountants, release_model_of, release_reading

    s = MixingSetting(n=60000, l=64, T=60000, sigma_x=0.0581, sigma_y=0.0581, clip=1.0)  # the page's setting
    analysed = model_accountants(s, "dpmix-clip")
    assert list(analysed) == ["rdp-wor"]
    release = get_accountant("rdp-wor").release_for(analysed["rdp-wor"])
    card = MixingRelease.dpmix(n=60000, l=64, T=60000, sigma_x=0.0581, sigma_y=0.0581, dx=784, dy=10, clip=(1, 1))
    assert release == card and release_model_of(card) == "dpmix-clip"
    reading = release_reading(s, 1e-5, "dpmix-clip", with_curves=False)
    direct = get_accountant("rdp-wor").epsilon(card, 1e-5).epsilon
    assert reading.accountant == "rdp-wor" and reading.epsilon == direct and 1.9 < direct <= 2.0
    # the same accountant on the other models analyses their releases, which differ by far at this noise
    unit, dpcda = (release_reading(s, 1e-5, m, with_curves=False).epsilon for m in ("dpmix", "dpcda"))
    assert unit > 1e3 and dpcda < direct
    curves = epsilon_curves(s, 1e-5, axis="sigma", values=[0.0581], model="dpmix-clip").set_index("accountant")
    assert curves.loc["rdp-wor (clipped x, y)", "epsilon"] == pytest.approx(direct)
    assert "rdp-wor (clipped x, y)" not in set(epsilon_curves(s, 1e-5, axis="sigma", values=[0.0581])["accountant"])
    # class-centric mixing of clipped records is no release any accountant here analyses: said, not "too little noise"
    cc = replace(s, class_sizes=(6000,) * 10)
    assert model_accountants(cc, "dpmix-clip") == {}
    assert release_reading(cc, 1e-5, "dpmix-clip").guarantee == NO_ACCOUNTANT


def test_each_models_accountants_calibrate_that_models_release():
    """The page's clip c is always set: rdp-wor under the DPMix model must still analyse [0,1] data (it once
    calibrated the DP-CDA release, whose sigma for eps = 2 is far too small for [0,1] data)."""
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.calibration import calibrate_sigma
    from dpmix_core.views.reports import model_accountants

    s = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711, clip=1.0)
    bounds = {
        model: {name: get_accountant(name).release_for(v).bounds.describe() for name, v in found.items()}
        for model in ("dpmix", "dpcda", "poisson", "dpmix-clip")
        if (found := model_accountants(s, model))
    }
    assert bounds["dpmix"] == {"lee2019": "x: [0,1]^784, y: [0,1]^10", "rdp-wor": "x: [0,1]^784, y: [0,1]^10"}
    assert set(bounds["dpcda"].values()) == {"x: ||.||_2 <= 1, y: one-hot"}
    assert set(bounds["dpmix-clip"].values()) == {"x: ||.||_2 <= 1, y: ||.||_2 <= 1"}
    assert set(bounds["poisson"]) == {"gdp-clt", "rdp-poisson", "pld-poisson"}
    acc = get_accountant("rdp-wor")

    def on_unit_data(sigma: float) -> float:
        return acc.epsilon(acc.release_for(replace(s, clip=None, sigma_x=sigma, sigma_y=sigma)), 1e-5).epsilon

    unit = calibrate_sigma(acc, model_accountants(s, "dpmix")["rdp-wor"], target_epsilon=2.0, delta=1e-5)
    dpcda = calibrate_sigma(acc, model_accountants(s, "dpcda")["rdp-wor"], target_epsilon=2.0, delta=1e-5)
    assert on_unit_data(unit.sigma_x) <= 2.0 < 100 < on_unit_data(dpcda.sigma_x)
