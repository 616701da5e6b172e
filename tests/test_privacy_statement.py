"""The privacy statement says what the accountant says, and never more."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmix_core.privacy.accountants import ACCOUNTANTS, MixingSetting, equal_class_sizes, get_accountant
from dpmix_core.privacy.release import PRIVATE_NORMALISATION
from dpmix_core.privacy.statement import bound_text, privacy_statement
from dpmix_core.views.release_models import RELEASE_MODELS
from dpmix_core.views.reports import release_reading

THESIS = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)


def _statement(name, setting, delta=1e-5):
    acc = get_accountant(name)
    release = acc.release_for(setting)
    result = acc.epsilon(release, delta)
    return privacy_statement(release, result), result


@pytest.mark.parametrize("model", list(RELEASE_MODELS))
def test_headline_statement_states_the_release_and_its_rigorous_bound(model):
    reading = release_reading(THESIS, 1e-5, model, with_curves=False)
    text = privacy_statement(reading.release, reading.result)
    printed = float(text.split("(ε, δ) = (")[1].split(",")[0])
    assert reading.epsilon <= printed <= reading.epsilon * 1.01  # rounded up: the printed bound is never lower
    assert ", 1e-05)-differential privacy" in text and "rounded up" in text
    assert f"rigorous upper bound computed with the {reading.accountant} accountant" in text
    assert "T = 10,000 synthetic points" in text and "σx = 0.0711" in text and "256" in text
    adjacency = "added or removed" if model == "poisson" else "replaced by another"
    assert adjacency in text and "post-processing" in text


def test_poisson_statement_gives_the_sampling_rate():
    text, _ = _statement("pld-poisson", THESIS)
    assert "q = m/n = 256/60,000 = 0.00427" in text and "n stated publicly" in text


def test_an_approximation_is_never_stated_as_a_guarantee():
    text, result = _statement("gdp-clt", THESIS)
    assert not result.upper_bound
    assert "approximation, not an upper bound" in text and "satisfies" not in text and "inherits" not in text


def test_a_release_no_accountant_covers_claims_nothing():
    text, _ = _statement("rdp-wor", replace(THESIS, not_covered=PRIVATE_NORMALISATION))
    assert text.count("No differential-privacy guarantee is claimed") == 1 and "satisfies" not in text


def test_features_only_class_centric_says_the_label_is_not_protected():
    s = replace(THESIS, l=128, class_sizes=equal_class_sizes(60000, 10), protect_labels=False)
    text, result = _statement("rdp-wor", s)
    assert "label is not protected" in text and "6,000 each" in text and "K = 10 classes" in text
    assert result.upper_bound and "satisfies" in text


def test_no_noise_states_no_finite_epsilon():
    text, result = _statement("rdp-wor", replace(THESIS, sigma_x=0.0, sigma_y=0.0))
    assert math.isinf(result.epsilon) and "No finite ε" in text and "satisfies" not in text


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(list(ACCOUNTANTS)),
    n=st.integers(2, 10**7),
    frac=st.floats(0.0, 1.0),
    T=st.integers(1, 10**6),
    sigma=st.sampled_from([0.0, 1e-3, 0.07, 1.0, 50.0]),
    covered=st.booleans(),
)
def test_the_statement_claims_a_guarantee_exactly_when_the_accountant_gives_one(name, n, frac, T, sigma, covered):
    s = MixingSetting(
        n=n,
        l=max(1, int(n * frac)),
        T=T,
        sigma_x=sigma,
        sigma_y=sigma,
        not_covered=None if covered else PRIVATE_NORMALISATION,
    )
    text, result = _statement(name, s)
    guaranteed = result.upper_bound and result.not_covered is None and math.isfinite(result.epsilon)
    assert ("-differential privacy under" in text) == guaranteed
    assert f"the {name} accountant" in text or name in text


@pytest.mark.parametrize(("x", "printed"), [(0.564, "0.564"), (0.9995, "1"), (1.0004, "1.01"), (11.83, "11.9")])
def test_a_bound_is_printed_rounded_up(x, printed):
    assert bound_text(x) == printed and float(printed) >= x


@settings(max_examples=200, deadline=None)
@given(x=st.floats(1e-12, 1e12))
def test_rounding_up_never_prints_less(x):
    assert x <= float(bound_text(x)) <= x * 1.01 + 1e-300


def test_a_weak_guarantee_is_called_weak():
    weak, result = _statement("rdp-wor", THESIS)  # 11.8
    strong, _ = _statement("rdp-wor", replace(THESIS, sigma_x=1.0, sigma_y=1.0))
    assert result.epsilon > 10 and "weak protection" in weak and "weak protection" not in strong


def test_the_card_of_a_release_carries_the_statement_of_its_tightest_guarantee():
    from dpmix_core.privacy.statement import card_statement

    acc = get_accountant("rdp-wor")
    release = acc.release_for(THESIS)
    entries = [get_accountant(n).epsilon(release, 1e-5).to_json() for n in ("lee2019", "rdp-wor")]
    text = card_statement(release, entries)
    best = min(e["epsilon"] for e in entries)
    assert "the rdp-wor accountant" in text and best <= float(text.split("(ε, δ) = (")[1].split(",")[0])
    no_noise = acc.release_for(replace(THESIS, sigma_x=0.0, sigma_y=0.0))
    assert "No finite ε" in card_statement(no_noise, [acc.epsilon(no_noise, 1e-5).to_json()])
