"""Training: losses, models, the loop, ScatterNet features, DP-SGD, and tiny end-to-end runs of every method.

Everything runs on the embedded 5,000-digit MNIST sample with a few hundred
training records and one epoch, on the CPU.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.runner import Cancelled, NullReporter, run_config, run_job
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training import losses as L
from dpmix_core.training.models import build_model, count_parameters
from dpmix_core.training.train import OptimSettings, evaluate, fit, lr_factor

SMALL = dict(dataset="embedded", train_limit=300, test_limit=200, epochs=1, device="cpu", batch_size=64)
RESULT_KEYS = (
    "test_accuracy",
    "test_mse",
    "epsilon",
    "delta",
    "seconds",
    "train_samples_per_second",
    "versions",
    "privacy_card",
)


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """ScatterNet features go to a temporary cache, not ~/.cache/dpmix."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPMIX_CACHE_DIR", str(tmp_path_factory.mktemp("dpmix-cache")))
        yield


class Recorder:
    def __init__(self, stop_after_epochs: int | None = None):
        self.calls: list[dict] = []
        self.stop_after_epochs = stop_after_epochs

    def progress(self, **fields):
        self.calls.append(fields)

    def should_stop(self):
        if self.stop_after_epochs is None:
            return False
        return sum(1 for c in self.calls if c["phase"] == "train") >= self.stop_after_epochs


# --------------------------------------------------------------------------------------------- losses


def test_clamp_renormalise_rows():
    t = torch.tensor([[0.5, -0.2, 0.5], [-1.0, -2.0, -0.1], [0.0, 2.0, 2.0]])
    p = L.clamp_renormalise(t)
    assert torch.allclose(p.sum(1), torch.ones(3))
    assert torch.allclose(p[0], torch.tensor([0.5, 0.0, 0.5]))
    assert torch.allclose(p[1], torch.full((3,), 1 / 3))  # no positive entry: uniform
    assert (p >= 0).all()


def test_kl_soft_labels_matches_cross_entropy_on_one_hot_and_is_zero_at_fit():
    logits = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 5, (8,), generator=torch.Generator().manual_seed(1))
    one_hot = F.one_hot(y, 5).float()
    assert torch.allclose(L.kl_soft_labels(logits, one_hot), F.cross_entropy(logits, y), atol=1e-6)
    target = torch.softmax(logits, 1)
    assert float(L.kl_soft_labels(logits, target)) == pytest.approx(0.0, abs=1e-6)


def test_generalized_kl():
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(2))
    probs = torch.softmax(logits, 1)
    assert float(L.generalized_kl(logits, probs)) == pytest.approx(0.0, abs=1e-6)  # y = p
    y = torch.rand(6, 4, generator=torch.Generator().manual_seed(3))
    y = y / y.sum(1, keepdim=True)
    assert torch.allclose(L.generalized_kl(logits, y), L.kl_soft_labels(logits, y), atol=1e-6)  # sums to 1: KL
    noisy = torch.tensor([[0.9, -0.3, 0.2, 0.4]] * 6)  # non-negative after clamping, unnormalised
    assert float(L.generalized_kl(logits, noisy)) >= 0
    # by hand: sum y log(y/p) - y + p with y = max(target, 0)
    yc = noisy.clamp_min(0)
    manual = (torch.xlogy(yc, yc) - yc * torch.log(probs) - yc + probs).sum(1).mean()
    assert torch.allclose(L.generalized_kl(logits, noisy), manual, atol=1e-6)


def test_generalized_kl_trains_like_keras_kl_divergence():
    """Keras' ``KLDivergence`` (the thesis §4.1 loss) is sum clip(y, 1e-7, 1) log(clip(y) / clip(p, 1e-7, 1)), with
    no renormalisation of y: its gradient in the logits is S p - y (S = sum y), the generalised KL's exactly,
    since they differ by the constant 1 - S per row. Renormalising (our "kl") gives p - y / S instead."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(64, 10, generator=gen)
    mixed = torch.distributions.Dirichlet(torch.full((10,), 20.0)).sample((64,))  # a mixture's label, sum 1
    noisy = (mixed + 0.0711 * torch.randn(64, 10, generator=gen)).clamp_min(0)  # thesis §4.1: noise, negatives 0

    def keras_kl(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # tf.keras.losses.KLDivergence, mean over rows
        y = y.clamp(1e-7, 1.0)
        p = torch.softmax(z, 1).clamp(1e-7, 1.0)
        return (y * torch.log(y / p)).sum(1).mean()

    def grad(loss) -> torch.Tensor:
        z = logits.clone().requires_grad_(True)
        loss(z, noisy).backward()
        return z.grad

    assert torch.allclose(grad(L.generalized_kl), grad(keras_kl), atol=1e-6)
    assert not torch.allclose(grad(L.kl_soft_labels), grad(keras_kl), atol=1e-4)  # renormalising is not Keras'


def test_cross_entropy_argmax_and_mse():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    soft = torch.tensor([[0.6, 0.4], [-0.1, 0.3]])
    assert torch.equal(L.cross_entropy_argmax(logits, soft), F.cross_entropy(logits, torch.tensor([0, 1])))  # as before
    out = torch.tensor([[1.0], [3.0]])
    assert float(L.mse_loss(out, torch.tensor([[2.0], [3.0]]))) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="Unknown loss"):
        L.get_loss("hinge")


def test_cross_entropy_on_tied_labels_targets_every_tied_class_alike():
    """Label-only Laplace's labels clamped to [0, 1] tie at 1: argmax alone would teach class 0 on such rows."""
    tied = torch.tensor([[1.0, 1.0, 0.0], [0.2, 0.9, 0.1]])
    logits = torch.zeros(2, 3, requires_grad=True)
    loss = L.cross_entropy_argmax(logits, tied)
    soft = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])  # the tie shared, the other row its argmax
    assert loss.item() == pytest.approx(float(-(soft * F.log_softmax(torch.zeros(2, 3), dim=1)).sum(1).mean()))
    (grad,) = torch.autograd.grad(loss, logits)
    assert grad[0, 0] == pytest.approx(grad[0, 1].item()) and grad[0, 0] < 0 < grad[0, 2]  # both tied classes pulled up
    assert torch.allclose(grad[1], torch.autograd.grad(F.cross_entropy(logits, torch.tensor([0, 1])), logits)[0][1])


# --------------------------------------------------------------------------------------------- models


@pytest.mark.parametrize(
    "name,shape",
    [
        ("thesis-cnn", (28, 28)),
        ("dpcda-cnn", (28, 28)),
        ("dpcda-cnn-gn", (28, 28)),
        ("thesis-cnn", (32, 32, 3)),
        ("dpcda-cnn", (32, 32, 3)),
        ("scatter-linear", (81, 7, 7)),
        ("scatter-cnn", (81, 7, 7)),
        ("scatter-cnn", (243, 8, 8)),
        ("linear", (784,)),
        ("linear", (50,)),
    ],
)
def test_models_take_flat_rows(name, shape):
    torch.manual_seed(0)
    model = build_model(name, input_shape=shape, num_outputs=10)
    x = torch.rand(3, int(np.prod(shape)))
    assert model(x).shape == (3, 10)
    assert count_parameters(model) > 0


def test_thesis_cnn_layout():
    model = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    fcs = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (5, 5)), (48, (5, 5))]
    assert [f.out_features for f in fcs] == [100, 100, 10]
    assert fcs[0].in_features == 48 * 4 * 4


