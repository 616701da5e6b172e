"""The CLI contract that scripts rely on."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpmix_core.cli.main import ALL_HEADER, main
from dpmix_core.privacy.accountant_names import ACCOUNTANT_NAMES
from dpmix_core.privacy.accountants import MixingSetting, get_accountant

BASE = ["--n", "60000", "--l", "256", "--T", "10000", "--delta", str(1 / 60000)]
SIGMA = ["--sigma-x", "0.0711", "--sigma-y", "0.0711"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_epsilon_json_thesis(capsys):
    code, out, _ = run(capsys, "epsilon", "--accountant", "lee2019", *BASE, *SIGMA, "--json")
    assert code == 0
    obj = json.loads(out)
    assert obj["accountant"] == "lee2019" and obj["delta"] == pytest.approx(1 / 60000)
    assert obj["epsilon"] == pytest.approx(15.00, abs=0.01)
    assert obj["guarantee"] == "rigorous upper bound"


def test_accounting_defaults_are_the_apps(capsys):
    """Without --accountant, --sigma-y and --delta: every accountant, lambda = 1 and delta = 1e-5, as on the app."""
    argv = ["--n", "60000", "--l", "256", "--T", "10000", "--sigma-x", "0.0711"]
    code, out, _ = run(capsys, "epsilon", *argv, "--json")
    assert code == 0
    objs = json.loads(out)
    assert [o["accountant"] for o in objs] == list(ACCOUNTANT_NAMES)
    explicit = main(["epsilon", *argv, "--sigma-y", "0.0711", "--delta", "1e-5", "--accountant", "all", "--json"])
    assert explicit == 0 and json.loads(capsys.readouterr().out) == objs
    assert all(o["delta"] == 1e-5 for o in objs)
    lee = get_accountant("lee2019")
    by_hand = lee.epsilon(lee.release_for(MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)), 1e-5)
    assert objs[0]["epsilon"] == pytest.approx(by_hand.epsilon)
    # a different sigma_y is honoured (not overwritten by the lambda = 1 default)
    code, out, _ = run(capsys, "epsilon", *argv, "--sigma-y", "1.0", "--accountant", "lee2019", "--json")
    assert json.loads(out)["epsilon"] != pytest.approx(by_hand.epsilon)


def test_text_output_of_every_accountant_says_the_releases_differ(capsys):
    argv = ["--n", "60000", "--l", "256", "--T", "10000"]
    for command, extra in (("epsilon", ["--sigma-x", "0.0711"]), ("calibrate", ["--target-epsilon", "15"])):
        code, out, _ = run(capsys, command, *argv, *extra)
        assert code == 0 and out.splitlines()[0] == ALL_HEADER
        code, out, _ = run(capsys, command, *argv, *extra, "--accountant", "rdp-wor")
        assert code == 0 and ALL_HEADER not in out


def test_all_prints_a_list_with_every_accountant(capsys):
    code, out, _ = run(capsys, "epsilon", "--accountant", "all", *BASE, *SIGMA, "--json", "--clip", "1")
    names = [o["accountant"] for o in json.loads(out)]
    assert code == 0 and names == ["lee2019", "dpcda", "gdp-clt", "rdp-poisson", "pld-poisson", "rdp-wor"]


def test_calibrate_json(capsys):
    code, out, _ = run(
        capsys, "calibrate", "--accountant", "lee2019", *BASE, "--target-epsilon", "15", "--sigma-ratio", "1", "--json"
    )
    obj = json.loads(out)
    assert code == 0 and obj["sigma_x"] == pytest.approx(0.0711, abs=2e-4) and obj["epsilon"] <= 15


def test_calibrate_all_is_a_list(capsys):
    code, out, _ = run(
        capsys, "calibrate", "--accountant", "all", *BASE, "--target-epsilon", "8", "--sigma-ratio", "2", "--json"
    )
    objs = json.loads(out)
    assert code == 0 and len(objs) == 6
    assert all(o["sigma_y"] == pytest.approx(2 * o["sigma_x"]) and o["epsilon"] <= 8 for o in objs)


def test_calibrate_all_answers_each_accountant_even_when_one_is_out_of_reach(capsys):
    argv = ["--n", "100", "--l", "10", "--T", "10", "--delta", "1e-5", "--target-epsilon", "1e-3"]
    code, out, _ = run(capsys, "calibrate", "--accountant", "all", *argv, "--json")
    objs = {o["accountant"]: o for o in json.loads(out)}
    assert code == 0 and "out of reach" in objs["lee2019"]["error"] and objs["rdp-poisson"]["epsilon"] <= 1e-3
    code, out, err = run(capsys, "calibrate", "--accountant", "lee2019", *argv)
    assert code == 2 and "out of reach" in err and not out


def test_max_points_answers_the_most_T_per_accountant(capsys):
    argv = ["--n", "60000", "--l", "256", *SIGMA, "--delta", "1e-5", "--target-epsilon", "1"]
    code, out, _ = run(capsys, "max-points", "--accountant", "all", *argv, "--json")
    objs = {o["accountant"]: o for o in json.loads(out)}
    assert code == 0 and "even one point costs" in objs["lee2019"]["error"]  # about 3 for a single point
    assert objs["rdp-poisson"]["epsilon"] <= 1 and objs["rdp-poisson"]["T"] > 10**5
    code, out, _ = run(capsys, "max-points", "--accountant", "dpcda", *argv)
    T = int(out.split("T=")[1].split()[0].replace(",", ""))
    dpcda = get_accountant("dpcda")
    eps = [
        dpcda.epsilon(dpcda.release_for(MixingSetting(60000, 256, t, 0.0711, 0.0711)), 1e-5).epsilon for t in (T, T + 1)
    ]
    assert code == 0 and eps[0] <= 1 < eps[1]  # the text line's T is the largest within the target
    code, _, err = run(capsys, "max-points", "--accountant", "rdp-wor", *argv)
    assert code == 2 and err.count("\n") == 1 and "even one point costs" in err


def test_epsilon_statement_is_one_paragraph_for_one_accountant(capsys):
    code, out, _ = run(capsys, "epsilon", "--accountant", "rdp-wor", *BASE, *SIGMA, "--statement")
    assert code == 0 and out.count("\n") == 1 and out.startswith("We release T = 10,000 synthetic points")
    assert "rigorous upper bound computed with the rdp-wor accountant" in out
    code, out, err = run(capsys, "epsilon", "--accountant", "all", *BASE, *SIGMA, "--statement")
    assert code == 2 and "one accountant" in err and not out


def test_no_noise_prints_inf(capsys):
    code, out, _ = run(
        capsys, "epsilon", "--accountant", "gdp-clt", *BASE, "--sigma-x", "0", "--sigma-y", "0", "--json"
    )
    assert code == 0 and json.loads(out)["epsilon"] == "inf"


def test_enormous_epsilon_prints_in_scientific_notation(capsys):
    argv = ["epsilon", "--accountant", "rdp-wor", "--n", "100", "--l", "2", "--delta", "1e-5", *SIGMA]
    code, out, _ = run(capsys, *argv, "--T", "1000000000000", "--json")
    eps = json.loads(out)["epsilon"]
    assert code == 0 and eps > 1e6
    code, out, _ = run(capsys, *argv, "--T", "1000000000000")
    assert code == 0 and f"eps={eps:.4e}" in out and "no meaningful protection" in out
    _, out, _ = run(capsys, *argv, "--T", "3", "--json")
    eps = json.loads(out)["epsilon"]
    code, out, _ = run(capsys, *argv, "--T", "3")
    assert code == 0 and eps < 1e6 and f"eps={eps:10.4f}" in out


def test_tiny_epsilon_prints_its_digits_not_zero(capsys):
    argv = ["epsilon", "--accountant", "pld-poisson", "--n", "60000", "--l", "256", "--T", "10", "--delta", "1.6e-5"]
    argv += ["--sigma-x", "3", "--sigma-y", "3"]
    code, out, _ = run(capsys, *argv, "--json")
    eps = json.loads(out)["epsilon"]
    assert code == 0 and 0 < eps < 1e-3
    code, out, _ = run(capsys, *argv)
    assert code == 0 and f"eps={eps:.4e}" in out and "0.0000" not in out


def test_text_output_names_guarantee(capsys):
    code, out, _ = run(capsys, "epsilon", "--accountant", "gdp-clt", *BASE, *SIGMA)
    assert code == 0 and "approximation (not an upper bound)" in out and "poisson" in out


def test_class_centric_options(capsys):
    code, out, _ = run(capsys, "epsilon", "--accountant", "lee2019", *BASE, *SIGMA, "--classes", "10", "--json")
    result = json.loads(out)
    assert code == 0 and "2*T_k=2000" in result["assumptions"] and result["guarantee"] == "rigorous upper bound"
    code, out, _ = run(
        capsys, "epsilon", "--accountant", "lee2019", *BASE, *SIGMA, "--classes", "10", "--features-only", "--json"
    )
    result = json.loads(out)
    assert code == 0 and "T_k=1000" in result["assumptions"]
    assert result["guarantee"] == "rigorous upper bound (features only; labels not protected)"
    code, _, err = run(capsys, "epsilon", "--accountant", "lee2019", *BASE, *SIGMA, "--features-only")
    assert code == 2 and "--classes" in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--l", "70000"],
        ["--sigma-x", "-1"],
        ["--T", "0"],
        ["--delta", "1.5"],
        ["--delta", "0"],
        ["--sigma-x", "nan"],
        ["--n", "abc"],
        ["--classes", "7"],
    ],
)
def test_invalid_input_exit_2_one_line(capsys, extra):
    code, out, err = run(capsys, "epsilon", "--accountant", "lee2019", *BASE, *SIGMA, *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error:") and "Traceback" not in err


def test_unknown_accountant_exit_2(capsys):
    code, _, err = run(capsys, "epsilon", "--accountant", "moments", *BASE, *SIGMA)
    assert code == 2 and "unknown accountant" in err


def test_unreachable_calibration_exit_2(capsys):
    code, _, err = run(
        capsys,
        "calibrate",
        "--accountant",
        "lee2019",
        "--n",
        "10",
        "--l",
        "10",
        "--T",
        "1000000",
        "--delta",
        "1e-5",
        "--target-epsilon",
        "1e-6",
    )
    assert code == 2 and "out of reach" in err and err.count("\n") == 1


def test_module_entry_point_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "dpmix_core", "epsilon", "--accountant", "rdp-wor", *BASE, *SIGMA, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["accountant"] == "rdp-wor"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpmix_core",
            "epsilon",
            "--accountant",
            "lee2019",
            *BASE,
            "--sigma-x",
            "-1",
            "--sigma-y",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_module_entry_point_skips_teardown_but_keeps_output_files_and_code(tmp_path):
    """``python -m dpmix_core`` leaves with os._exit (issue #16): the release, its card, the JSON on
    stdout and the exit code must all survive it."""
    import numpy as np

    out = tmp_path / "r.npz"
    argv = ["synthesize", "--mechanism", "dpmix", "--l", "4", "--T", "3000", "--sigma-x", "0.5", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "dpmix_core", *argv, "--json"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    card = json.loads(out.with_suffix(".card.json").read_text())
    with np.load(out, allow_pickle=False) as release:
        assert release["x"].shape == (3000, 784) and release["y"].shape == (3000, 10)
        assert json.loads(str(release["privacy_card"])) == card
    assert printed["epsilons"] == card["epsilons"]


def test_exit_without_teardown_flushes_runs_atexit_and_joins_threads(tmp_path):
    marker, joined = tmp_path / "atexit", tmp_path / "thread"
    script = f"""
import atexit, sys, threading, time
from dpmix_core.cli.main import exit_without_teardown
atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), open({str(joined)!r}, "w").write("done"))).start()
for _ in range(1000):
    sys.stdout.write("x" * 200)
