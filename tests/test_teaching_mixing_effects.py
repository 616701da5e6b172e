"""The "why mixing is private" lesson: each stage's epsilon against an independent oracle, and the order of effects."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, special

from dpmix_core.privacy.accountants import get_accountant
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.teaching import CLIPPED_MODELS, EFFECT_MODELS, effect_model, mixing_effects, mixing_effects_figure

TABLE3 = dict(n=60000, m=64, T=60000, sigma_x=0.0263, sigma_y=0.0263, delta=1e-5)  # DPFMix Table 3 at eps = 1


def gaussian_epsilon(z: float, delta: float) -> float:
    """Exact epsilon of the Gaussian mechanism with noise multiplier z (Balle & Wang 2018, Thm. 8), log-space."""

    def excess(eps: float) -> float:
        a = special.log_ndtr(-eps * z + 0.5 / z)
        b = eps + special.log_ndtr(-eps * z - 0.5 / z)
        return a + math.log(-math.expm1(b - a)) - math.log(delta) if b < a else -math.inf

    return optimize.brentq(excess, 0.0, 1e5)


def test_the_stages_of_dpfmix_table3_tell_the_three_effects():
    effects = mixing_effects(**TABLE3)
    names = [s.name for s in effects.stages]
    assert names == ["no averaging", "averaging", "subsampling", "composition", "no amplification"]
    alone, mixed, sampled, composed, contrast = effects.stages
    assert (
        alone.z == pytest.approx(mixed.z / 64) and alone.q == mixed.q == 1.0 and sampled.q == pytest.approx(64 / 60000)
    )
    # the unsampled single points are plain Gaussian mechanisms: PLD (pessimistic) against the exact epsilon
    for stage in (alone, mixed):
        exact = gaussian_epsilon(stage.z, 1e-5)
        assert exact * (1 - 1e-9) <= stage.epsilon <= exact * 1.01 + 1e-3
    # the release's stage is the release: the product's pld-poisson epsilon of the same MixingRelease
    release = MixingRelease.poisson(n=60000, m=64, T=60000, sigma_x=0.0263, sigma_y=0.0263)
    assert composed.epsilon == pytest.approx(get_accountant("pld-poisson").epsilon(release, 1e-5).epsilon, rel=1e-9)
    assert composed.epsilon == pytest.approx(1.0, abs=0.01) and composed.is_release
    assert alone.epsilon > 1000 and 3 < mixed.epsilon < 4 and sampled.epsilon < 0.01 and contrast.epsilon > 10000
    assert all(s.guarantee == "rigorous upper bound" for s in effects.stages)
    text = " ".join(effects.sentences())
    assert "m = 64" in text and "T = 60,000" in text and f"{60000 * sampled.epsilon:.3g}" in text


def test_the_without_replacement_model_is_dpmix_under_rdp_wor():
    """The thesis release (n = 60000, l = 256, T = 10000, sigma = 0.0711): its stage is rdp-wor's own epsilon."""
    effects = mixing_effects(
        n=60000, m=256, T=10000, sigma_x=0.0711, sigma_y=0.0711, delta=1e-5, model="without-replacement"
    )
    release = MixingRelease.dpmix(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711, dx=784, dy=10)
    composed = effects.stage("composition")
    assert effects.accountant == "rdp-wor" and effects.release == release
    assert composed.epsilon == pytest.approx(get_accountant("rdp-wor").epsilon(release, 1e-5).epsilon, rel=1e-9)
    assert effects.stage("averaging").z == pytest.approx(release.noise_multiplier())
    assert effects.stage("no averaging").z == pytest.approx(release.noise_multiplier() / 256)
    assert (
        effects.stage("subsampling").epsilon
        < effects.stage("averaging").epsilon
        < effects.stage("no averaging").epsilon
    )