@pytest.mark.parametrize("name,shape", [("thesis-cnn", (28, 28)), ("dpfmix-cnn", (28, 28)), ("dpcda-cnn", (32, 32, 3))])
def test_image_models_on_cpu_are_channels_last_and_compute_the_same_function(name, shape):
    """build_model on a CPU stores conv weights NHWC (faster oneDNN kernels); outputs and gradients unchanged."""
    torch.manual_seed(0)
    fast = build_model(name, input_shape=shape, num_outputs=10)
    torch.manual_seed(0)
    plain = build_model(name, input_shape=shape, num_outputs=10).to(memory_format=torch.contiguous_format)
    convs = [m.weight for m in fast.modules() if isinstance(m, torch.nn.Conv2d)]
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    assert not convs[-1].is_contiguous()  # (a 1-channel first conv is both layouts at once)
    assert all(m.weight.is_contiguous() for m in plain.modules() if isinstance(m, torch.nn.Conv2d))
    x = torch.rand(8, int(np.prod(shape)), generator=torch.Generator().manual_seed(1))
    for model in (fast, plain):
        model.train()
        torch.manual_seed(2)  # the same dropout masks
        model(x).square().sum().backward()
    torch.testing.assert_close(fast.eval()(x), plain.eval()(x), atol=1e-5, rtol=1e-4)
    for a, b in zip(fast.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)
    # a state saved from one layout loads into the other (checkpoints and best weights cross the change)
    plain.load_state_dict(fast.state_dict())
    assert all(w.is_contiguous() for w in (m.weight for m in plain.modules() if isinstance(m, torch.nn.Conv2d)))
    # the models NHWC does not speed up keep torch's layout
    for other, other_shape in (("dpcda-cnn-gn", (28, 28)), ("scatter-cnn", (81, 7, 7))):
        kept = build_model(other, input_shape=other_shape, num_outputs=10)
        assert all(m.weight.is_contiguous() for m in kept.modules() if isinstance(m, torch.nn.Conv2d))


@pytest.mark.parametrize("name,norm", [("dpcda-cnn", torch.nn.BatchNorm2d), ("dpcda-cnn-gn", torch.nn.GroupNorm)])
def test_dpcda_cnn_layout_is_its_table_1(name, norm):
    """DP-CDA Table 1: conv 32@5x5 pad 2, conv 64@3x3 pad 1, each ReLU -> norm -> pool; fc 3136-100-100-K."""
    model = build_model(name, input_shape=(28, 28), num_outputs=10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.padding) for c in convs] == [(32, (5, 5), (2, 2)), (64, (3, 3), (1, 1))]
    fcs = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(f.in_features, f.out_features) for f in fcs] == [(3136, 100), (100, 100), (100, 10)]
    norms = [m for m in model.modules() if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm))]
    assert len(norms) == 2 and all(isinstance(m, norm) for m in norms)
    layers = [type(m).__name__ for m in model.features]
    assert layers[1:5] == ["Conv2d", "ReLU", norm.__name__, "MaxPool2d"]  # ReLU before the norm, as the table
    assert sum(isinstance(m, torch.nn.Dropout) and m.p == 0.5 for m in model.head) == 2


def test_scatter_cnn_layout_is_tramer_boneh_mnist_cnn():
    """Tramer & Boneh 2021 (MNIST ScatterNet + CNN): conv 16@3x3 s2 p1, tanh, conv 32@3x3 s1 p1, tanh, fc 32, fc K."""
    model = build_model("scatter-cnn", input_shape=(81, 7, 7), num_outputs=10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding) for c in convs] == [
        (81, 16, (3, 3), (2, 2), (1, 1)),
        (16, 32, (3, 3), (1, 1), (1, 1)),
    ]
    fcs = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(f.in_features, f.out_features) for f in fcs] == [(32 * 4 * 4, 32), (32, 10)]  # 7x7 -> 4x4 at stride 2
    assert sum(isinstance(m, torch.nn.Tanh) for m in model.modules()) == 3
    expected = (81 * 9 + 1) * 16 + (16 * 9 + 1) * 32 + (512 + 1) * 32 + (32 + 1) * 10
    assert count_parameters(model) == expected == 33066
    # per-sample GroupNorm (27 groups, no learned scale) unless the release already normalised each record
    norms = [m for m in model.modules() if isinstance(m, torch.nn.GroupNorm)]
    assert len(norms) == 1 and norms[0].num_groups == 27 and not norms[0].affine
    bare = build_model("scatter-cnn", input_shape=(81, 7, 7), num_outputs=10, normalised_features=True)
    assert not any(isinstance(m, torch.nn.GroupNorm) for m in bare.modules())
    # GroupNorm makes the normalised model blind to a per-sample positive scale (clipping, division by m)
    x = torch.randn(2, 81 * 49, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model(x), model(x * torch.tensor([[3.0], [0.5]])), atol=1e-3, rtol=1e-3)
    assert not torch.allclose(bare(x), bare(x * torch.tensor([[3.0], [0.5]])), atol=1e-2)  # without: it is not
    with pytest.raises(ValueError, match="shape \\(C, h, w\\)"):
        build_model("scatter-cnn", input_shape=(28, 28), num_outputs=10)
    with pytest.raises(ValueError, match="multiple of the 27 groups"):
        build_model("scatter-cnn", input_shape=(80, 7, 7), num_outputs=10)


def test_unknown_model():
    with pytest.raises(ValueError, match="Unknown model"):
        build_model("resnet", input_shape=(28, 28), num_outputs=10)


# --------------------------------------------------------------------------------------------- loop


def test_fused_adam_takes_the_same_steps_as_torchs_default_adam():
    """fit's CPU optimiser (fused Adam) and torch's default Adam move the weights alike, weight decay included."""
    from dpmix_core.training.train import make_optimizer

    settings = OptimSettings(lr=1e-2, weight_decay=1e-3)
    torch.manual_seed(0)
    a = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10)
    b = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10)
    b.load_state_dict(a.state_dict())
    start = [p.detach().clone() for p in a.parameters()]
    opt_a, opt_b = make_optimizer(a.parameters(), settings, fused=True), make_optimizer(b.parameters(), settings)
    assert opt_a.defaults["fused"] and not opt_b.defaults["fused"]
    x = torch.rand(16, 784, generator=torch.Generator().manual_seed(1))
    for _ in range(5):
        for model, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            model(x).logsumexp(dim=1).mean().backward()
            opt.step()
    assert max((pa - pb).abs().max() for pa, pb in zip(a.parameters(), b.parameters(), strict=True)) < 1e-5
    assert min((pa - p0).abs().max() for pa, p0 in zip(a.parameters(), start, strict=True)) > 1e-3  # they moved


def test_fit_learns_a_separable_problem_and_respects_schedule():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=g)
    y = F.one_hot((x[:, 0] > 0).long(), 2).float()
    torch.manual_seed(0)
    model = build_model("linear", input_shape=(5,), num_outputs=2)
    settings = OptimSettings(lr=0.05, epochs=5, batch_size=50, schedule="step", lr_step_epochs=2, lr_gamma=0.5)
    res = fit(
        model,
        L.get_loss("ce"),
        x,
        y,
        settings=settings,
        generator=torch.Generator().manual_seed(1),
        x_val=x[:100],
        y_val=y[:100],
    )
    assert [h["lr"] for h in res.history] == pytest.approx([0.05, 0.05, 0.025, 0.025, 0.0125])
    val_losses = [h["val_loss"] for h in res.history]
    assert val_losses[-1] < val_losses[0]  # the held-out loss is recorded and falls as the model learns
    with torch.no_grad():
        assert val_losses[-1] == pytest.approx(float(L.get_loss("ce")(model(x[:100]), y[:100])), rel=1e-5)
    assert res.history[-1]["loss"] < res.history[0]["loss"]
    assert evaluate(model, x, y.argmax(1))["accuracy"] > 0.9
    assert res.samples == 2000 and res.samples_per_second > 0
    assert lr_factor(OptimSettings(schedule="cosine", epochs=4), 0) == 1.0


