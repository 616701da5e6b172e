"""python -m dpmix_core train / sweep: the contract scripts rely on."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dpmix_core.cli.main import main
from dpmix_core.runtime.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "--dataset",
    "embedded",
    "--l",
    "4",
    "--T",
    "300",
    "--sigma-x",
    "0.2",
    "--model",
    "linear",
    "--epochs",
    "1",
    "--device",
    "cpu",
]


def test_train_json_contract(capsys):
    code = main(["train", "--mechanism", "dpmix", *TINY, "--repeats", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["repeats"] == 2 and 0 <= out["test_accuracy"] <= 1
    assert out["test_accuracy_std"] is not None and out["seconds"] > 0
    assert set(out["epsilon"]) == {"lee2019", "dpcda", "rdp-wor"}


def test_train_baseline_and_errors(capsys):
    assert main(["train", "--method", "non-private", *TINY, "--json"]) == 0
    assert 0 <= json.loads(capsys.readouterr().out)["test_accuracy"] <= 1
    code = main(["train", "--method", "dp-sgd", *TINY])
    err = capsys.readouterr().err
    assert code == 2 and "target epsilon" in err and err.count("\n") == 1


def test_train_protocol_options_reach_the_run(capsys):
    code = main(
        [
            "train",
            "--method",
            "non-private",
            *TINY,
            "--lr",
            "0.01",
            "--batch-size",
            "32",
            "--schedule",
            "multistep",
            "--milestones",
            "1,2",
            "--lr-gamma",
            "0.1",
            "--early-stopping",
            "2",
            "--val-fraction",
            "0.2",
            "--init",
            "keras",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    cfg = out["config"]
    assert cfg["init"] == "keras"
    assert code == 0 and out["collapsed"] == 0 and out["collapse_reason"] is None
    assert (
        cfg["lr"],
        cfg["batch_size"],
        cfg["schedule"],
        cfg["lr_milestones"],
        cfg["lr_gamma"],
        cfg["early_stopping"],
        cfg["val_fraction"],
    ) == (0.01, 32, "multistep", [1, 2], 0.1, 2, 0.2)


def test_train_defaults_follow_the_model_paper_and_collapse_is_said(capsys):
    from dpmix_core.training.protocols import PROTOCOLS, protocol_options

    assert protocol_options("thesis-cnn")["lr"] == 1e-4 and protocol_options("thesis-cnn")["early_stopping"] == 3
    assert protocol_options("thesis-cnn")["init"] == "keras"  # the thesis's code is TensorFlow
    assert protocol_options("dpfmix-cnn")["init"] == protocol_options("dpcda-cnn")["init"] == "torch"
    assert protocol_options("scatter-linear")["lr_milestones"] == (80, 120, 160)
    assert protocol_options("thesis-cnn", method="dp-sgd") == {}
    dpmix = protocol_options("thesis-cnn", mechanism="dpmix")  # thesis §4.1: Keras' KL to soft labels, all epochs
    assert (dpmix["loss"], dpmix["early_stopping"]) == ("gkl", None)
    assert protocol_options("thesis-cnn", mechanism="class-centric")["loss"] == "ce"  # §4.2: argmax labels
    assert "Table 1" in PROTOCOLS["dpcda-cnn"].source and "App. E" in PROTOCOLS["scatter-linear"].source
    code = main(["train", "--method", "non-private", *TINY, "--model", "thesis-cnn", "--json"])
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert code == 0 and (cfg["lr"], cfg["batch_size"], cfg["early_stopping"], cfg["schedule"]) == (1e-4, 32, 3, "step")
    code = main(
        [
            "train",
            "--method",
            "non-private",
            *TINY,
            "--model",
            "thesis-cnn",
            "--optimizer",
            "sgd",
            "--lr",
            "50",
            "--early-stopping",
            "0",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "WARNING: 1 of 1 run(s) collapsed" in text and "learning rate" in text


def test_train_says_when_early_stopping_chose_on_a_validation_split_at_chance(capsys):
    """l = 1 with sigma 5 on hard labels: the release's validation split is at chance, so the epoch kept is
    arbitrary; the text says so in one line and the JSON carries each run's sentence."""
    blind = ["--mechanism", "class-centric", "--l", "1", "--T", "1000", "--sigma-x", "5", "--sigma-y", "5"]
    args = ["train", *TINY, *blind, "--hard-labels", "--early-stopping", "2", "--epochs", "3", "--val-fraction", "0.2"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "note (1 of 1 run(s)): early stopping had no signal" in text and "labels are the true class" in text
    assert main([*args, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["selection_note"].startswith("early stopping had no signal")


def test_train_clamps_a_unit_release_for_the_thesis_cnn_as_the_thesis_does_and_says_so(capsys):
    """The thesis's code ends its release with X[X < 0] = 0: train's default for its CNN, where the release allows it."""
    from dpmix_core.training.protocols import PROTOCOLS

    assert PROTOCOLS["thesis-cnn"].clamp_negative
    assert not any(p.clamp_negative for name, p in PROTOCOLS.items() if name != "thesis-cnn")
    tiny = [a if a != "linear" else "thesis-cnn" for a in TINY]

    def synthesis(*extra: str) -> dict:
        assert main(["train", *tiny, *extra, "--json"]) == 0
        return json.loads(capsys.readouterr().out)["config"]["synthesis"]

    assert synthesis("--mechanism", "class-centric")["clamp_negative"] is True
    assert synthesis("--mechanism", "dpmix")["clamp_negative"] is True
    assert synthesis("--mechanism", "class-centric", "--no-clamp-negative")["clamp_negative"] is False
    # z-scored data: a negative value is data, not noise; the default does not apply (no refusal either)
    assert synthesis("--mechanism", "class-centric", "--preprocessing", "zscore-private")["clamp_negative"] is False
    assert synthesis("--mechanism", "poisson")["clamp_negative"] is False
    # another model's paper does not clamp
    assert main(["train", "--mechanism", "dpmix", *TINY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["synthesis"]["clamp_negative"] is False
    # text mode says it, once, with the way out
    assert main(["train", "--mechanism", "dpmix", *tiny]) == 0
    assert "note: negative released values set to 0, as thesis-cnn's paper does" in capsys.readouterr().out
    # asked for where it cannot apply: one line, exit 2
    assert main(["train", "--mechanism", "poisson", *tiny, "--clamp-negative"]) == 2


def test_synthesize_does_not_clamp_unless_asked(tmp_path):
    """No model, no paper: synthesize releases the values as mixed unless --clamp-negative is given."""
    import numpy as np

    for extra, any_negative in (([], True), (["--clamp-negative"], False)):
        out = tmp_path / f"r{len(extra)}.npz"
        assert main(["synthesize", "--mechanism", "dpmix", *TINY[:8], "--out", str(out), *extra]) == 0
        with np.load(out) as release:
            assert bool((release["x"] < 0).any()) is any_negative


def test_synthesize_feature_release_card_names_the_extractor(tmp_path, capsys):
    out = tmp_path / "feats.npz"
    code = main(
        [
            "synthesize",
            "--dataset",
            "embedded",
            "--mechanism",
            "poisson",
            "--features",
            "scattering",
            "--l",
            "64",
            "--T",
            "100",
            "--sigma-x",
            "0.05",
            "--out",
            str(out),
            "--json",
        ]
    )
    card = json.loads(capsys.readouterr().out)
    assert code == 0 and card["parameters"]["features"] == "scattering"
    assert "ScatterNet" in card["feature_transform"] and "J=2, L=8" in card["feature_transform"]
    assert all("per-sample GroupNorm" in e["assumptions"] for e in card["epsilons"])
    import numpy as np

    assert np.load(out)["x"].shape == (100, 81 * 7 * 7)


def _tiny_spec(tmp_path, head: str):
    """A one-epoch linear-model sweep on the embedded data: ``head`` gives name, axis, values (and repeats)."""
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        head + '[base]\nmethod = "mixing"\ndataset = "embedded"\nmodel = "linear"\nepochs = 1\ndevice = "cpu"\n'
        '[base.synthesis]\nmechanism = "dpmix"\nl = 4\nT = 200\nsigma_x = 0.5\n'
    )
    return spec


def test_sweep_spec_file_runs_in_background_workers_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    spec = _tiny_spec(tmp_path, 'name = "tiny"\naxis = "sigma"\nvalues = [0.1, 1.0]\n')
    csv = tmp_path / "out.csv"
    code = main(["sweep", str(spec), "--export", str(csv), "--poll", "0.2", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["done"] == 2 and summary["exported_rows"] == 2 and csv.exists()
    assert main(["sweep", str(spec), "--poll", "0.2", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["reused"] == 2 and again["new"] == 0  # nothing recomputed
    assert len(ResultStore().list_runs(sweep="tiny")) == 2
    assert main(["sweep", str(spec), "--poll", "0.2"]) == 0  # text mode ends with the report's command, ready to run
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("report: python -m dpmix_core sweep-report tiny --store ")
    out = tmp_path / "tiny.html"
    assert main([*shlex.split(line.removeprefix("report: python -m dpmix_core "))[:-1], str(out)]) == 0
    assert "Trade-off sweep" in out.read_text()


def test_a_sweep_along_l_ends_with_each_series_best_l_chosen_on_the_even_rows(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    spec = tmp_path / "tiny-l.toml"  # little noise and a few epochs: the linear model learns (no collapsed pick)
    spec.write_text(
        'name = "tiny-l"\naxis = "l"\nvalues = [2, 8]\n[base]\nmethod = "mixing"\ndataset = "embedded"\n'
        'model = "linear"\nepochs = 5\ndevice = "cpu"\n[base.synthesis]\nmechanism = "dpmix"\nl = 4\nT = 2000\n'
        "sigma_x = 0.02\n"
    )
    assert main(["sweep", str(spec), "--poll", "0.2", "--json"]) == 0
    (pick,) = json.loads(capsys.readouterr().out)["best_axis"]
    halves = {r.config["synthesis"]["l"]: r.result["test_accuracy_halves"] for r in ResultStore().list_runs()}
    assert pick["chosen"] == max(halves, key=lambda l: (halves[l][0], -l))  # the best even rows (a tie: smaller)
    assert pick["accuracy_odd_rows"] == halves[pick["chosen"]][1] and pick["values_compared"] == 2
    assert main(["sweep", str(spec), "--poll", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "best ℓ per series (chosen on the even test rows, read on the odd" in out
    assert f"ℓ = {pick['chosen']:g} chosen on the even test rows, {100 * pick['accuracy_odd_rows']:.2f} %" in out


def test_what_the_sweeps_summary_reads_is_imported_before_its_runs_start(tmp_path):
    """A sweep runs for hours; a checkout updated meanwhile must not meet the summary's lazy imports (an old
    trade_offs already loaded, a new quick_vs_full from disk: ImportError after every run had finished). In a fresh
    interpreter, every module the summary uses is loaded by the time the runs start."""
    spec = _tiny_spec(tmp_path, 'name = "tiny"\naxis = "sigma"\nvalues = [0.1]\n')
    code = (
        "import sys\nimport dpmix_core.cli.sweep as s\n"
        "def fake(*a, **k):\n"
        "    wanted = ('dpmix_core.experiments.quick_vs_full', 'dpmix_core.experiments.best_axis')\n"
        "    print('LOADED', all(m in sys.modules for m in wanted))\n"
        "    raise SystemExit(0)\n"
        "s.run_sweep = fake\n"
        "from dpmix_core.cli.main import main\n"
        f"main(['sweep', {str(spec)!r}, '--store', {str(tmp_path / 'r.sqlite')!r}])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "LOADED True" in out.stdout, out.stderr[-2000:]


@pytest.mark.parametrize("spec, message", [("preset:nope", "Unknown preset"), ("/nonexistent.toml", "")])
def test_sweep_bad_spec_exit_2(spec, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    code = main(["sweep", spec])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_synthesize_streaming_from_memmap(tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.integers(0, 256, (2000, 16), dtype=np.uint8))
    np.save(tmp_path / "Y.npy", rng.integers(0, 3, 2000))
    out = tmp_path / "release"
    code = main(
        [
            "synthesize",
            "--memmap",
            str(tmp_path / "X.npy"),
            "--labels",
            str(tmp_path / "Y.npy"),
            "--num-classes",
            "3",
            "--mechanism",
            "dpmix",
            "--l",
            "4",
            "--T",
            "500",
            "--sigma-x",
            "0.1",
            "--out",
            str(out),
            "--json",
        ]
    )
    card = json.loads(capsys.readouterr().out)
    assert code == 0 and np.load(out / "x.npy").shape == (500, 16) and card["epsilons"]
    code = main(
        [
            "synthesize",
            "--memmap",
            str(tmp_path / "X.npy"),
            "--mechanism",
            "class-centric",
            "--l",
            "4",
            "--T",
            "10",
            "--sigma-x",
            "1",
            "--out",
            str(tmp_path / "o2"),
        ]
    )
    assert code == 2 and "streams" in capsys.readouterr().err
    common = ["synthesize", "--memmap", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "Y.npy")]
    clip = ["--num-classes", "3", "--mechanism", "dpmix", "--preprocessing", "clip", "--sigma-x", "0.1"]
    code = main([*common, *clip, "--out", str(tmp_path / "o3")])
    err = capsys.readouterr().err
    assert code == 2 and "dpmix on [0,1] features only" in err and err.count("\n") == 1


def test_sweep_backend_option_is_validated(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    code = main(["sweep", "preset:thesis-4.1-quick", "--backend", "slurm"])
    assert code == 2 and "invalid choice" in capsys.readouterr().err


def test_sweep_threads_per_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    spec = _tiny_spec(tmp_path, 'name = "threads"\naxis = "sigma"\nvalues = [0.5]\n')
    assert main(["sweep", str(spec), "--max-parallel", "1", "--threads", "3", "--poll", "0.2", "--json"]) == 0
    captured = capsys.readouterr()
    assert "up to 1 at once, 3 thread(s) each" in captured.err and json.loads(captured.out)["done"] == 1
    code = main(["sweep", str(spec), "--backend", "ray", "--threads", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "--threads needs --backend local" in err and err.count("\n") == 1
    assert main(["sweep", str(spec), "--threads", "0"]) == 2


def test_sweep_in_pieces_reuses_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    spec = _tiny_spec(tmp_path, 'name = "pieces"\naxis = "l"\nvalues = [2, 4]\nrepeats = 2\n')
    assert main(["sweep", str(spec), "--values", "4", "--repeats", "1", "--poll", "0.2", "--json"]) == 0
    piece = json.loads(capsys.readouterr().out)
    assert piece["done"] == 1 and piece["new"] == 1
    assert main(["sweep", str(spec), "--poll", "0.2", "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert whole["done"] == 4 and whole["reused"] == 1 and whole["new"] == 3
    code = main(["sweep", str(spec), "--values", "8"])
    err = capsys.readouterr().err
    assert code == 2 and "not on the l axis" in err and err.count("\n") == 1


def test_sweep_piece_by_series_and_seeds_runs_the_specs_own_runs(tmp_path, capsys, monkeypatch):
    """`--series` and `--seeds` pick a piece whose runs the whole sweep later reuses; a bad pick is one line."""
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    head = 'name = "picks"\naxis = "l"\nvalues = [2, 4]\nrepeats = 2\nmechanisms = ["dpmix", "poisson"]\n'
    spec = _tiny_spec(tmp_path, head)
    args = ["sweep", str(spec), "--series", "mixing: poisson", "--seeds", "1", "--values", "4"]
    assert main([*args, "--poll", "0.2", "--json"]) == 0
    piece = json.loads(capsys.readouterr().out)
    assert piece["done"] == 1 and piece["new"] == 1
    (run,) = ResultStore().list_runs()
    assert run.config["label"] == "mixing: poisson" and run.config["seed"] == 1 and run.config["synthesis"]["l"] == 4
    assert main(["sweep", str(spec), "--poll", "0.2", "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert whole["done"] == 8 and whole["reused"] == 1 and whole["new"] == 7
    for bad, says in (
        (["--series", "mixing: nope"], "not in 'picks' (its series: mixing: dpmix; mixing: poisson)"),
        (["--seeds", "2"], "seeds [2] are not among the seeds of 'picks' (0..1); --repeats 3 widens it"),
        (["--seeds", "1", "--repeats", "1"], "not among the seeds of --repeats 1 (0..0)"),
        (["--seeds", "-1"], "'-1' is not a whole number >= 0"),
        (["--seeds", "x"], "'x' is not a number"),
    ):
        code = main(["sweep", str(spec), *bad])
        err = capsys.readouterr().err
        assert code == 2 and says in err and err.count("\n") == 1, (bad, err)
    assert len(ResultStore().list_runs()) == 8  # nothing queued by a refused pick


def _offline(monkeypatch, tmp_path, dataset: str) -> None:
    """No data folder, an empty cache, and ``dataset``'s mirror a closed local port: a download fails at once."""
    import socket

    from dpmix_core.data.catalog import MIRRORS, Mirror

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setitem(MIRRORS, dataset, Mirror(f"http://127.0.0.1:{port}/", MIRRORS[dataset].files))
    for var in ("DPMIX_DATA_DIR", "DPMIX_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def test_sweep_on_another_dataset_is_its_own_sweep_without_the_papers_numbers(tmp_path, capsys, monkeypatch):
    from dpmix_core.experiments.trade_offs import expand_cli_spec

    name, runs, spec = expand_cli_spec("preset:dpfmix-table1-quick", dataset="embedded", values=[1.0], repeats=1)
    assert name == "dpfmix-table1-quick@embedded" and len(runs) == 3  # one run per series
    assert {cfg["dataset"] for _, cfg, _ in runs} == {"embedded"} and "published" not in spec
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    code = main(["sweep", "preset:dp-pca-quick", "--dataset", "nope"])
    assert code == 2 and "invalid choice" in capsys.readouterr().err
    # offline: a clear one-line error before anything is queued (the mirror is a closed local port)
    _offline(monkeypatch, tmp_path, "fashion-mnist")
    code = main(["sweep", "preset:dp-pca-quick", "--dataset", "fashion-mnist"])
    err = capsys.readouterr().err
    assert code == 2 and "Fashion-MNIST not found" in err and "--data-dir" in err and err.count("\n") == 1
    assert ResultStore().list_runs() == []


def test_a_preset_on_a_dataset_that_is_not_here_fails_once_before_queueing(tmp_path, capsys, monkeypatch):
    """No --dataset: the preset's own MNIST, not here and not downloadable, is one line and exit 2 before any run
    is queued (it was one 'MNIST not found' failure per run, 8 for dp-pca-quick)."""
    _offline(monkeypatch, tmp_path, "mnist")
    monkeypatch.setenv("DPMIX_SYSTEM_DATA_DIRS", "")
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    code = main(["sweep", "preset:dp-pca-quick"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: MNIST not found") and err.count("\n") == 1
    assert ResultStore().list_runs() == []
    assert main(["sweep", "preset:dp-pca-quick", "--dataset", "embedded", "--values", "1"]) == 0
    assert [run.status for run in ResultStore().list_runs()] == ["done"]  # a dataset that is here goes on to run


def test_train_reports_the_batchnorm_diagnostic_and_says_when_it_is_far_above(capsys, monkeypatch):
    import dpmix_core.cli.train as cli_train

    args = ["train", "--mechanism", "class-centric", *TINY, "--model", "dpcda-cnn", "--loss", "ce"]
    code = main([*args, "--json"])
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert code == 0 and 0 <= runs[0]["test_accuracy_bn_recalibrated"] <= 1
    real = cli_train.run_config

    def shifted(cfg, reporter=None):  # the same run, as if its BatchNorm statistics were far off clean inputs
        result = real(cfg, reporter)
        return {**result, "test_accuracy": 0.11, "test_accuracy_bn_recalibrated": 0.64, "collapsed": False}

    monkeypatch.setattr(cli_train, "run_config", shifted)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "test accuracy 11.00 %" in out and "AdaBN" in out and "64.00 %" in out and "not this run's result" in out


def test_train_checkpoint_dir_continues_an_interrupted_run(capsys, monkeypatch, tmp_path):
    """--checkpoint-dir: Ctrl-C during epoch 3, the same command again continues after epoch 2 and ends
    where an uninterrupted run ends; the folder is empty once the run is finished."""
    from dpmix_core.cli import train as cli_train

    monkeypatch.setenv("DPMIX_CHECKPOINT_S", "0")  # every epoch, so a short test has some
    args = ["train", "--mechanism", "dpmix", *TINY, "--epochs", "5", "--batch-size", "16"]
    assert main([*args, "--json"]) == 0
    reference = json.loads(capsys.readouterr().out)
    folder = tmp_path / "ckpt"

    def interrupt(line: str) -> None:
        if "epoch 3/5" in line:
            raise KeyboardInterrupt

    def interrupted_run() -> None:
        with pytest.raises(KeyboardInterrupt):
            cli_train.train_repeats(
                method="mixing",
                dataset="embedded",
                synthesis=_tiny_synthesis(),
                model="linear",
                epochs=5,
                device="cpu",
                batch_size=16,
                progress=interrupt,
                checkpoint_dir=folder,
            )
        assert len(list(folder.glob("*.ckpt"))) == 1

    interrupted_run()
    assert main([*args, "--checkpoint-dir", str(folder)]) == 0
    assert "continued from its checkpoint after epoch 2" in capsys.readouterr().err
    interrupted_run()
    assert main([*args, "--json", "--checkpoint-dir", str(folder)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["runs"][0]["resumed_from_epoch"] == 2 and not list(folder.glob("*.ckpt"))
    assert resumed["test_accuracy"] == reference["test_accuracy"]


def _tiny_synthesis():
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    return SynthesisConfig("dpmix", l=4, T=300, sigma_x=0.2)


def test_train_checkpoint_dir_that_cannot_be_used_is_one_line(capsys, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("x")
    for bad, says in ((file, "is a file"), (tmp_path / "no" / "such", "does not exist")):
        code = main(["train", "--mechanism", "dpmix", *TINY, "--checkpoint-dir", str(bad)])
        err = capsys.readouterr().err
        assert code == 2 and says in err and err.count("\n") == 1


def test_train_dpmix_on_clipped_records(capsys):
    """--mechanism dpmix --preprocessing clip: DPFMix's DPMix, records clipped to ||x|| <= Cx, ||y|| <= Cy."""
    code = main(["train", "--mechanism", "dpmix", *TINY, "--preprocessing", "clip", "--clip-x", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    syn = out["config"]["synthesis"]
    assert code == 0 and (syn["preprocessing"], syn["clip_x"]) == ("clip", 2.0)
    assert main(["train", "--mechanism", "dpmix", *TINY, "--json"]) == 0
    unit = json.loads(capsys.readouterr().out)
    assert out["epsilon"]["rdp-wor"] < unit["epsilon"]["rdp-wor"]  # the same noise, a smaller sensitivity
    code = main(["train", "--mechanism", "poisson", *TINY, "--preprocessing", "clip"])
    err = capsys.readouterr().err
    assert code == 2 and "is for dpmix" in err and err.count("\n") == 1


def test_train_plateau_schedule_reaches_the_run_and_is_refused_without_validation(capsys):
    """--schedule plateau --lr-patience N: the run's rate falls on the release's validation loss; one line without it."""
    args = ["train", "--mechanism", "dpmix", *TINY, "--schedule", "plateau", "--lr-gamma", "0.1"]
    code = main([*args, "--lr-patience", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["config"]["schedule"] == "plateau" and out["config"]["lr_patience"] == 0
    code = main([*args, "--val-fraction", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "needs val_fraction > 0" in err and err.count("\n") == 1 and "Traceback" not in err


def test_train_test_inputs_reaches_the_run_and_is_refused_where_nothing_is_clipped(capsys):
    """--test-inputs unclipped: DP-CDA's z-score release evaluated without its clip; one line where there is no clip."""
    zscore = ["--mechanism", "class-centric", "--preprocessing", "zscore"]
    code = main(["train", *zscore, *TINY, "--test-inputs", "unclipped", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["config"]["test_inputs"] == "unclipped"
    readings = out["runs"][0]["test_accuracy_by_inputs"]  # the same model read through both loaders
    assert readings["unclipped"]["accuracy"] == out["runs"][0]["test_accuracy"] and "release" in readings
    assert main(["train", *zscore, *TINY, "--test-inputs", "unclipped"]) == 0
    printed = capsys.readouterr().out
    assert "note: test images z-scored as the release's records but not clipped" in printed
    other = f"the same model(s) read with --test-inputs release: {100 * readings['release']['accuracy']:.2f} %"
    assert other in printed and "--test-inputs unclipped:" not in printed
    assert main(["train", *zscore, *TINY, "--test-inputs", "release-scale"]) == 0
    printed = capsys.readouterr().out
    assert "then scaled to the released points' median norm" in printed and "--test-inputs unclipped:" in printed
    code = main(["train", "--mechanism", "dpmix", *TINY, "--test-inputs", "unclipped"])
    err = capsys.readouterr().err
    assert code == 2 and "test_inputs 'unclipped'" in err and err.count("\n") == 1 and "Traceback" not in err


def test_runs_the_data_cannot_make_are_left_out_with_their_reason():
    """thesis-4.2-l-quick on the embedded sample: l = 512 of one class needs 512 records a class, the sample has 400;
    that run is named and left out, the others kept (it was queued and failed after the rest had run)."""
    from dpmix_core.experiments.presets import get_preset
    from dpmix_core.experiments.trade_offs import runs_the_data_can_make, sweep_jobs, with_dataset

    jobs = sweep_jobs(with_dataset(get_preset("thesis-4.2-l-quick"), "embedded"))
    kept, left_out = runs_the_data_can_make(jobs)
    assert sorted(cfg["synthesis"]["l"] for _, cfg, _ in kept) == [32, 64, 128, 256]
    assert len(left_out) == 1 and "fewer than l=512" in left_out[0] and left_out[0].endswith("(1 run)")
    own = ("kind", {"dataset": "embedded", "data_file": "mine.csv", "method": "mixing"}, None)
    assert runs_the_data_can_make([own]) == ([own], ())  # one's own file: check_job_datasets refuses, not this


def test_a_sweep_runs_what_the_data_can_make_and_says_what_it_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "r.sqlite"))
    head = 'name = "tiny-cc"\naxis = "l"\nvalues = [4, 1000]\n'
    spec = _tiny_spec(tmp_path, head)
    spec.write_text(spec.read_text().replace('mechanism = "dpmix"', 'mechanism = "class-centric"'))
    assert main(["sweep", str(spec), "--poll", "0.2", "--json"]) == 0
    err = capsys.readouterr().err
    assert "left out (the data cannot make them; not queued): “mixing”: class" in err and "l=1000" in err
    assert [run.config["synthesis"]["l"] for run in ResultStore().list_runs(sweep="tiny-cc")] == [4]
    assert main(["sweep", str(spec), "--values", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the data can make none of the sweep's runs: “mixing”: class") and err.count("\n") == 1


def test_label_only_laplace_is_one_option_not_two(capsys):
    """--method label-laplace or --mechanism label-laplace alone trains label-only Laplace (each alone was refused,
    asking for the other); a mixing mechanism beside the method is a contradiction, said in one line."""
    rest = ["--dataset", "embedded", "--label-epsilon", "4", "--model", "linear", "--epochs", "1", "--json"]
    for flag in ("--method", "--mechanism"):
        assert main(["train", flag, "label-laplace", *rest]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["epsilon"] == {"laplace": 4.0} and 0 <= out["test_accuracy"] <= 1
    code = main(["train", "--method", "label-laplace", "--mechanism", "poisson", *rest])
    err = capsys.readouterr().err
    assert code == 2 and "drop --mechanism" in err and err.count("\n") == 1


def test_save_spec_writes_a_preset_to_edit_whose_runs_are_the_presets(tmp_path, monkeypatch, capsys):
    from dpmix_core.experiments.trade_offs import expand_cli_spec

    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "store.sqlite"))
    out = tmp_path / "my_sweep.json"
    preset = ["sweep", "preset:thesis-4.2-l-quick", "--dataset", "embedded"]
    assert main([*preset, "--save-spec", str(out)]) == 0
    assert "then python -m dpmix_core sweep" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    assert saved["name"] == "my_sweep" and saved["base"]["dataset"] == "embedded" and saved["values"][0] == 32
    assert not (tmp_path / "store.sqlite").exists()  # nothing ran, nothing was queued
    name, jobs, _ = expand_cli_spec(str(out))
    _, preset_jobs, _ = expand_cli_spec("preset:thesis-4.2-l-quick", dataset="embedded")
    assert name == "my_sweep" and [key for *_, key in jobs] == [key for *_, key in preset_jobs]  # runs reused
    before = out.read_text()
    assert main([*preset, "--save-spec", str(out)]) == 2  # the file may hold the user's edits
    assert "never replaced" in capsys.readouterr().err and out.read_text() == before
    assert main([*preset, "--save-spec", str(tmp_path / "other.json"), "--values", "32"]) == 2
    assert "leave out --values" in capsys.readouterr().err and not (tmp_path / "other.json").exists()
    assert main([*preset, "--save-spec", str(tmp_path / "x.toml")]) == 2
    assert "give a FILE.json" in capsys.readouterr().err
