"""Noise-corrected least squares (model ``corrected-lsq``): the estimator, its floor choice, the run wiring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpmix_core.cli.main import main
from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.runner import run_config
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training import corrected_lsq as C
from dpmix_core.training.models import build_model
from dpmix_core.training.train import fit_closed_form

SMALL = dict(dataset="embedded", train_limit=600, test_limit=300, device="cpu")


def _linear_world(rng, n=4000, d=12, k=3):
    """Records x (n, d) on a common scale and targets y = x W* + b* + small noise."""
    x = rng.normal(size=(n, d)) / np.sqrt(d)
    w = rng.normal(size=(d, k))
    b = rng.normal(size=k)
    return x, x @ w + b + 0.01 * rng.normal(size=(n, k)), w, b


def _mixtures(rng, x, y, m, T, sigma_x, sigma_y=0.0):
    """Averages of m distinct random records (DPMix) plus N(0, sigma^2) on every coordinate."""
    idx = np.stack([rng.choice(len(x), size=m, replace=False) for _ in range(T)])
    xm = x[idx].mean(axis=1) + sigma_x * rng.normal(size=(T, x.shape[1]))
    ym = y[idx].mean(axis=1) + sigma_y * rng.normal(size=(T, y.shape[1]))
    return xm, ym


def test_without_noise_a_small_floor_is_ordinary_least_squares():
    rng = np.random.default_rng(0)
    x, y, _, _ = _linear_world(rng, n=500)
    fit = C.corrected_least_squares(x, y, sigma_x=0.0, floors=(1e-9,))
    design = np.hstack([x, np.ones((len(x), 1))])
    ref, *_ = np.linalg.lstsq(design, y, rcond=None)
    np.testing.assert_allclose(fit.weight, ref[:-1], atol=1e-8)
    np.testing.assert_allclose(fit.bias, ref[-1], atol=1e-8)
    np.testing.assert_allclose(fit.predict(x), design @ ref, atol=1e-8)


def test_correction_removes_the_noise_ridge_that_plain_least_squares_keeps():
    rng = np.random.default_rng(1)
    x, y, w, _ = _linear_world(rng)
    xm, ym = _mixtures(rng, x, y, m=8, T=6000, sigma_x=0.08, sigma_y=0.05)
    plain = C.corrected_least_squares(xm, ym, sigma_x=0.0, floors=(1e-9,))
    corrected = C.corrected_least_squares(xm, ym, sigma_x=0.08, floors=(1e-3,))
    err_plain = np.linalg.norm(plain.weight - w) / np.linalg.norm(w)
    err_corrected = np.linalg.norm(corrected.weight - w) / np.linalg.norm(w)
    # attenuation: the noise shrinks the plain slope by about signal / (signal + noise) per direction
    assert err_plain > 0.3
    assert err_corrected < 0.35 * err_plain


def test_corrected_risk_is_unbiased_for_noise_free_inputs():
    rng = np.random.default_rng(2)
    x, y, w, b = _linear_world(rng, n=200_000, d=6, k=2)
    weight = w + 0.3 * rng.normal(size=w.shape)  # any fixed map, not the truth
    clean = np.mean(np.sum((x @ weight + b - y) ** 2, axis=1))
    sigma = 0.5
    noisy = x + sigma * rng.normal(size=x.shape)
    plain = np.mean(np.sum((noisy @ weight + b - y) ** 2, axis=1))
    risk = C.corrected_risk(noisy @ weight + b, y, weight, sigma)
    assert plain > clean * 1.5  # the noise inflates the plain error a lot ...
    assert risk == pytest.approx(clean, rel=0.03)  # ... and the correction takes it back out


def test_floor_is_chosen_on_held_out_points_by_corrected_risk():
    rng = np.random.default_rng(3)
    x, y, _, _ = _linear_world(rng)
    xm, ym = _mixtures(rng, x, y, m=8, T=5000, sigma_x=0.08)
    floors = (0.001, 0.05, 0.5, 5.0)
    fit = C.corrected_least_squares(xm[:4000], ym[:4000], sigma_x=0.08, floors=floors, x_val=xm[4000:], y_val=ym[4000:])
    assert set(fit.scores) == set(floors)
    assert fit.floor == min(fit.scores, key=lambda t: (fit.scores[t], -t))  # ties: the larger floor
    assert fit.floor == 0.5  # here 0.001 ... 0.5 lie below every signal eigenvalue: the same fit
    for tau, risk in fit.scores.items():  # each score is the corrected risk of that floor's own fit
        alone = C.corrected_least_squares(xm[:4000], ym[:4000], sigma_x=0.08, floors=(tau,))
        assert risk == pytest.approx(C.corrected_risk(alone.predict(xm[4000:]), ym[4000:], alone.weight, 0.08))
    assert fit.scores[5.0] > fit.scores[fit.floor]  # a floor far above the signal shrinks it away


def test_the_choice_is_the_least_risk_among_plausible_floors_told_from_the_most_regular_fit():
    rng = np.random.default_rng(7)
    x, y, _, _ = _linear_world(rng, n=3000, d=40, k=3)
    xm, ym = _mixtures(rng, x, y, m=16, T=1500, sigma_x=0.5, sigma_y=0.3)  # low signal: small floors are noisy
    xv, yv = xm[1200:], ym[1200:]
    fit = C.corrected_least_squares(xm[:1200], ym[:1200], sigma_x=0.5, sigma_y=0.3, x_val=xv, y_val=yv)
    regular, least = max(C.DEFAULT_FLOORS), 3 * 0.3**2

    def per_row(tau):
        alone = C.corrected_least_squares(xm[:1200], ym[:1200], sigma_x=0.5, floors=(tau,))
        return np.sum((alone.predict(xv) - yv) ** 2, axis=1) - 0.25 * np.sum(alone.weight**2)

    for tau in fit.scores:  # the rule of the module docstring, recomputed from each floor's own fit
        rows, base = per_row(tau), per_row(regular)
        assert fit.scores[tau] == pytest.approx(rows.mean())
        assert fit.score_errors[tau] == pytest.approx(rows.std(ddof=1) / np.sqrt(len(rows)))
        plausible = rows.mean() - C.PLAUSIBLE_SES * fit.score_errors[tau] >= least
        paired = (rows - base).std(ddof=1) / np.sqrt(len(rows))
        told = abs(rows.mean() - base.mean()) > C.DETERMINED_SES * paired
        assert (tau in fit.ineligible) == (tau != regular and not (plausible and told))
    assert fit.floor not in fit.ineligible
    assert fit.scores[fit.floor] == min(v for t, v in fit.scores.items() if t not in fit.ineligible)
    assert fit.score_errors[min(fit.scores)] > fit.score_errors[regular]  # small floors: noisy estimates
    # nothing beats label noise this large: no other floor is plausible, the most regular fit is kept
    hopeless = C.corrected_least_squares(xm[:1200], ym[:1200], sigma_x=0.5, sigma_y=100.0, x_val=xv, y_val=yv)
    assert set(hopeless.ineligible) == set(C.DEFAULT_FLOORS) - {regular} and hopeless.floor == regular
    # pure-noise labels: no floor is told from the most regular fit by a lucky low estimate
    noise = C.corrected_least_squares(
        xm[:1200], rng.normal(size=(1200, 3)), sigma_x=0.5, x_val=xv, y_val=rng.normal(size=(300, 3))
    )
    assert noise.floor == regular


def test_without_held_out_points_the_default_floor_is_used():
    rng = np.random.default_rng(6)
    x, y, _, _ = _linear_world(rng, n=300)
    assert C.corrected_least_squares(x, y, sigma_x=0.05).floor == C.DEFAULT_FLOOR
    assert C.corrected_least_squares(x, y, sigma_x=0.05, floors=(0.3,)).floor == 0.3
    assert C.corrected_least_squares(x, y, sigma_x=0.05).scores == {}


def test_result_does_not_depend_on_the_row_blocks(monkeypatch):
    rng = np.random.default_rng(4)
    x, y, _, _ = _linear_world(rng, n=300)
    whole = C.corrected_least_squares(x.astype(np.float32), y, sigma_x=0.01)
    monkeypatch.setattr(C, "_BLOCK_ROWS", 7)
    blocks = C.corrected_least_squares(x.astype(np.float32), y, sigma_x=0.01)
    np.testing.assert_allclose(blocks.weight, whole.weight, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(sigma_x=-1.0), "sigma_x must be"),
        (dict(sigma_x=float("nan")), "sigma_x must be"),
        (dict(sigma_x=0.1, sigma_y=-0.5), "sigma_y must be"),
        (dict(sigma_x=0.1, floors=()), "floors must be"),
        (dict(sigma_x=0.1, floors=(0.0,)), "floor must be a positive"),
        (dict(sigma_x=0.1, x_val=np.zeros((5, 3)), y_val=np.zeros((5, 2))), "held-out points must match"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs, message):
    x, y = np.ones((10, 4)) + np.eye(10, 4), np.ones((10, 2))
    with pytest.raises(ValueError, match=message):
        C.corrected_least_squares(x, y, **kwargs)


def test_bad_arrays_are_refused():
    with pytest.raises(ValueError, match="same number of rows"):
        C.corrected_least_squares(np.ones((10, 3)), np.ones((9, 2)), sigma_x=0.1)
    with pytest.raises(ValueError, match="NaN or infinite"):
        C.corrected_least_squares(np.full((10, 3), np.nan), np.ones((10, 2)), sigma_x=0.1)
    with pytest.raises(ValueError, match=r"must have shape \(n, d\)"):
        C.corrected_least_squares(np.ones(10), np.ones((10, 2)), sigma_x=0.1)


def test_too_many_features_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(C, "MAX_FEATURES", 8)
    with pytest.raises(ValueError, match="refused above 8 features"):
        C.corrected_least_squares(np.ones((10, 9)), np.ones((10, 2)), sigma_x=0.1)


def test_fit_closed_form_writes_the_fit_into_the_linear_layer():
    rng = np.random.default_rng(5)
    x, y, _, _ = _linear_world(rng, n=400, d=6, k=3)
    model = build_model("corrected-lsq", input_shape=(6,), num_outputs=3)
    to = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    seen = []
    res = fit_closed_form(
        model, to(x[:300]), to(y[:300]), sigma_x=0.0, x_val=to(x[300:]), y_val=to(y[300:]), on_epoch=seen.append
    )
    ref = C.corrected_least_squares(x[:300], y[:300], sigma_x=0.0, x_val=x[300:], y_val=y[300:])
    with torch.no_grad():
        out = model(to(x)).numpy()
    np.testing.assert_allclose(out, ref.predict(x), rtol=1e-4, atol=1e-4)
    assert len(res.history) == 1 and seen == res.history
    entry = res.history[0]
    assert entry["floor"] == ref.floor and entry["lr"] is None and entry["val_accuracy"] is not None
    mse = np.mean(np.sum((ref.predict(x[:300]) - y[:300]) ** 2, axis=1))
    assert entry["loss"] == pytest.approx(mse) and entry["loss"] >= 0
    assert set(entry["floor_scores"]) == {f"{t:g}" for t in C.DEFAULT_FLOORS}
    with pytest.raises(ValueError, match="needs a linear model"):
        fit_closed_form(build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10), to(x), to(y), sigma_x=0.0)


def test_run_config_rules_for_closed_form_models():
    cfg = RunConfig("non-private", model="corrected-lsq", epochs=50, early_stopping=3, **SMALL)
    assert cfg.epochs == 1 and cfg.early_stopping is None  # one step, nothing to stop early
    with pytest.raises(ValueError, match="closed form, not by DP-SGD"):
        RunConfig("dp-sgd", model="corrected-lsq", **SMALL)
    with pytest.raises(ValueError, match="clamp_negative"):
        RunConfig(
            "mixing",
            synthesis=SynthesisConfig("dpmix", l=4, T=200, sigma_x=0.1, clamp_negative=True),
            model="corrected-lsq",
            **SMALL,
        )
    RunConfig("dp-pca", model="corrected-lsq", pca_components=10, pca_epsilon=1.0, **SMALL)  # allowed


def test_a_noisy_mixing_release_is_fitted_with_its_published_noise():
    syn = SynthesisConfig("dpmix", l=4, T=3000, sigma_x=0.15, sigma_y=0.15)
    corrected = run_config(RunConfig("mixing", synthesis=syn, model="corrected-lsq", **SMALL))
    assert not corrected["collapsed"] and corrected["epochs_run"] == 1
    assert corrected["sigma_x"] == pytest.approx(0.15)
    assert any("corrected-lsq" in note and "sigma_x = 0.15" in note for note in corrected["notes"])
    entry = corrected["history"][0]
    assert entry["floor"] in C.DEFAULT_FLOORS and entry["val_loss"] == pytest.approx(
        min(entry["floor_scores"].values())
    )
    assert corrected["test_accuracy"] > 0.6, corrected["test_accuracy"]
    assert not any("few points per coefficient" in note for note in corrected["notes"])  # 2700 points for 784 features
    assert not any("largest floor" in note for note in corrected["notes"])
    few = run_config(
        RunConfig(
            "mixing", synthesis=SynthesisConfig("dpmix", l=4, T=1000, sigma_x=0.15), model="corrected-lsq", **SMALL
        )
    )
    assert any("784 coefficients per output from 900 points" in note for note in few["notes"])


def test_a_fit_at_the_largest_floor_says_the_noise_swamps_the_signal():
    noisy = run_config(
        RunConfig(
            "mixing", synthesis=SynthesisConfig("dpmix", l=4, T=3000, sigma_x=3.0), model="corrected-lsq", **SMALL
        )
    )
    assert noisy["history"][0]["floor"] == max(C.DEFAULT_FLOORS)
    assert any("largest floor of its grid" in note for note in noisy["notes"])


def test_non_private_corrected_lsq_learns_the_embedded_sample():
    result = run_config(RunConfig("non-private", model="corrected-lsq", **SMALL))
    assert not result["collapsed"] and result["test_accuracy"] > 0.75
    assert any("sigma_x = 0" in note for note in result["notes"])


def test_rescaled_inputs_give_the_same_fit_when_the_noise_is_rescaled_with_them():
    """input_norm 'rms' multiplies the release by s: sigma_x must follow (the floors are in units of n sigma_x^2)."""
    syn = SynthesisConfig("dpmix", l=4, T=2500, sigma_x=0.15, sigma_y=0.15)
    plain = run_config(RunConfig("mixing", synthesis=syn, model="corrected-lsq", **SMALL))
    scaled = run_config(RunConfig("mixing", synthesis=syn, model="corrected-lsq", input_norm="rms", **SMALL))
    assert scaled["input_scale"] != pytest.approx(1.0)
    assert scaled["history"][0]["floor"] == plain["history"][0]["floor"]
    assert scaled["test_accuracy"] == pytest.approx(plain["test_accuracy"], abs=0.01)


def test_train_prints_what_the_fit_chose_and_its_caveat(tmp_path, capsys):
    rng = np.random.default_rng(0)
    y = np.arange(300) % 3
    x = np.clip(rng.normal(y[:, None] * 2.0, 1.0, size=(300, 8)), -5, 10)
    data = tmp_path / "mine.csv"
    data.write_text(
        "a,b,c,d,e,f,g,h,species\n" + "".join(",".join(f"{v:.3f}" for v in r) + f",{k}\n" for r, k in zip(x, y))
    )
    args = ["train", "--data-file", str(data), "--label-column", "species", "--feature-range", "-5,10"]
    release = ["--mechanism", "dpmix", "--l", "4", "--sigma-x", "0.05", "--model", "corrected-lsq"]
    assert main([*args, *release, "--T", "2000"]) == 0
    out = capsys.readouterr().out
    assert "note: corrected-lsq: least squares in closed form" in out and "few points per coefficient" not in out
    assert main([*args, *release, "--T", "20"]) == 0  # 18 fitted points for 8 features
    assert "note: corrected-lsq fitted 8 coefficients per output from 18 points" in capsys.readouterr().out