def test_multistep_schedule_follows_dpfmix_milestones():
    """DPFMix App. E.3: lr 1e-3 divided by 10 at epochs 80, 120, 160 (torch MultiStepLR's rule)."""
    s = OptimSettings(lr=1e-3, schedule="multistep", lr_milestones=(80, 120, 160), lr_gamma=0.1, epochs=200)
    factors = {e: lr_factor(s, e) for e in (0, 79, 80, 119, 120, 160, 199)}
    assert factors == pytest.approx({0: 1, 79: 1, 80: 0.1, 119: 0.1, 120: 0.01, 160: 1e-3, 199: 1e-3})
    with pytest.raises(ValueError, match="lr_milestones"):
        OptimSettings(schedule="multistep")


def _plateau_oracle(losses, *, gamma, patience, threshold=1e-4):
    """ReduceLROnPlateau's documented rule (mode min, relative threshold, no cooldown), written out by hand."""
    factor, best, bad = 1.0, math.inf, 0
    for loss in losses:
        if loss < best * (1 - threshold):
            best, bad = loss, 0
        else:
            bad += 1
        if bad > patience:
            factor, bad = factor * gamma, 0
    return factor


def test_plateau_factor_is_torchs_reduce_on_plateau():
    """plateau: x gamma once more than ``patience`` epochs pass without a lower validation loss (torch's rule)."""
    from dpmix_core.training.train import plateau_factor

    flat = [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    factors = [plateau_factor(flat[:k], gamma=0.1, patience=2) for k in range(len(flat) + 1)]
    assert factors == pytest.approx([1, 1, 1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    assert plateau_factor([3.0, 2.0, 1.0, 0.5], gamma=0.1, patience=0) == 1.0  # always improving: never lowered
    rng = np.random.default_rng(0)
    for _ in range(50):
        losses = list(np.round(rng.uniform(0.5, 1.5, int(rng.integers(1, 25))), 2))
        patience, gamma = int(rng.integers(0, 4)), float(rng.choice([0.1, 0.5]))
        got = [plateau_factor(losses[:k], gamma=gamma, patience=patience) for k in range(len(losses) + 1)]
        assert got[-1] == pytest.approx(_plateau_oracle(losses, gamma=gamma, patience=patience))
        assert all(b <= a for a, b in zip(got, got[1:]))  # the rate never rises
    assert lr_factor(OptimSettings(schedule="plateau", lr_gamma=0.1, lr_patience=2), 8, flat) == pytest.approx(0.01)
    for bad in (1.0, 0.0, 2.0):
        with pytest.raises(ValueError, match="0 < lr_gamma < 1"):
            plateau_factor([1.0], gamma=bad, patience=1)


def _pure_noise_task():
    """(x, y, model): 200 rows of 5 random features with random labels, and a linear model: nothing to learn, so
    validation metrics soon stop improving."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 5, generator=g)
    y = F.one_hot(torch.randint(0, 2, (200,), generator=g), 2).float()
    torch.manual_seed(0)
    return x, y, build_model("linear", input_shape=(5,), num_outputs=2)


def test_fit_with_a_plateau_schedule_lowers_the_rate_when_validation_stalls():
    x, y, model = _pure_noise_task()
    settings = OptimSettings(lr=0.5, epochs=12, batch_size=20, schedule="plateau", lr_gamma=0.1, lr_patience=1)
    res = fit(
        model,
        L.get_loss("ce"),
        x[:150],
        y[:150],
        settings=settings,
        generator=torch.Generator().manual_seed(1),
        x_val=x[150:],
        y_val=y[150:],
    )
    lrs = [h["lr"] for h in res.history]
    val_losses = [h["val_loss"] for h in res.history]
    assert lrs[0] == 0.5 and min(lrs) < 0.5 and all(b <= a for a, b in zip(lrs, lrs[1:]))
    for epoch, lr in enumerate(lrs):  # each epoch's rate is the rule applied to the epochs before it
        assert lr == pytest.approx(0.5 * _plateau_oracle(val_losses[:epoch], gamma=0.1, patience=1))
    with pytest.raises(ValueError, match="needs a validation split"):
        fit(model, L.get_loss("ce"), x, y, settings=settings, generator=torch.Generator().manual_seed(1))


def test_early_stopping_stops_and_restores_the_best_weights():
    """Thesis §4.2: EarlyStopping(monitor='val_accuracy', patience=3, restore_best_weights=True)."""
    from dpmix_core.training.train import EarlyStopper

    model = torch.nn.Linear(2, 2)
    stopper = EarlyStopper(2)
    accs = [0.5, 0.7, 0.6, 0.7]  # the best is epoch 2; epochs 3 and 4 are not strictly better
    weights = {}
    stopped = []
    for epoch, acc in enumerate(accs, start=1):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        weights[epoch] = model.weight.clone()
        stopped.append(stopper.update(model, acc, epoch))
    assert stopped == [False, False, False, True]
    stopper.restore(model)
    assert stopper.best_epoch == 2 and torch.equal(model.weight, weights[2])


def test_fit_with_early_stopping_keeps_the_best_epoch():
    x, y, model = _pure_noise_task()
    settings = OptimSettings(lr=0.5, epochs=40, batch_size=20, early_stopping=2)
    res = fit(
        model,
        L.get_loss("ce"),
        x,
        y,
        settings=settings,
        generator=torch.Generator().manual_seed(1),
        x_val=x[:50],
        y_val=y[:50],
    )
    assert res.stopped_early and len(res.history) < 40
    best = max(h["val_accuracy"] for h in res.history)
    assert res.history[res.best_epoch - 1]["val_accuracy"] == best
    assert evaluate(model, x[:50], y[:50])["accuracy"] == pytest.approx(best)  # the best weights are back


def test_collapse_reason_flags_the_constant_predictor_only():
    from dpmix_core.training.collapse import collapse_reason

    flat = [{"loss": 2.30, "val_accuracy": 0.11}, {"loss": 2.30, "val_accuracy": 0.11}]
    learned = [{"loss": 2.30, "val_accuracy": 0.11}, {"loss": 1.20, "val_accuracy": 0.62}]
    assert "learning rate" in collapse_reason(flat, val_majority=0.11, prediction_share=0.5)
    assert "one class for 99 %" in collapse_reason(learned, val_majority=0.11, prediction_share=0.99)
    assert collapse_reason(learned, val_majority=0.11, prediction_share=0.2) is None
    assert collapse_reason(flat[:1], val_majority=None, prediction_share=None) is None
    assert collapse_reason(flat, val_majority=0.11, prediction_share=0.3) is None  # varied predictions: noisy labels


def test_collapse_reason_flags_test_accuracy_at_or_below_chance():
    """Spread-out predictions at chance, or below it (seen: 6.92 % on DPFMix Table 1, uniform eps = 2), are
    flagged: p + 3 sqrt(p (1 - p) / n) is the line, so with p = 0.1135 and n = 10000 it is 12.30 %."""
    from dpmix_core.training.collapse import collapse_reason

    learned = [{"loss": 2.30, "val_accuracy": 0.11}, {"loss": 1.20, "val_accuracy": 0.62}]
    kw = {"val_majority": 0.11, "prediction_share": 0.3, "test_majority": 0.1135, "test_rows": 10000}
    for acc in (0.0692, 0.1135, 0.1229):
        reason = collapse_reason(learned, test_accuracy=acc, **kw)
        assert reason is not None and "no better than always predicting the most frequent class" in reason
        assert f"{100 * acc:.2f} %" in reason and "11.35 % of the 10000 test rows" in reason
    assert collapse_reason(learned, test_accuracy=0.1232, **kw) is None
    assert collapse_reason(learned, test_accuracy=0.7650, **kw) is None
    # a small test split widens the line: 200 rows at p = 0.5 -> 60.6 %
    small = {**kw, "test_majority": 0.5, "test_rows": 200}
    assert collapse_reason(learned, test_accuracy=0.60, **small) is not None
    assert collapse_reason(learned, test_accuracy=0.62, **small) is None
    assert collapse_reason(learned, test_accuracy=0.05, **{**kw, "test_rows": 0}) is None  # no split: no reading


def test_selection_note_says_when_early_stopping_chose_on_a_split_at_chance():
    """The line is the collapse test's, p + 3 sqrt(p (1 - p) / n): with p = 0.1 and n = 6000 it is 11.16 %."""
    from dpmix_core.training.collapse import selection_note

    def history(best: float) -> list[dict]:
        return [{"val_accuracy": 0.100}, {"val_accuracy": best}, {"val_accuracy": 0.104}]

    kw = {"best_epoch": 2, "val_majority": 0.1, "val_rows": 6000}
    note = selection_note(history(0.1116), **kw)
    assert note is not None and note.startswith("early stopping had no signal")
    assert "best 11.2 % against the majority-class rate 10.0 % of its 6000 points" in note and "epoch 2" in note
    assert "labels are the true class" not in note
    assert selection_note(history(0.1117), **kw) is None  # clearly above chance: the choice read something
    labelled = selection_note(history(0.1116), **kw, label_agreement=0.3229)
    assert labelled is not None and "only about 32 % of the release's labels are the true class" in labelled
    assert "labels are the true class" not in selection_note(history(0.1116), **kw, label_agreement=0.95)
    assert selection_note(history(0.1116), **{**kw, "best_epoch": None}) is None  # no early stopping: no choice
    assert selection_note(history(0.1116), **{**kw, "val_majority": None}) is None
    assert selection_note([{"val_accuracy": None}], **kw) is None
    # a small split widens the line: 200 points at p = 0.5 -> 60.6 %
    assert selection_note(history(0.60), **{**kw, "val_majority": 0.5, "val_rows": 200}) is not None


def test_a_run_that_early_stops_on_a_validation_split_at_chance_says_so():
    """Class-centric l = 1 with sigma 5 on hard labels (13 % of them the true class): early stopping's pick is
    flagged in the run's notes with the labels' agreement; without noise it is not."""
    from dpmix_core.mechanisms.mixing import hard_label_agreement

    def run(sigma: float) -> dict:
        syn = SynthesisConfig(
            "class-centric", l=1, T=1000, sigma_x=sigma, sigma_y=sigma, preprocessing="zscore", hard_labels=True
        )
        config = RunConfig("mixing", synthesis=syn, model="linear", lr=1e-2, early_stopping=2, val_fraction=0.2)
        return run_config(config.replace(**{**SMALL, "epochs": 3}))

    blind = run(5.0)
    notes = [n for n in blind["notes"] if n.startswith("early stopping had no signal")]
    assert notes == [blind["selection_note"]]
    assert f"only about {100 * hard_label_agreement(5.0, 10):.0f} % of the release's labels" in notes[0]
    learned = run(0.0)
    assert learned["selection_note"] is None and not any("no signal" in n for n in learned["notes"])


def test_run_with_too_large_lr_is_marked_collapsed_and_a_learning_run_is_not():
    base = RunConfig("non-private", model="thesis-cnn", loss="ce", **{**SMALL, "epochs": 3})
    bad = run_config(base.replace(optimizer="sgd", lr=50.0, momentum=0.0))
    assert bad["collapsed"] is True and "learning rate" in bad["collapse_reason"]
    assert any("collapsed" in n for n in bad["notes"])
    good = run_config(base.replace(model="linear", lr=1e-2))
    assert good["collapsed"] is False and good["collapse_reason"] is None


def test_a_plateau_run_reads_its_validation_loss_and_keeps_its_rate_without_one():
    """schedule "plateau" in a run: the rate falls on the release's validation loss; a release too small to hold
    any point out trains at its initial rate and says so (as early stopping does)."""
    release = SynthesisConfig("dpmix", l=4, T=400, sigma_x=0.2)
    config = RunConfig(
        "mixing",
        synthesis=release,
        model="linear",
        schedule="plateau",
        lr_gamma=0.1,
        lr_patience=0,
        **{**SMALL, "epochs": 6, "val_fraction": 0.1},
    )
    res = run_config(config.replace(lr=5.0))  # far too large: the validation loss stalls and the rate falls
    lrs = [h["lr"] for h in res["history"]]
    assert lrs[0] == 5.0 and min(lrs) < 5.0 and all(b <= a for a, b in zip(lrs, lrs[1:]))
    tiny = run_config(config.replace(synthesis=dataclasses.replace(release, T=4)))  # round(0.1 * 4) = 0 held out
    assert {h["lr"] for h in tiny["history"]} == {config.lr}
    assert any("plateau schedule needs a validation split" in n for n in tiny["notes"])


def test_watching_the_test_split_each_epoch_leaves_the_run_unchanged():
    """run_config(watch=...) (bench/epoch_trajectory.py) sees the run's own model after every epoch, and
    evaluating the test split there draws nothing and trains nothing: the result is bit for bit the unwatched one."""
    config = RunConfig(
        "mixing",
        synthesis=SynthesisConfig("dpmix", l=4, T=400, sigma_x=0.2),
        model="thesis-cnn",
        loss="kl",
        **{**SMALL, "epochs": 3, "val_fraction": 0.1},
    )
    seen = []

    def watch(entry, model, x_test, y_test):
        seen.append((entry["epoch"], evaluate(model, x_test, y_test)["accuracy"], entry["val_loss"]))

    watched = run_config(config, watch=watch)
    plain = run_config(config)
    assert [e for e, _, _ in seen] == [1, 2, 3] and seen[-1][1] == watched["test_accuracy"]
    assert watched["test_accuracy"] == plain["test_accuracy"] and watched["history"] == [
        {**h, "seconds": w["seconds"]} for h, w in zip(plain["history"], watched["history"])
    ]


# --------------------------------------------------------------------------------------------- ScatterNet


def test_scattering_features_shape_and_cache(tmp_path, monkeypatch):
    from dpmix_core.data.scattering import feature_cache_path, scattering_features, scattering_shape

    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(20, 28, 28), dtype=np.uint8)
    feats = scattering_features(imgs)
    assert feats.shape == (20, 81, 7, 7) and feats.dtype == np.float32
    path = feature_cache_path(imgs)
    assert path.exists() and path.parent == tmp_path / "scattering"
    np.testing.assert_array_equal(scattering_features(imgs), feats)  # from the cache
    assert not list(path.parent.glob(".*"))  # no temporary files left
    colour = rng.integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)
    assert scattering_features(colour, cache=False).shape == (2, 243, 8, 8)
    assert scattering_shape((32, 32, 3)) == (243, 8, 8)


# --------------------------------------------------------------------------------------------- DP-SGD


def test_dpsgd_event_is_the_dpsgd_event_and_calibration_does_not_overshoot():
    import dp_accounting

    from dpmix_core.training.dpsgd import calibrate_noise_multiplier, dpsgd_epsilons, dpsgd_event

    ev = dpsgd_event(n=1000, batch_size=50, steps=200, noise_multiplier=1.3)
    assert ev.noise_multiplier() == pytest.approx(1.3)
    assert "DP-SGD" in ev.describe() and "mixing" not in ev.describe()  # never posed as a mixing release
    event = ev.dp_event()
    assert isinstance(event, dp_accounting.SelfComposedDpEvent) and event.count == 200
    assert event.event.sampling_probability == pytest.approx(0.05)
    assert event.event.event.noise_multiplier == pytest.approx(1.3)
    z = calibrate_noise_multiplier(n=1000, batch_size=50, steps=200, target_epsilon=2.0, delta=1e-5)
    eps = dpsgd_epsilons(n=1000, batch_size=50, steps=200, noise_multiplier=z, delta=1e-5)
    assert 1.95 < eps["pld-poisson"] <= 2.0
    assert eps["opacus-prv"] == pytest.approx(2.0, abs=0.2)
    assert eps["opacus-rdp"] == pytest.approx(eps["rdp-poisson"], rel=0.1)


def test_dpsgd_takes_noisy_steps_on_empty_poisson_batches():
    from dpmix_core.training.dpsgd import train_dpsgd

    x = torch.rand(3, 4, generator=torch.Generator().manual_seed(0))
    y = F.one_hot(torch.tensor([0, 1, 1]), 2).float()
    g = torch.Generator().manual_seed(5)
    draws = [int((torch.rand(3, generator=g) < 1 / 3).sum()) for _ in range(15)]
    assert 0 in draws  # this seed draws at least one empty batch
    torch.manual_seed(0)
    model = build_model("linear", input_shape=(4,), num_outputs=2)
    before = model.linear.weight.detach().clone()
    model, res = train_dpsgd(
        model,
        L.get_loss("ce"),
        x,
        y,
        settings=OptimSettings(epochs=5, batch_size=1),
        noise_multiplier=1.0,
        clip=1.0,
        generator=torch.Generator().manual_seed(5),
    )
    assert res.samples == sum(draws)
    assert torch.isfinite(model.linear.weight).all() and not torch.equal(model.linear.weight, before)


def test_dpsgd_rejects_batchnorm_models():
    from dpmix_core.training.dpsgd import check_dpsgd_model

    with pytest.raises(ValueError, match="not DP-SGD compatible") as err:
        check_dpsgd_model(build_model("dpcda-cnn", input_shape=(28, 28), num_outputs=10))
    assert "dpfmix-cnn" in str(err.value) and "use dpcda-cnn," not in str(err.value)  # the others, named
    for name in ("dpcda-cnn-gn", "dpfmix-cnn", "thesis-cnn"):
        check_dpsgd_model(build_model(name, input_shape=(28, 28), num_outputs=10))


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # as train_dpsgd: no input needs a grad
@pytest.mark.parametrize(
    "name,shape", [("thesis-cnn", (28, 28)), ("dpfmix-cnn", (28, 28)), ("scatter-cnn", (81, 7, 7))]
)
def test_dpsgd_per_sample_gradients_on_cpu_are_each_records_own(name, shape):
    """DP-SGD's per-sample module gives every record its own gradient on build_model's channels-last CNNs."""
    import copy

    from dpmix_core.training.dpsgd import per_sample_module

    torch.manual_seed(0)
    model = build_model(name, input_shape=shape, num_outputs=10)
    reference = copy.deepcopy(model)
    gsm = per_sample_module(model)  # (Opacus' hooks fail this on the channels-last convs)
    x = torch.rand(4, int(np.prod(shape)), generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 3, 3, 9])
    torch.nn.functional.cross_entropy(gsm(x), y).backward()
    per_sample = [p.grad_sample for p in model.parameters()]
    for i in range(4):
        reference.zero_grad()
        torch.nn.functional.cross_entropy(reference(x[i : i + 1]), y[i : i + 1]).backward()
        for got, p in zip(per_sample, reference.parameters(), strict=True):
            torch.testing.assert_close(got[i], p.grad, atol=1e-5, rtol=1e-4)  # record i's own loss, not 1/B of it


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_dpsgd_on_the_channels_last_cnn_takes_the_steps_it_takes_in_the_default_layout():
    """Same seeds, same Poisson batches and noise: train_dpsgd moves build_model's NHWC CNN as the NCHW one."""
    from dpmix_core.training.dpsgd import train_dpsgd

    x = torch.rand(64, 784, generator=torch.Generator().manual_seed(0))
    y = F.one_hot(torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(1)), 10).float()
    trained = []
    for layout in (torch.channels_last, torch.contiguous_format):
        torch.manual_seed(0)
        model = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10).to(memory_format=layout)
        model, _ = train_dpsgd(
            model,
            L.get_loss("ce"),
            x,
            y,
            settings=OptimSettings(epochs=2, batch_size=16, lr=1e-2),
            noise_multiplier=0.5,
            clip=1.0,
            generator=torch.Generator().manual_seed(2),
            noise_generator=torch.Generator().manual_seed(3),
        )
        trained.append(model)
    fast, plain = trained
    assert not fast.features[4].weight.is_contiguous()  # conv 2 stayed NHWC through Opacus
    for a, b in zip(fast.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)