def test_the_clipped_without_replacement_model_is_dpfmix_uniform_row_under_rdp_wor():
    """DPFMix App. E.3's DPMix (records clipped to ||x|| <= Cx, ||y|| <= Cy): its stage is rdp-wor's epsilon of that
    release (eps 2 at the accountant page's preset), and z is its own: 1 / sqrt((2Cx/(m sx))^2 + (2Cy/(m sy))^2)."""
    row = dict(n=60000, m=64, T=60000, sigma_x=0.0581, sigma_y=0.0581, delta=1e-5)
    effects = mixing_effects(**row, model="without-replacement-clipped")
    release = MixingRelease.dpmix(n=60000, l=64, T=60000, sigma_x=0.0581, sigma_y=0.0581, dx=784, dy=10, clip=(1, 1))
    composed = effects.stage("composition")
    assert effects.accountant == "rdp-wor" and effects.release == release
    assert composed.epsilon == pytest.approx(get_accountant("rdp-wor").epsilon(release, 1e-5).epsilon, rel=1e-9)
    assert 1.9 < composed.epsilon <= 2.0
    assert effects.stage("averaging").z == pytest.approx(1 / math.hypot(2 / (64 * 0.0581), 2 / (64 * 0.0581)))
    wider = mixing_effects(**row, model="without-replacement-clipped", clip_x=2.0)  # a wider clip: more sensitivity
    assert wider.stage("composition").epsilon > composed.epsilon
    unit = mixing_effects(**row, model="without-replacement")  # the same noise on [0,1] pixels
    assert unit.stage("composition").epsilon > 100 * composed.epsilon


def test_the_lesson_model_of_a_shared_release():
    assert effect_model("poisson", (1.0, 1.0)) == "poisson"
    assert effect_model("dpmix", None) == "without-replacement"
    assert effect_model("dpmix", (1.0, 1.0)) == "without-replacement-clipped"
    assert effect_model("local", None) == "without-replacement"  # DPMix with one record per point
    assert effect_model("class-centric", None) is None and effect_model(None, None) is None
    assert {m for m in EFFECT_MODELS if m != "without-replacement"} == CLIPPED_MODELS


@given(
    model=st.sampled_from(sorted(EFFECT_MODELS)),
    m=st.sampled_from([1, 4, 64, 512]),
    T=st.sampled_from([1, 10, 1000, 60000]),
    sigma=st.floats(0.005, 2.0),
)
def test_each_effect_never_costs_privacy_and_composition_never_saves_it(model, m, T, sigma):
    """Averaging and subsampling lower epsilon; T points cost at least one; amplification always helps."""
    effects = mixing_effects(n=60000, m=m, T=T, sigma_x=sigma, sigma_y=sigma, delta=1e-5, model=model)
    alone, mixed, sampled, composed, contrast = (s.epsilon for s in effects.stages)
    slack = 1e-6 + 1e-3 * max(alone, 1.0)  # PLD grids round pessimistically; ties at m = 1 or T = 1
    assert mixed <= alone + slack
    assert sampled <= mixed + 1e-6 + 1e-3 * mixed
    assert sampled <= composed + 1e-6 + 1e-3 * composed
    assert composed <= contrast + 1e-6 + 1e-3 * contrast
    assert all(not math.isnan(e) and e >= 0 for e in (alone, mixed, sampled, composed, contrast))


def test_no_noise_is_infinite_and_said_so_and_bad_input_is_one_line():
    effects = mixing_effects(n=100, m=4, T=10, sigma_x=0.0, sigma_y=0.0, delta=1e-5)
    assert all(math.isinf(s.epsilon) for s in effects.stages)
    bar = mixing_effects_figure(effects).data[0]
    assert all(text == "ε = ∞" for text in bar.text) and all(math.isfinite(x) for x in bar.x)
    with pytest.raises(ValueError, match="cannot exceed the n = 10 records"):
        mixing_effects(n=10, m=64, T=5, sigma_x=0.1, sigma_y=0.1, delta=1e-5)
    with pytest.raises(ValueError, match="model must be one of"):
        mixing_effects(**{**TABLE3, "model": "gdp-clt"})


def test_the_figure_marks_the_release_and_labels_every_bar():
    effects = mixing_effects(**TABLE3)
    bar = mixing_effects_figure(effects).data[0]
    assert list(bar.y)[3] == "4. composition" and bar.marker.color[3] == "#d62728"
    assert list(bar.text) == [f"ε = {t}" for t in effects.table()["ε"]]
