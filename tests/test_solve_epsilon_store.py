"""Solve for epsilon on a stored sweep: the CLI (`solve-epsilon`) and the Train & trade-offs panel (AppTest)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpmix_core.cli.main import main
from dpmix_core.experiments.presets import get_preset
from dpmix_core.experiments.trade_offs import narrow_spec, sweep_jobs
from dpmix_core.runtime.store import ResultStore

PAGE = str(Path(__file__).resolve().parents[1] / "app_pages" / "train_tradeoffs.py")
SERIES = "ScatterNet feature mixing (Poisson), PLD-certified eps"
# mean accuracy per target epsilon, three seeds each (+-0.01 around the mean)
CURVE = {1.0: 0.80, 2.0: 0.86, 4.0: 0.90, 8.0: 0.92}


def _stored_sweep(path: Path, collapsed: bool = False) -> str:
    """dpfmix-table3-quick at 3 seeds in a fresh store, with finished runs of one series only (``collapsed``: runs
    that never learned, at chance)."""
    spec = narrow_spec(get_preset("dpfmix-table3-quick"), repeats=3)
    store = ResultStore(path)
    sweep = store.create_sweep(spec.name, spec.to_dict())
    for kind, config, key in sweep_jobs(spec):
        if config["label"] != SERIES:
            continue
        eps = config["synthesis"]["target_epsilon"]
        run = store.submit(kind, config, key, sweep=sweep.id)
        store.claim(run.id)
        accuracy = 0.1 if collapsed else CURVE[eps] + 0.01 * (config["seed"] - 1)
        result = {"test_accuracy": accuracy, "epsilon": {"pld-poisson": eps}, "delta": 1e-5}
        store.finish(run.id, {**result, "collapsed": True} if collapsed else result)
    return spec.name


def test_cli_reads_the_epsilon_off_a_stored_sweep(tmp_path, capsys):
    store = tmp_path / "results.sqlite"
    name = _stored_sweep(store)
    assert main(["solve-epsilon", "--sweep", name, "--accuracy", "88", "--store", str(store), "--json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)
    assert answer["series"] == SERIES and answer["status"] == "reached"
    assert answer["epsilon_name"] == "target epsilon"
    assert 2.0 < answer["epsilon"] < 4.0 and answer["epsilon_low"] <= answer["epsilon"] <= answer["epsilon_high"]
    assert main(["solve-epsilon", "--sweep", name, "--accuracy", "0.97", "--store", str(store)]) == 0
    assert "not reached within the sweep's ε range" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--sweep", "nope", "--accuracy", "0.9"], "No sweep 'nope'"),
        (["--sweep", "S", "--accuracy", "0.9", "--series", "x"], "no series 'x'"),
        (["--sweep", "S", "--accuracy", "0.9", "--epsilon", "lee2019"], "no ε from 'lee2019'"),
        (["--sweep", "S", "--accuracy", "-3"], "fraction"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    store = tmp_path / "results.sqlite"
    name = _stored_sweep(store)
    argv = ["solve-epsilon", *[name if a == "S" else a for a in extra], "--store", str(store)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and err.count("\n") == 1


def test_cli_says_every_run_collapsed_rather_than_no_curve(tmp_path, capsys):
    store = tmp_path / "results.sqlite"
    name = _stored_sweep(store, collapsed=True)
    assert main(["solve-epsilon", "--sweep", name, "--accuracy", "0.5", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "every run of sweep" in err and "collapsed" in err and err.count("\n") == 1


def test_page_answers_in_words(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path))
    _stored_sweep(tmp_path / "results.sqlite")
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    assert at.selectbox(key="tr_solve_series").value == SERIES
    assert any("needs ε ≈ 2.83 for 88" not in i.value and "needs ε ≈" in i.value for i in at.info)
    at.number_input(key="tr_solve_acc").set_value(88.0).run()
    (answer,) = [i.value for i in at.info if "needs ε" in i.value or "not reached" in i.value]
    assert "needs ε ≈ 2.83 for 88 % test accuracy" in answer and "between" in answer
    at.number_input(key="tr_solve_acc").set_value(99.0).run()
    assert not at.exception and any("not reached within the sweep's ε range" in i.value for i in at.info)