exit_without_teardown(3)
"""
    for mode in ("plain", "thread"):
        buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # so a missing flush shows
        proc = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=120, env=buffered
        )
        assert proc.returncode == 3 and proc.stdout == "x" * 200000, proc.stderr
        assert marker.read_text() == "ran"
        marker.unlink()
    assert joined.read_text() == "done"  # a live non-daemon thread: the normal exit joined it


def test_uniform_mixing_of_clipped_records_from_the_command_line(capsys):
    """--clip-records: DPFMix App. E.3's DPMix (||x||, ||y|| <= 1); rdp-wor's epsilon and calibration are those of
    the release synthesize --mechanism dpmix --preprocessing clip makes, and the contradictions exit 2."""
    from dpmix_core.privacy.release import MixingRelease

    argv = ["--n", "60000", "--l", "64", "--T", "60000", "--delta", "1e-5", "--clip-records"]
    code, out, _ = run(capsys, "calibrate", "--accountant", "rdp-wor", *argv, "--target-epsilon", "2", "--json")
    sigma = json.loads(out)["sigma_x"]
    assert code == 0 and 0.05 < sigma < 0.07
    code, out, _ = run(
        capsys, "epsilon", "--accountant", "rdp-wor", *argv, "--sigma-x", "0.0581", "--sigma-y", "0.0581"
    )
    card = MixingRelease.dpmix(n=60000, l=64, T=60000, sigma_x=0.0581, sigma_y=0.0581, dx=784, dy=10, clip=(1, 1))
    direct = get_accountant("rdp-wor").epsilon(card, 1e-5)
    assert code == 0 and f"eps={direct.epsilon:.4f}" in out.replace(" ", "") and "y: ||.||_2 <= 1" in out
    for extra, message in ((["--clip", "1"], "two different releases"), (["--classes", "10"], "uniform mixing")):
        code, out, err = run(capsys, "epsilon", "--accountant", "rdp-wor", *argv, *SIGMA, *extra)
        assert code == 2 and not out and err.count("\n") == 1 and message in err


def test_synthesize_calibrates_with_the_tightest_accountant_of_the_mechanism_by_default(capsys, tmp_path):
    """--target-epsilon without --accountant: pld-poisson for Poisson mixing (the card's pld-poisson epsilon meets the
    target), rdp-wor for the others; an accountant of the other sampling scheme exits 2 with one line."""
    out = str(tmp_path / "r.npz")
    argv = ["synthesize", "--mechanism", "poisson", "--l", "16", "--T", "100", "--target-epsilon", "1", "--out", out]
    code, stdout, _ = run(capsys, *argv, "--json")
    card = json.loads(stdout)
    assert code == 0 and card["parameters"]["accountant"] == "pld-poisson"
    assert 0.9 < {e["accountant"]: e["epsilon"] for e in card["epsilons"]}["pld-poisson"] <= 1.0
    code, stdout, _ = run(capsys, *[a if a != "poisson" else "dpmix" for a in argv], "--json")
    assert code == 0 and json.loads(stdout)["parameters"]["accountant"] == "rdp-wor"
    code, _, err = run(capsys, *argv, "--accountant", "rdp-wor")
    assert code == 2 and "'rdp-wor' cannot calibrate a poisson release" in err and err.count("\n") == 1


def test_audit_sigma_y_defaults_to_sigma_x(capsys):
    argv = ["audit", "--mechanism", "dpmix", "--n", "50", "--l", "4", "--T", "5", "--sigma-x", "0.5"]
    argv += ["--trials", "200", "--json"]

    def audit(*extra: str) -> dict:
        assert main([*argv, *extra]) == 0
        result = json.loads(capsys.readouterr().out)
        result.pop("seconds")
        return result

    implicit = audit()
    assert audit("--sigma-y", "0.5") == implicit
    assert audit("--sigma-y", "5") != implicit


def test_mechanism_help_describes_every_mechanism(capsys):
    from dpmix_core.synthesis.pipeline import MECHANISM_DESCRIPTIONS, MECHANISMS

    assert set(MECHANISM_DESCRIPTIONS) == set(MECHANISMS)
    for command in ("synthesize", "train"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
        for name in MECHANISMS:
            assert f"{name}: {MECHANISM_DESCRIPTIONS[name]}" in text.replace("- ", "-")


def test_version(capsys):
    import dpmix_core

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"DPMix Studio {dpmix_core.__version__}"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is a POSIX signal")
def test_sigterm_removes_the_half_written_release(tmp_path):
    """``timeout`` or ``kill`` (SIGTERM) ends a streamed release like Ctrl-C: exit 143, one line, and its
    ``.OUT.partial-*`` folder removed (Python's default SIGTERM skipped every ``finally`` and left it)."""
    import signal
    import time

    import numpy as np

    np.save(tmp_path / "X.npy", np.random.default_rng(0).integers(0, 256, size=(2000, 64), dtype=np.uint8))
    np.save(tmp_path / "Y.npy", np.arange(2000) % 10)
    argv = ["synthesize", "--memmap", "X.npy", "--labels", "Y.npy", "--num-classes", "10", "--mechanism", "dpmix"]
    argv += ["--l", "256", "--T", "3000000", "--sigma-x", "0.1", "--out", "rel/"]  # ~20 s of writing
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpmix_core", *argv], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".rel.partial-*/x.npy")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the release finished before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and err.strip() == "error: terminated (SIGTERM)", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.npy", "Y.npy"]  # no partial folder, no release