# --------------------------------------------------------------------------------------------- end to end


def _check_result(result: dict, config: RunConfig) -> None:
    for key in RESULT_KEYS:
        assert key in result, key
    json.dumps(result, allow_nan=False)  # JSON-ready
    assert 0.0 <= result["test_accuracy"] <= 1.0
    assert result["seconds"] > 0 and result["train_samples_per_second"] > 0
    assert set(result["versions"]) >= {"python", "torch", "numpy", "dpmix_core"}
    assert result["run_key"] == run_key(config)
    assert result["n_test"] == 200
    even, odd = result["test_accuracy_halves"]  # 100 + 100 rows: their mean is the whole-split accuracy
    assert (even + odd) / 2 == pytest.approx(result["test_accuracy"], abs=1e-6)
    if config.task == "regression":
        assert result["test_mse"] is not None and result["test_mse"] >= 0
    else:
        assert result["test_mse"] is None
    assert result["epsilon"], "every run reports an epsilon (inf for non-private)"


MIXING_CASES = [
    ("dpmix", "thesis-cnn", "kl", "pixels", dict(l=16, T=400, target_epsilon=20.0, accountant="lee2019")),
    ("dpmix", "dpcda-cnn-gn", "gkl", "pixels", dict(l=8, T=400, sigma_x=0.1, clamp_negative=True)),
    ("local", "linear", "kl", "pixels", dict(T=300, sigma_x=0.2)),
    ("class-centric", "dpcda-cnn", "ce", "pixels", dict(l=4, T=400, sigma_x=0.05, hard_labels=True)),
    ("class-centric", "thesis-cnn", "kl", "pixels", dict(l=4, T=400, sigma_x=0.3, preprocessing="unit")),
    ("poisson", "thesis-cnn", "gkl", "pixels", dict(l=16, T=400, target_epsilon=8.0, accountant="pld-poisson")),
    ("poisson", "scatter-linear", "gkl", "scattering", dict(l=16, T=400, sigma_x=0.01)),
    (
        "class-centric",
        "linear",
        "ce",
        "scattering",
        dict(l=4, T=400, sigma_x=0.05, preprocessing="zscore", zscore_constants=(0.0, 1.0), features="scattering"),
    ),
    ("poisson", "scatter-linear", "gkl", "scattering", dict(l=16, T=400, sigma_x=0.01, features="scattering")),
    ("poisson", "scatter-cnn", "gkl", "scattering", dict(l=16, T=400, sigma_x=0.01, features="scattering")),
]


