"""Resumable training: a run stopped after any epoch and continued from its checkpoint ends exactly where an
unstopped run ends; a checkpoint that does not match the run is ignored with its reason; the store owns the file."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpmix_core.training import losses as L
from dpmix_core.training.cancel import Cancelled
from dpmix_core.training.checkpoint import DEFAULT_EVERY_S, Checkpointer, data_fingerprint
from dpmix_core.training.train import OptimSettings, fit

SETTINGS = OptimSettings(
    lr=0.05, epochs=6, batch_size=32, schedule="multistep", lr_milestones=(2, 4), lr_gamma=0.5, early_stopping=10
)


def _problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(240, 6, generator=g)
    y = F.one_hot((x[:, 0] + 0.5 * x[:, 1] > 0).long(), 2).float()
    return x[:200], y[:200], x[200:], y[200:]


def _model() -> nn.Module:
    torch.manual_seed(3)  # dropout makes the global RNG part of the state a checkpoint must carry
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))


def _fit(model, data, settings=SETTINGS, *, checkpoint=None, stop=None):
    x, y, xv, yv = data
    return fit(
        model,
        L.get_loss("ce"),
        x,
        y,
        settings=settings,
        generator=torch.Generator().manual_seed(1),
        x_val=xv,
        y_val=yv,
        checkpoint=checkpoint,
        stop=stop,
    )


class _StopAfter:
    """A stop check that cancels the run when epoch ``n`` + 1 starts (it is forced once per epoch)."""

    def __init__(self, n: int) -> None:
        self.n, self.forced = n, 0

    def __call__(self, force: bool = False) -> None:
        if force:
            self.forced += 1
            if self.forced > self.n:
                raise Cancelled("stopped for the test")


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _without_seconds(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


@pytest.mark.parametrize("stopped_after", [1, 3, 5])
def test_a_resumed_run_ends_bit_for_bit_where_an_unstopped_run_ends(tmp_path, stopped_after):
    data = _problem()
    reference = _model()
    ref = _fit(reference, data)

    ckpt = Checkpointer(tmp_path / "run.ckpt", "key-1", every_s=0)
    with pytest.raises(Cancelled):
        _fit(_model(), data, checkpoint=ckpt, stop=_StopAfter(stopped_after))
    assert ckpt.path.is_file()
    torch.manual_seed(12345)  # another process: the global RNG is wherever it is
    resumed = _model()
    res = _fit(resumed, data, checkpoint=ckpt, stop=None)
    assert res.resumed_from == stopped_after and res.checkpoint_notes == []
    assert _same_weights(resumed, reference)
    assert _without_seconds(res.history) == _without_seconds(ref.history)
    assert res.samples == ref.samples and res.best_epoch == ref.best_epoch


def _cnn() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(
        nn.Unflatten(1, (1, 6, 6)), nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(), nn.Linear(16, 2)
    )


def test_a_checkpoint_in_the_default_layout_resumes_into_a_channels_last_model(tmp_path):
    """A run checkpointed before build_model kept CNNs channels-last (its Adam state NCHW) resumes correctly now."""
    x, y = torch.randn(200, 36, generator=torch.Generator().manual_seed(0)), _problem()[1]
    settings = OptimSettings(lr=0.05, epochs=4, batch_size=32)
    reference = _cnn()
    _fit(reference, (x, y, None, None), settings)
    ckpt = Checkpointer(tmp_path / "run.ckpt", "key-1", every_s=0)
    with pytest.raises(Cancelled):
        _fit(_cnn(), (x, y, None, None), settings, checkpoint=ckpt, stop=_StopAfter(2))
    resumed = _cnn().to(memory_format=torch.channels_last)
    assert not resumed[3].weight.is_contiguous()  # the layout the saved optimizer state does not have
    res = _fit(resumed, (x, y, None, None), settings, checkpoint=ckpt)
    assert res.resumed_from == 2
    for a, b in zip(resumed.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)  # (0.1 off without match_state_layout)
    assert max((a - b).abs().max() for a, b in zip(resumed.parameters(), _cnn().parameters(), strict=True)) > 1e-2


def test_without_a_file_or_with_every_epoch_done_training_just_runs(tmp_path):
    data = _problem()
    ckpt = Checkpointer(tmp_path / "sub" / "run.ckpt", "key-1", every_s=0)
    model = _model()
    res = _fit(model, data, checkpoint=ckpt)
    assert res.resumed_from is None and res.checkpoint_notes == []
    # the last epoch is not saved (the run is about to finish); the one before it is
    state, why = ckpt.load(_identity_of(ckpt))
    assert why is None and state is not None and state["epoch"] == SETTINGS.epochs - 1


def _identity_of(ckpt: Checkpointer) -> dict:
    state = torch.load(ckpt.path, weights_only=True)
    return {k: state[k] for k in ("settings", "data", "model_spec")}


def test_a_float32_checkpoint_names_no_precision_so_one_saved_before_the_option_resumes(tmp_path):
    ckpt = Checkpointer(tmp_path / "run.ckpt", "key-1", every_s=0)
    with pytest.raises(Cancelled):
        _fit(_model(), _problem(), checkpoint=ckpt, stop=_StopAfter(2))
    settings = json.loads(_identity_of(ckpt)["settings"])
    assert "precision" not in settings and settings["lr"] == SETTINGS.lr


def test_the_interval_limits_how_often_it_saves(tmp_path):
    ckpt = Checkpointer(tmp_path / "run.ckpt", "key-1", every_s=3600)
    _fit(_model(), _problem(), checkpoint=ckpt)
    assert not ckpt.path.exists()  # a run shorter than the interval never writes one


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("key", "belongs to another run"),
        ("data", "another data"),
        ("settings", "another settings"),
        ("precision", "another settings"),
        ("model", "another model_spec"),
        ("garbage", "could not be read"),
        ("format", "another format"),
    ],
)
def test_a_checkpoint_that_does_not_match_is_ignored_with_its_reason(tmp_path, change, reason):
    data = _problem()
    ckpt = Checkpointer(tmp_path / "run.ckpt", "key-1", every_s=0)
    with pytest.raises(Cancelled):
        _fit(_model(), data, checkpoint=ckpt, stop=_StopAfter(2))
    settings, model = SETTINGS, _model()
    if change == "key":
        ckpt = Checkpointer(ckpt.path, "key-2", every_s=0)
    elif change == "data":
        data = _problem(seed=1)
    elif change == "settings":
        settings = OptimSettings(**{**SETTINGS.__dict__, "lr": 0.01})
    elif change == "precision":  # a float32 checkpoint does not continue in bfloat16
        settings = OptimSettings(**{**SETTINGS.__dict__, "precision": "bf16"})
    elif change == "model":
        torch.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 2))
    elif change == "garbage":
        ckpt.path.write_bytes(b"not a checkpoint")
    elif change == "format":
        state = torch.load(ckpt.path, weights_only=True)
        torch.save({**state, "format": 99}, ckpt.path)
    before = copy.deepcopy(model.state_dict())
    res = _fit(model, data, settings, checkpoint=ckpt)
    assert res.resumed_from is None
    assert len(res.checkpoint_notes) == 1 and reason in res.checkpoint_notes[0]
    assert "trained from epoch 0" in res.checkpoint_notes[0]
    assert len(res.history) == settings.epochs and not _same_weights_dict(before, model.state_dict())


def _same_weights_dict(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_save_that_fails_is_noted_once_and_training_goes_on(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    ckpt = Checkpointer(blocker / "run.ckpt", "key-1", every_s=0)  # its folder cannot be made
    res = _fit(_model(), _problem(), checkpoint=ckpt)
    assert len(res.history) == SETTINGS.epochs
    assert len(res.checkpoint_notes) == 1 and res.checkpoint_notes[0].startswith("checkpoint not saved")


def test_checkpointer_validates_its_fields(tmp_path):
    with pytest.raises(ValueError, match="run key"):
        Checkpointer(tmp_path / "c", "")
    with pytest.raises(ValueError, match="every_s"):
        Checkpointer(tmp_path / "c", "k", every_s=-1)
    with pytest.raises(ValueError, match="every_s"):
        Checkpointer(tmp_path / "c", "k", every_s=float("nan"))
    assert Checkpointer(str(tmp_path / "c"), "k").path == tmp_path / "c"


def test_data_fingerprint_sees_values_shapes_and_dtypes():
    a = torch.arange(6, dtype=torch.float32)
    assert data_fingerprint(a) == data_fingerprint(a.clone())
    assert data_fingerprint(a) != data_fingerprint(a.reshape(2, 3))
    assert data_fingerprint(a) != data_fingerprint(a.double())
    b = a.clone()
    b[3] += 1e-6
    assert data_fingerprint(a) != data_fingerprint(b)


# ----------------------------------------------------------------------------------- the runner and the store

SMALL_RUN = dict(dataset="embedded", train_limit=600, test_limit=200, device="cpu", batch_size=16, model="linear")


def _mixing_config(epochs: int):
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    return RunConfig(
        "mixing", synthesis=SynthesisConfig("dpmix", l=8, T=600, sigma_x=0.2), loss="kl", epochs=epochs, **SMALL_RUN
    )


class _Reporter:
    """A worker-like reporter: a checkpoint file, saves every epoch, stops after ``stop_after`` train epochs."""

    def __init__(self, path, stop_after: int | None = None) -> None:
        self.path, self.stop_after, self.epochs = path, stop_after, 0
        self.checkpoint_every_s = 0.0

    def checkpoint_path(self):
        return self.path

    def progress(self, **fields) -> None:
        if fields.get("phase") == "train":
            self.epochs += 1

    def should_stop(self) -> bool:
        return self.stop_after is not None and self.epochs >= self.stop_after


def test_a_run_stopped_and_started_again_continues_and_says_so(tmp_path):
    from dpmix_core.experiments.runner import NullReporter, run_config

    config = _mixing_config(epochs=5)
    reference = run_config(config, NullReporter())
    assert reference["resumed_from_epoch"] is None

    path = tmp_path / "run.ckpt"
    with pytest.raises(Cancelled):
        run_config(config, _Reporter(path, stop_after=3))
    resumed = run_config(config, _Reporter(path))
    assert resumed["resumed_from_epoch"] == 3
    assert any("resumed from a checkpoint after epoch 3 of 5" in n for n in resumed["notes"])
    assert resumed["test_accuracy"] == reference["test_accuracy"]
    assert _without_seconds(resumed["history"]) == _without_seconds(reference["history"])


def test_a_reporter_without_a_checkpoint_path_trains_without_one(tmp_path):
    from dpmix_core.experiments.runner import NullReporter, checkpointer

    config = _mixing_config(epochs=1)
    assert checkpointer(NullReporter(), config) is None
    made = checkpointer(_Reporter(tmp_path / "c.ckpt"), config)
    assert made is not None and made.every_s == 0 and made.path == tmp_path / "c.ckpt"


def test_the_store_keeps_a_checkpoint_until_the_run_is_done_or_deleted(tmp_path):
    from dpmix_core.runtime.store import ResultStore

    store = ResultStore(tmp_path / "results.sqlite")
    run = store.submit("fake_jobs:quick", {"x": 1})
    path = store.checkpoint_path(run.id)
    assert path.parent == store.log_dir and path != store.log_path(run.id)

    def make() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"state")

    store.claim(run.id, pid=1)
    make()
    assert store.fail(run.id, "boom", pid=1) and path.exists()  # a failed run keeps it, to resume from
    store.submit("fake_jobs:quick", {"x": 1}, requeue="failed")
    assert path.exists()
    store.claim(run.id, pid=1)
    assert store.finish(run.id, {"value": 2}, pid=1) and not path.exists()  # done: no longer needed

    other = store.submit("fake_jobs:quick", {"x": 2})
    make2 = store.checkpoint_path(other.id)
    make2.write_bytes(b"state")
    store.delete_run(other.id)
    assert not make2.exists()


def test_a_killed_worker_leaves_a_checkpoint_and_the_next_worker_resumes(tmp_path):
    """The whole path: a worker process is killed (SIGKILL) during epoch 4, its run is declared interrupted
    and queued again, a new worker continues after epoch 3, and the result equals a run never stopped."""
    import os
    import subprocess
    import sys

    from fake_jobs import TESTS_DIR

    from dpmix_core.experiments.runner import NullReporter, run_config
    from dpmix_core.runtime.store import ResultStore

    config = _mixing_config(epochs=6)
    store = ResultStore(tmp_path / "results.sqlite")
    run = store.submit("fake_jobs:killed_run", config.to_dict())
    root = TESTS_DIR.parent
    env = {
        **os.environ,
        "PYTHONPATH": f"{root}{os.pathsep}{TESTS_DIR}",
        "DPMIX_CHECKPOINT_S": "0",
        "DPMIX_WORKER_THREADS": "1",
    }
    command = [sys.executable, "-m", "dpmix_core.cli.worker", str(run.id), "--store", str(store.path)]
    killed = subprocess.run(command, cwd=root, env={**env, "FAKE_KILL_AT_EPOCH": "4"}, capture_output=True, timeout=120)
    assert killed.returncode == -9 and store.get(run.id).status == "running"  # nothing was written on the way out
    assert store.checkpoint_path(run.id).is_file()
    assert store.mark_interrupted(run.id, "worker gone")  # what the launcher's dead-worker check does

    store.submit(run.kind, run.config, run.key, requeue="interrupted")
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = store.get(run.id).result
    assert result["resumed_from_epoch"] == 3 and not store.checkpoint_path(run.id).exists()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers ran
    try:
        reference = run_config(config, NullReporter())
    finally:
        torch.set_num_threads(threads)
    assert result["test_accuracy"] == reference["test_accuracy"]
    assert _without_seconds(result["history"]) == _without_seconds(reference["history"])


@pytest.mark.parametrize(
    ("text", "expected"), [("", None), ("0", 0.0), ("30", 30.0), ("abc", None), ("-1", None), ("nan", None)]
)
def test_the_checkpoint_interval_comes_from_the_environment_or_the_default(monkeypatch, text, expected):
    from dpmix_core.runtime.worker import checkpoint_interval

    monkeypatch.setenv("DPMIX_CHECKPOINT_S", text)
    assert checkpoint_interval() == expected
    assert Checkpointer(Path("c"), "k").every_s == DEFAULT_EVERY_S == 60.0  # None: this one default
