"""BatchNorm recalibration (AdaBN), the diagnostic of the release/test shift: exact statistics, the shift it
undoes on a hand-built model, its errors, and the runner field it fills."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dpmix_core.training.batchnorm import has_batchnorm, recalibrate_batchnorm
from dpmix_core.training.collapse import SHIFT_NOTE_GAP, shift_note
from dpmix_core.training.models import build_model
from dpmix_core.training.train import evaluate


def _bn_net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4, 2))


def test_statistics_are_the_average_over_the_inputs_and_the_model_is_left_alone():
    torch.manual_seed(0)
    net = _bn_net().eval()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    x = torch.randn(1000, 3) * 3 + 5
    out = recalibrate_batchnorm(net, x, batch_size=250)
    h = net[0](x).detach()
    bn = out[1]
    torch.testing.assert_close(bn.running_mean, h.mean(0), rtol=1e-5, atol=1e-5)  # equal batches: the overall mean
    batch_vars = torch.stack([h[i : i + 250].var(0) for i in range(0, 1000, 250)])  # unbiased, as BatchNorm keeps
    torch.testing.assert_close(bn.running_var, batch_vars.mean(0), rtol=1e-5, atol=1e-5)
    assert not out.training and not any(m.training for m in out.modules())  # dropout off too
    for k, v in net.state_dict().items():  # the original keeps its statistics and weights
        assert torch.equal(v, before[k]), k
    torch.testing.assert_close(out[0].weight, net[0].weight)


def test_a_last_batch_of_one_row_is_folded_into_the_previous_one():
    net = _bn_net()
    out = recalibrate_batchnorm(net, torch.randn(501, 3), batch_size=250)  # batches 250, 251: no 1-row batch
    assert int(out[1].num_batches_tracked) == 2


@pytest.mark.parametrize(("rows", "batch_size"), [(1, 10), (10, 1)])
def test_too_few_rows_or_a_batch_of_one_is_refused(rows, batch_size):
    with pytest.raises(ValueError, match="at least 2"):
        recalibrate_batchnorm(_bn_net(), torch.randn(rows, 3), batch_size=batch_size)


def test_it_undoes_the_noisy_statistics_that_make_a_model_predict_one_class():
    """Statistics of noisy inputs (variance 100) shrink clean inputs (±1) to ±0.1, below the bias: one class.

    Re-estimated on the clean inputs (variance ≈ 1) the same weights separate them perfectly.
    """
    bn = nn.BatchNorm1d(1)
    bn.running_mean.zero_()
    bn.running_var.fill_(100.0)
    head = nn.Linear(1, 2)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[-1.0], [1.0]]))
        head.bias.copy_(torch.tensor([0.25, -0.25]))  # class 1 iff the normalised input exceeds 0.25
    model = nn.Sequential(bn, head).eval()
    y = torch.arange(200) % 2
    x = (2.0 * y - 1.0).unsqueeze(1)  # clean: -1 for class 0, +1 for class 1
    stale = evaluate(model, x, y)
    assert stale["accuracy"] == 0.5 and stale["prediction_share"] == 1.0
    fixed = evaluate(recalibrate_batchnorm(model, x), x, y)
    assert fixed["accuracy"] == 1.0


@pytest.mark.parametrize(("name", "expected"), [("dpcda-cnn", True), ("dpcda-cnn-gn", False), ("thesis-cnn", False)])
def test_has_batchnorm(name, expected):
    model = build_model(name, input_shape=(28, 28), num_outputs=10)
    assert has_batchnorm(model) is expected


def test_shift_note_only_for_a_real_gap_says_it_is_a_diagnostic_and_becomes_the_collapse_cause():
    from dpmix_core.training.collapse import collapse_reason

    assert shift_note(0.40, 0.40 + SHIFT_NOTE_GAP - 0.01, collapsed=False) is None
    assert shift_note(None, 0.9, collapsed=True) is None and shift_note(0.1, None, collapsed=True) is None
    cause = shift_note(0.1135, 0.6363, collapsed=True)
    assert cause.startswith("likely cause:") and "not a failure to learn" in cause and "dpcda-cnn-gn" in cause
    assert "63.63 %" in cause and "11.35 %" in cause and "diagnostic" in cause and "not this run's result" in cause
    reason = collapse_reason([{"loss": 2.3, "val_accuracy": 0.3}], val_majority=0.11, prediction_share=1.0, cause=cause)
    assert reason.endswith(f"; {cause}.") and "learning rate" not in reason
    assert "part of the gap" in shift_note(0.42, 0.67, collapsed=False)


def test_runner_reports_the_recalibrated_accuracy_for_batchnorm_models_only():
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.runner import run_config
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    small = dict(dataset="embedded", train_limit=300, test_limit=200, epochs=1, device="cpu", batch_size=64)
    syn = SynthesisConfig(
        "class-centric",
        l=4,
        T=300,
        sigma_x=0.3,
        hard_labels=True,
        preprocessing="zscore",
        zscore_constants=(33.3, 78.6),
    )
    bn = run_config(RunConfig("mixing", synthesis=syn, model="dpcda-cnn", loss="ce", **small))
    assert 0.0 <= bn["test_accuracy_bn_recalibrated"] <= 1.0
    assert "evaluate" in bn["timings"]
    plain = run_config(RunConfig("mixing", synthesis=syn, model="dpcda-cnn-gn", loss="ce", **small))
    assert plain["test_accuracy_bn_recalibrated"] is None
    assert not any("AdaBN" in n for n in plain["notes"])


def test_the_run_table_says_why_a_run_collapsed_else_the_shift_else_a_resume_else_nothing(tmp_path):
    from dpmix_core.experiments.trade_offs import run_table
    from dpmix_core.runtime.store import ResultStore

    store = ResultStore(tmp_path / "runs.sqlite")
    results = [
        {"test_accuracy": 0.11, "collapse_reason": "collapsed: one class", "test_accuracy_bn_recalibrated": 0.6},
        {"test_accuracy": 0.42, "collapse_reason": None, "test_accuracy_bn_recalibrated": 0.67},
        {"test_accuracy": 0.42, "collapse_reason": None, "test_accuracy_bn_recalibrated": 0.43},
        {"test_accuracy": 0.42, "collapse_reason": None},  # no BatchNorm
        {"test_accuracy": 0.42, "collapse_reason": None, "resumed_from_epoch": 37},
    ]
    ids = []
    for i, result in enumerate(results):
        run = store.submit("tests.fake_jobs:noop", {"method": "mixing", "seed": i})
        store.claim(run.id)
        store.finish(run.id, result)
        ids.append(run.id)
    notes = list(run_table(store, ids)["note"])
    assert notes[0] == "collapsed: one class"
    assert "67.00 %" in notes[1] and "42.00 %" in notes[1] and "AdaBN" in notes[1]
    assert notes[2] == "" and notes[3] == ""
    assert notes[4] == "continued from a checkpoint after epoch 37 (an earlier worker ran those)"

    stopped = store.submit("tests.fake_jobs:noop", {"method": "mixing", "seed": 9})
    store.claim(stopped.id)
    store.update_progress(stopped.id, {"epoch": 41, "epochs": 200, "eta_seconds": 5000.0})
    assert run_table(store, [stopped.id])["eta (s)"][0] == 5000.0
    store.mark_interrupted(stopped.id, "worker gone")
    table = run_table(store, [stopped.id])
    assert table["note"][0] == ""  # no checkpoint kept: nothing to continue from
    assert table["eta (s)"].isna()[0]  # a run that is not running has no time left to show
    store.log_dir.mkdir(parents=True, exist_ok=True)
    store.checkpoint_path(stopped.id).write_bytes(b"state")
    note = run_table(store, [stopped.id])["note"][0]
    assert note == "training state saved near epoch 41: launch the sweep again to continue from it"
    store.submit("tests.fake_jobs:noop", {"method": "mixing", "seed": 9}, requeue="interrupted")
    store.claim(stopped.id)
    store.fail(stopped.id, "boom")
    note = run_table(store, [stopped.id])["note"][0]  # failed before reporting an epoch this time
    assert note == "training state saved: run `sweep … --retry-failed` to continue from it"