@pytest.mark.parametrize("mechanism,model,loss,features,knobs", MIXING_CASES)
def test_mixing_runs(mechanism, model, loss, features, knobs):
    cfg = RunConfig(
        "mixing",
        synthesis=SynthesisConfig(mechanism, **knobs),
        model=model,
        loss=loss,
        features=features,
        input_norm="rms" if mechanism == "poisson" else "none",
        **SMALL,
    )
    rec = Recorder()
    result = run_config(cfg, rec)
    _check_result(result, cfg)
    assert result["privacy_card"]["mechanism"] == mechanism
    assert result["mechanism"] == mechanism
    assert result["delta"] == cfg.synthesis.delta
    accountants = {e["accountant"] for e in result["privacy_card"]["epsilons"]}
    assert set(result["epsilon"]) == accountants
    if "target_epsilon" in knobs:
        assert result["epsilon"][knobs["accountant"]] <= knobs["target_epsilon"] * (1 + 1e-6)
    train_calls = [c for c in rec.calls if c["phase"] == "train"]
    assert len(train_calls) == cfg.epochs
    for c in rec.calls:
        assert set(c) >= {"epoch", "epochs", "loss", "val_accuracy", "test_accuracy", "eta_seconds"}
    assert rec.calls[-1]["phase"] == "done" and rec.calls[-1]["test_accuracy"] == result["test_accuracy"]
    released = knobs.get("features", "pixels")
    assert ("ScatterNet" in result["privacy_card"]["feature_transform"]) == (released == "scattering")
    assert ("ScatterNet" in result["privacy_card"]["release_description"]) == (released == "scattering")


