"""Training in bfloat16 (``precision="bf16"``): refused where the CPU has no native bfloat16, a different run from
float32, forward passes in bfloat16 while weights, losses and evaluation stay float32, and it still learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpmix_core.cli.main import main
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training import losses as L
from dpmix_core.training import precision as P
from dpmix_core.training.train import OptimSettings, evaluate, fit

X86_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
X86_NO_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512dq\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"
ARM_NO_BF16 = "processor\t: 0\nFeatures\t: fp asimd crc32\n"
CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [(X86_BF16, True), (X86_NO_BF16, False), (ARM_BF16, True), (ARM_NO_BF16, False), ("model name: ?\n", None)],
)
def test_native_bfloat16_is_read_from_the_cpus_feature_list(cpuinfo, native):
    assert P.cpu_has_native_bf16(cpuinfo) is native
    amx = X86_NO_BF16.replace("avx512dq", "avx512dq amx_bf16 amx_tile")
    assert P.cpu_has_native_bf16(amx) is True


def test_bf16_is_refused_on_a_cpu_that_would_emulate_it_or_cannot_say():
    P.check_precision("fp32", CPU, cpuinfo=X86_NO_BF16)  # float32 runs anywhere
    P.check_precision("bf16", CPU, cpuinfo=X86_BF16)
    with pytest.raises(ValueError, match="no native bfloat16.*slower than fp32") as exc:
        P.check_precision("bf16", CPU, cpuinfo=X86_NO_BF16)
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="cannot tell"):
        P.check_precision("bf16", CPU, cpuinfo="model name: ?\n")
    with pytest.raises(ValueError, match="Unknown precision 'fp16'"):
        P.check_precision("fp16", CPU)


def _mixing(**kw) -> RunConfig:
    syn = SynthesisConfig("dpmix", l=4, T=200, sigma_x=0.5, sigma_y=0.5)
    return RunConfig("mixing", dataset="embedded", synthesis=syn, epochs=1, **kw)


def test_float32_keeps_every_stored_run_key_and_bf16_is_another_run():
    fp32 = _mixing()
    assert "precision" not in fp32.identity()
    as_before = {k: v for k, v in fp32.to_dict().items() if k != "precision"}  # a config stored before the option
    assert run_key(as_before) == run_key(fp32) == run_key(_mixing(precision="fp32"))
    bf16 = _mixing(precision="bf16")
    assert bf16.identity()["precision"] == "bf16" and run_key(bf16) != run_key(fp32)
    assert RunConfig.from_dict(bf16.to_dict()) == bf16


def test_bf16_is_refused_for_dp_sgd_and_means_nothing_for_a_closed_form_fit():
    with pytest.raises(ValueError, match="DP-SGD trains in float32"):
        RunConfig("dp-sgd", dataset="embedded", precision="bf16")
    with pytest.raises(ValueError, match="Unknown precision"):
        _mixing(precision="half")
    lsq = _mixing(model="corrected-lsq", precision="bf16")
    assert lsq.precision == "fp32"


def _problem():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 8, generator=g)
    labels = (x[:, 0] - x[:, 1] > 0).long()
    return x, F.one_hot(labels, 2).float(), labels


def test_bf16_runs_the_forward_pass_in_bfloat16_and_keeps_weights_and_evaluation_in_float32():
    x, y, labels = _problem()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    seen: list[torch.dtype] = []
    model[0].register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    settings = OptimSettings(lr=1e-2, epochs=8, batch_size=60, precision="bf16")
    res = fit(model, L.get_loss("ce"), x, y, settings=settings, generator=torch.Generator().manual_seed(1))
    assert set(seen) == {torch.bfloat16}  # every training step
    assert all(p.dtype == torch.float32 for p in model.parameters())
    seen.clear()
    accuracy = evaluate(model, x, labels)["accuracy"]
    assert set(seen) == {torch.float32}
    assert res.history[-1]["loss"] < 0.5 * res.history[0]["loss"] and accuracy > 0.9
    with pytest.raises(ValueError, match="precision must be one of"):
        OptimSettings(precision="fp16")


def test_float32_training_is_unchanged_by_the_option():
    x, y, _ = _problem()
    weights = []
    for settings in (
        OptimSettings(lr=1e-2, epochs=2, batch_size=60),
        OptimSettings(lr=1e-2, epochs=2, batch_size=60, precision="fp32"),
    ):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
        fit(model, L.get_loss("ce"), x, y, settings=settings, generator=torch.Generator().manual_seed(1))
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(weights[0], weights[1])


def test_cli_refuses_bf16_on_a_cpu_without_it_in_one_line_before_any_work(monkeypatch, capsys):
    monkeypatch.setattr(P, "cpu_has_native_bf16", lambda cpuinfo=None: False)
    args = ["train", "--method", "mixing", "--mechanism", "dpmix", "--l", "4", "--T", "200", "--sigma-x", "0.5"]
    rc = main([*args, "--sigma-y", "0.5", "--epochs", "1", "--device", "cpu", "--precision", "bf16"])
    err = capsys.readouterr().err
    assert rc == 2 and "no native bfloat16" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_local_sweep_of_bf16_runs_is_refused_before_anything_is_queued(monkeypatch, capsys, tmp_path):
    from dpmix_core.runtime.store import ResultStore

    monkeypatch.setattr(P, "cpu_has_native_bf16", lambda cpuinfo=None: False)
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        'name = "tiny"\naxis = "sigma"\nvalues = [0.5]\n[base]\nmethod = "mixing"\ndataset = "embedded"\n'
        'model = "linear"\nepochs = 1\ndevice = "cpu"\nprecision = "bf16"\n'
        '[base.synthesis]\nmechanism = "dpmix"\nl = 4\nT = 200\nsigma_x = 0.5\n'
    )
    rc = main(["sweep", str(spec)])
    err = capsys.readouterr().err
    assert rc == 2 and "no native bfloat16" in err and err.count("\n") == 1
    assert ResultStore().list_runs() == []  # no sweep, no run queued