def test_feature_release_normalises_each_record_before_clipping_and_mixing(tmp_path):
    """DPFMix App. E.2: ScatterNet -> per-sample GroupNorm (27 groups) -> clip -> mix; the release names the map."""
    from dpmix_core.data import load_dataset
    from dpmix_core.data.scattering import feature_transform, group_normalise
    from dpmix_core.synthesis.pipeline import planned_release, synthesize
    from dpmix_core.training.data import subsample

    feats = group_normalise(np.random.default_rng(0).normal(5.0, 3.0, size=(4, 81, 7, 7)).astype(np.float32))
    groups = feats.reshape(4, 27, -1)
    np.testing.assert_allclose(groups.mean(axis=2), 0, atol=1e-5)
    np.testing.assert_allclose(groups.std(axis=2), 1, atol=1e-3)

    ds = subsample(load_dataset("embedded"), train_limit=200, test_limit=20)
    cfg = SynthesisConfig("poisson", l=16, T=50, sigma_x=0.0, sigma_y=0.0, features="scattering")
    syn = synthesize(cfg, ds)
    assert syn.data.x.shape == (50, 81 * 7 * 7) and syn.config.features == "scattering"
    assert "GroupNorm (27 groups" in syn.data.release.feature_transform
    assert planned_release(cfg, ds).feature_transform == syn.data.release.feature_transform
    assert planned_release(replace(cfg, features="pixels"), ds).feature_transform == "pixels"
    # without noise each point is a clipped feature vector of real records divided by m: norm <= (sum of clips)/m
    f = feature_transform("scattering", ds.x_train)
    assert np.linalg.norm(f, axis=1).min() > 1  # normalised features need clipping (C = 1)
    assert np.linalg.norm(syn.data.x, axis=1).max() <= 4.0  # ~m records of norm <= 1, divided by m=16
    with pytest.raises(ValueError, match="public bounds"):
        SynthesisConfig("dpmix", sigma_x=0.1, features="scattering")
    with pytest.raises(ValueError, match="pixels"):
        SynthesisConfig("label-laplace", features="scattering")
    with pytest.raises(ValueError, match="features"):
        RunConfig("mixing", synthesis=cfg, model="linear")  # the run must map its test split the same way


BASELINE_CASES = [
    RunConfig("non-private", model="thesis-cnn", loss="ce", **SMALL),
    RunConfig("non-private", model="linear", loss="mse", **SMALL),
    RunConfig("non-private", model="scatter-linear", features="scattering", loss="kl", **SMALL),
    RunConfig("dp-sgd", model="thesis-cnn", loss="ce", dpsgd_epsilon=4.0, **SMALL),
    RunConfig("dp-sgd", model="dpcda-cnn-gn", loss="ce", dpsgd_epsilon=4.0, dpsgd_accountant="rdp-poisson", **SMALL),
    RunConfig("dp-sgd", model="scatter-linear", features="scattering", loss="ce", dpsgd_epsilon=2.0, **SMALL),
    RunConfig("dp-sgd", model="scatter-cnn", features="scattering", loss="ce", dpsgd_epsilon=2.0, **SMALL),
    RunConfig("dp-sgd", model="linear", loss="mse", dpsgd_epsilon=2.0, **SMALL),
    RunConfig(
        "label-laplace",
        synthesis=SynthesisConfig("label-laplace", label_epsilon=2.0),
        model="thesis-cnn",
        loss="kl",
        **SMALL,
    ),
    RunConfig(
        "label-laplace",
        synthesis=SynthesisConfig("label-laplace", label_epsilon=2.0),
        model="linear",
        loss="ce",
        **SMALL,
    ),
    RunConfig(
        "label-laplace",
        synthesis=SynthesisConfig("label-laplace", label_epsilon=1.0, label_task="regression"),
        model="thesis-cnn",
        loss="mse",
        **SMALL,
    ),
    RunConfig("dp-pca", model="linear", loss="ce", pca_components=20, pca_epsilon=1.0, input_norm="rms", **SMALL),
    RunConfig("dp-pca", model="linear", loss="ce", pca_components=10, pca_epsilon=math.inf, **SMALL),
]


@pytest.mark.parametrize("cfg", BASELINE_CASES, ids=lambda c: f"{c.method}-{c.model}-{c.loss}-{c.features}")
def test_baseline_runs(cfg):
    result = run_config(cfg)
    _check_result(result, cfg)
    if cfg.method == "non-private":
        assert result["epsilon"] == {"none": "inf"} and result["privacy_card"] is None
    if cfg.method == "dp-sgd":
        eps = result["epsilon"]
        assert set(eps) == {"pld-poisson", "rdp-poisson", "opacus-rdp", "opacus-prv"}
        assert eps[cfg.dpsgd_accountant] <= cfg.dpsgd_epsilon * (1 + 1e-6)
        assert eps["rdp-poisson"] >= eps["pld-poisson"]  # RDP is the looser bound
        assert result["dpsgd"]["noise_multiplier"] > 0 and result["delta"] == cfg.dpsgd_delta
    if cfg.method == "label-laplace":
        assert result["epsilon"] == {"laplace": cfg.synthesis.label_epsilon}
        assert result["privacy_card"]["epsilons"][0]["epsilon"] == cfg.synthesis.label_epsilon
    if cfg.method == "dp-pca":
        assert result["epsilon"] == {"analytic-gaussian": "inf" if math.isinf(cfg.pca_epsilon) else cfg.pca_epsilon}
        assert any("only the projection is DP" in n for n in result["notes"])


def test_label_laplace_with_huge_epsilon_matches_non_private():
    """Train and test inputs live in one feature space: with (almost) no label noise, label-laplace = non-private."""
    knobs = {**SMALL, "model": "linear", "epochs": 3}
    private = run_config(
        RunConfig("label-laplace", synthesis=SynthesisConfig("label-laplace", label_epsilon=1e7), loss="ce", **knobs)
    )
    public = run_config(RunConfig("non-private", loss="ce", **knobs))
    assert private["test_accuracy"] == pytest.approx(public["test_accuracy"], abs=0.02)
    assert public["test_accuracy"] > 0.5


def test_run_job_takes_the_dict_form():
    cfg = RunConfig("non-private", model="linear", **SMALL)
    a = run_job(cfg.to_dict(), NullReporter())
    b = run_config(cfg)
    assert a["test_accuracy"] == b["test_accuracy"] and a["run_key"] == b["run_key"]


def test_train_repeats_summarises_seeds():
    from dpmix_core.cli.train import train_repeats

    lines: list[str] = []
    out = train_repeats(
        method="dp-sgd",
        dataset="embedded",
        model="linear",
        loss="ce",
        epochs=2,
        repeats=2,
        seed=3,
        device="cpu",
        dpsgd_epsilon=2.0,
        dpsgd_delta=1e-5,
        progress=lines.append,
        train_limit=300,
        test_limit=200,
    )
    json.dumps(out, allow_nan=False)
    assert out["repeats"] == 2 and [r["seed"] for r in out["runs"]] == [3, 4]
    assert out["test_accuracy"] == pytest.approx(sum(r["test_accuracy"] for r in out["runs"]) / 2)
    assert out["test_accuracy_std"] is not None and out["epsilon"]["pld-poisson"] <= 2.0 * (1 + 1e-6)
    assert any("epoch 2/2" in line for line in lines) and lines[0].startswith("[run 1/2, seed 3]")
    single = train_repeats(
        method="non-private",
        dataset="embedded",
        model="linear",
        epochs=1,
        device="cpu",
        train_limit=300,
        test_limit=200,
    )
    assert single["test_accuracy_std"] is None and single["epsilon"] == {"none": "inf"}
    with pytest.raises(ValueError, match="target epsilon"):
        train_repeats(method="dp-sgd", dataset="embedded", model="linear")


def test_same_seed_same_result_on_cpu():
    cfg = RunConfig(
        "mixing",
        synthesis=SynthesisConfig("dpmix", l=8, T=300, sigma_x=0.1),
        model="dpcda-cnn",
        loss="kl",
        **{**SMALL, "epochs": 2},
    )
    a, b = run_config(cfg), run_config(cfg)
    assert a["test_accuracy"] == b["test_accuracy"]
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
    c = run_config(cfg.replace(seed=1))
    assert [h["loss"] for h in c["history"]] != [h["loss"] for h in a["history"]]


def test_dpsgd_same_seed_same_result():
    cfg = RunConfig("dp-sgd", model="linear", loss="ce", dpsgd_epsilon=3.0, **SMALL)
    assert run_config(cfg)["test_accuracy"] == run_config(cfg)["test_accuracy"]


def test_cancel_between_epochs():
    cfg = RunConfig("non-private", model="linear", **{**SMALL, "epochs": 50})
    rec = Recorder(stop_after_epochs=2)
    with pytest.raises(Cancelled):
        run_config(cfg, rec)
    assert sum(1 for c in rec.calls if c["phase"] == "train") == 2


def test_cancel_before_any_work():
    class StopNow(Recorder):
        def should_stop(self):
            return True

    with pytest.raises(Cancelled):
        run_job(RunConfig("non-private", model="linear", **SMALL).to_dict(), StopNow())


def test_cancel_within_an_epoch(monkeypatch):
    """should_stop is polled between batches (rate-limited to ~1 s; here every batch): a long epoch stops early."""
    from dpmix_core.experiments import runner

    monkeypatch.setattr(runner, "STOP_POLL_SECONDS", 0.0)

    class StopAfterPolls(Recorder):
        polls = 0

        def should_stop(self):
            self.polls += 1
            return self.polls > 6

    rec = StopAfterPolls()
    with pytest.raises(Cancelled):
        run_config(RunConfig("non-private", model="linear", **{**SMALL, "batch_size": 8, "epochs": 1}), rec)
    assert not any(c["phase"] == "train" for c in rec.calls)  # stopped inside the first epoch
    assert rec.polls == 7


def test_device_auto_is_cpu_here():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = run_config(RunConfig("non-private", model="linear", **{**SMALL, "device": "auto"}))
    assert result["device"] == "cpu"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DPMIX_SLOW_TESTS"), reason="slow: set DPMIX_SLOW_TESTS=1")
def test_quick_thesis_preset_on_full_mnist():
    from dpmix_core.data import DatasetUnavailableError
    from dpmix_core.experiments.presets import get_preset

    data_dir = os.environ.get("DPMIX_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    run = get_preset("thesis-4.1-quick").runs()[0].replace(data_dir=data_dir, device="cpu")
    try:
        result = run_config(run)
    except DatasetUnavailableError:
        pytest.skip("full MNIST not available")
    assert result["seconds"] <= 90 and result["test_accuracy"] > 0.3


def test_method_registry_has_one_small_class_per_method_name():
    from dpmix_core.experiments.methods import METHODS, Method, get_method
    from dpmix_core.training.names import METHODS as NAMES

    assert sorted(METHODS) == sorted(NAMES)
    for name in NAMES:
        method = get_method(name)
        assert isinstance(method, Method) and method.name == name
    # only the methods whose validation split holds private records say so
    assert {n for n in NAMES if get_method(n).private_validation} == {"dp-sgd", "dp-pca"}
    with pytest.raises(ValueError, match="Unknown method 'bogus'"):
        get_method("bogus")


def test_dpfmix_cnn_is_the_table_5_layer_list():
    """DPFMix Table 5 (padding 2): 285,690 parameters on 28x28 MNIST; its printed 357,690 is a 32x32 input."""
    from dpmix_core.training.models import build_model, count_parameters

    assert count_parameters(build_model("dpfmix-cnn", input_shape=(28, 28), num_outputs=10)) == 285_690
    assert count_parameters(build_model("dpfmix-cnn", input_shape=(32, 32), num_outputs=10)) == 357_690
    assert count_parameters(build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10)) == 127_290


def test_dpfmix_cnn_trains_by_app_e_unless_told_otherwise():
    from dpmix_core.training.protocols import PROTOCOLS

    p = PROTOCOLS["dpfmix-cnn"].options("poisson")
    assert (p["optimizer"], p["lr"], p["schedule"], p["lr_milestones"], p["lr_gamma"], p["batch_size"], p["loss"]) == (
        "adam",
        1e-3,
        "multistep",
        (80, 120, 160),
        0.1,
        256,
        "gkl",
    )
    assert PROTOCOLS["dpfmix-cnn"].paper_epochs == 200


def test_keras_init_is_glorot_uniform_with_zero_biases():
    """init="keras": every conv/dense kernel ~ U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (a conv's fans count its
    kernel area), biases 0 — TensorFlow's defaults, which the thesis's CNN started from; torch's differ."""
    from dpmix_core.training.models import build_model

    torch.manual_seed(0)
    keras = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10, init="keras")
    torch.manual_seed(0)
    default = build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10)
    layers = [m for m in keras.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
    assert len(layers) == 5
    for layer in layers:
        w = layer.weight.detach()
        area = w[0, 0].numel()  # 1 for a dense layer
        fan_in, fan_out = w.shape[1] * area, w.shape[0] * area
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
        assert float(w.std()) == pytest.approx(bound / math.sqrt(3), rel=0.15)  # U(-a, a) has std a / sqrt(3)
        assert float(layer.bias.detach().abs().max()) == 0.0
    # the first dense layer (768 -> 100): Glorot's bound 0.083 is 2.3x torch's 1/sqrt(768) = 0.036
    dense = [m for m in default.modules() if isinstance(m, torch.nn.Linear)][0]
    assert float(dense.weight.detach().abs().max()) <= 1 / math.sqrt(768) and float(dense.bias.detach().abs().max()) > 0
    with pytest.raises(ValueError, match="Unknown init 'glorot'"):
        build_model("thesis-cnn", input_shape=(28, 28), num_outputs=10, init="glorot")


def test_keras_init_keeps_norm_layers_and_reaches_the_run():
    """Norm layers keep scale 1 / shift 0 (Keras' too); RunConfig(init=...) builds the model that way."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.runner import run_config
    from dpmix_core.training.models import build_model

    net = build_model("dpcda-cnn", input_shape=(28, 28), num_outputs=10, init="keras")
    bn = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bn and all(float(m.weight.detach().min()) == 1.0 and float(m.bias.detach().abs().max()) == 0.0 for m in bn)
    kept: dict = {}
    cfg = RunConfig("non-private", model="linear", init="keras", **{**SMALL, "lr": 1e-12})
    run_config(cfg, keep=kept)
    assert float(kept["model"].linear.bias.detach().abs().max()) < 1e-9  # zero at the start, one step of lr 1e-12 later


def test_unclipped_test_inputs_are_the_release_map_without_its_clip():
    """release_feature_map(clip=False) z-scores like the release and skips only the clip; a run evaluates on it."""
    from dpmix_core.data import load_dataset
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.runner import run_config
    from dpmix_core.synthesis.pipeline import SynthesisConfig
    from dpmix_core.training.data import release_feature_map

    ds = load_dataset("embedded")
    syn = SynthesisConfig(
        mechanism="class-centric", l=4, T=200, sigma_x=0.3, sigma_y=0.3, preprocessing="zscore", clip=1.0
    )
    cfg = RunConfig("mixing", model="dpcda-cnn", synthesis=syn, **SMALL)
    syn = cfg.synthesis  # its public z-score constants resolved
    clipped = release_feature_map(syn, ds.x_train)(ds.x_test[:50])
    lifted = release_feature_map(syn, ds.x_train, clip=False)(ds.x_test[:50])
    norms = np.linalg.norm(lifted, axis=1)
    assert np.all(norms > 10) and np.allclose(np.linalg.norm(clipped, axis=1), 1.0, atol=1e-5)
    assert np.allclose(clipped, lifted / norms[:, None], atol=1e-6)  # the same direction: only the clip differs
    with pytest.raises(ValueError, match="only a class-centric z-score release has a clip to lift"):
        release_feature_map(SynthesisConfig(mechanism="dpmix", l=4, T=200, sigma_x=0.3), ds.x_train, clip=False)
    kept: dict = {}
    result = run_config(cfg.replace(test_inputs="unclipped"), keep=kept)
    assert np.linalg.norm(kept["x_test"].reshape(len(kept["x_test"]), -1), axis=1).min() > 10
    assert any("not clipped" in note for note in result["notes"])
    kept_release: dict = {}
    own = run_config(cfg, keep=kept_release)
    assert np.allclose(
        np.linalg.norm(kept_release["x_test"].reshape(len(kept_release["x_test"]), -1), axis=1), 1.0, atol=1e-5
    )
    kept_scaled: dict = {}
    scaled = run_config(cfg.replace(test_inputs="release-scale"), keep=kept_scaled)
    scale = scaled["release_scale"]  # the released points' median norm over the clip (1): their noise dominates
    assert scale == own["release_scale"] == result["release_scale"] and scale > 2
    assert np.allclose(kept_scaled["x_test"], kept_release["x_test"] * scale, rtol=1e-5)
    assert any(f"multiplied by {scale:.4g}" in note for note in scaled["notes"])
    # one trained model read through every loader: training never reads the test split, so a seed trains the same
    # weights under each, and each run's other readings are the other runs' own
    runs = (own, result, scaled)
    for run in runs:
        readings = run["test_accuracy_by_inputs"]
        assert list(readings) == ["release", "unclipped", "release-scale"]
        for source in runs:
            reading = readings[source["config"].get("test_inputs", "release")]
            assert reading["accuracy"] == source["test_accuracy"]
            assert reading["halves"] == source["test_accuracy_halves"]
            assert reading["collapsed"] == source["collapsed"]  # the collapse test read on that loader's predictions


def test_a_release_with_one_test_loader_has_no_readings_by_inputs():
    """Only a clipped class-centric z-score release has a second test loader; the other runs record None."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.runner import run_config
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    syn = SynthesisConfig(mechanism="class-centric", l=4, T=200, sigma_x=0.3, sigma_y=0.3)  # [0,1] pixels: no clip
    assert run_config(RunConfig("mixing", model="linear", synthesis=syn, **SMALL))["test_accuracy_by_inputs"] is None
    assert run_config(RunConfig("non-private", model="linear", **SMALL))["test_accuracy_by_inputs"] is None


class _Fixed(torch.nn.Module):
    """A 'model' that predicts the classes it is given, one row each (as one-hot logits)."""

    def __init__(self, classes: list[int], k: int):
        super().__init__()
        self.logits = torch.nn.functional.one_hot(torch.tensor(classes), k).float()

    def forward(self, x):
        return self.logits[: len(x)]


def test_a_tie_in_the_released_labels_is_shared_not_given_to_the_first_class():
    """Label-only Laplace's labels clamped to [0, 1] tie at 1: argmax alone would call class 0 their label, so a
    model predicting class 0 everywhere would look best on them and the majority rate would read 50 %, not 25 %."""
    from dpmix_core.training.collapse import majority_rate

    y = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.2, 0.9, 0.1], [1.0, 1.0, 1.0]])
    x = torch.zeros(4, 2)
    assert evaluate(_Fixed([0, 0, 0, 0], 3), x, y)["accuracy"] == pytest.approx((1 / 2 + 1 / 2 + 0 + 1 / 3) / 4)
    assert evaluate(_Fixed([1, 2, 1, 2], 3), x, y)["accuracy"] == pytest.approx((1 / 2 + 1 / 2 + 1 + 1 / 3) / 4)
    # without ties the accuracy is argmax's, as before: one-hot rows and class indices agree
    onehot = torch.nn.functional.one_hot(torch.tensor([2, 0, 1, 1]), 3).float()
    assert evaluate(_Fixed([2, 0, 0, 1], 3), x, onehot)["accuracy"] == 0.75
    assert evaluate(_Fixed([2, 0, 0, 1], 3), x, torch.tensor([2, 0, 1, 1]))["accuracy"] == 0.75
    # shares: class 0 holds 1/2 + 1/2 + 0 + 1/3 of a row, class 1 1/2 + 0 + 1 + 1/3, class 2 0 + 1/2 + 0 + 1/3
    assert majority_rate(y.numpy()) == pytest.approx((1 / 2 + 1 + 1 / 3) / 4)
    assert majority_rate(onehot.numpy()) == 0.5 and majority_rate(np.array([2, 0, 1, 1])) == 0.5
