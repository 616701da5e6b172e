"""The command line starts fast: heavy libraries load only in the commands that need them (issue #16)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpmix_core.data import load_embedded
from dpmix_core.privacy.accountant_names import (
    ACCOUNTANT_NAMES,
    ACCOUNTANT_SAMPLING,
    CALIBRATION_ORDER,
    RIGOROUS_ACCOUNTANTS,
)
from dpmix_core.privacy.accountants import ACCOUNTANTS
from dpmix_core.synthesis.epsilon_job import background_epsilons
from dpmix_core.synthesis.export import card_epsilons
from dpmix_core.synthesis.pipeline import SynthesisConfig, planned_release
from dpmix_core.synthesis.streaming import stream_release

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "dp_accounting", "scipy", "pandas", "plotly", "dpmix_core.privacy.accountants")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cli_import_and_parser_load_no_heavy_library():
    assert _loaded_after("import dpmix_core.cli.main as c\nc.build_parser()") == []


def test_help_loads_no_heavy_library():
    code = "import sys\nfrom dpmix_core.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code) == []


def test_mechanisms_and_datasets_import_without_torch_or_accountants():
    assert (
        _loaded_after(
            "import dpmix_core.mechanisms, dpmix_core.data, dpmix_core.synthesis.pipeline, "
            "dpmix_core.synthesis.export, dpmix_core.synthesis.streaming"
        )
        == []
    )


def test_accountant_names_match_the_accountants():
    assert ACCOUNTANT_NAMES == tuple(ACCOUNTANTS)
    assert ACCOUNTANT_SAMPLING == {name: cls.sampling.value for name, cls in ACCOUNTANTS.items()}
    assert {name for name, cls in ACCOUNTANTS.items() if cls.rigorous} == RIGOROUS_ACCOUNTANTS
    # every accountant is offered to calibrate, each once, the approximations after every upper bound
    assert sorted(CALIBRATION_ORDER) == sorted(ACCOUNTANT_NAMES)
    rigorous = [name in RIGOROUS_ACCOUNTANTS for name in CALIBRATION_ORDER]
    assert rigorous == sorted(rigorous, reverse=True)


def test_background_epsilons_fall_back_to_this_process():
    ds = load_embedded()
    cfg = SynthesisConfig(mechanism="dpmix", l=8, T=100, sigma_x=0.5)
    planned = planned_release(cfg, ds)
    other = planned.with_sigma(1.0, 1.0)
    with background_epsilons(planned, 1e-5) as epsilons_for:  # accountants loaded here: computed inline
        assert epsilons_for(planned) == card_epsilons(planned, 1e-5)
        assert epsilons_for(other) == card_epsilons(other, 1e-5)


@pytest.mark.parametrize("mechanism", ["dpmix", "class-centric"])
def test_cli_card_from_the_background_process_matches_inline(tmp_path, mechanism):
    out = tmp_path / "r.npz"
    args = [
        "synthesize",
        "--mechanism",
        mechanism,
        "--l",
        "8",
        "--T",
        "100",
        "--sigma-x",
        "0.5",
        "--out",
        str(out),
        "--json",
    ]
    code = (
        f"import contextlib, io, json, sys\nfrom dpmix_core.cli.main import main\nbuf = io.StringIO()\n"
        f"with contextlib.redirect_stdout(buf):\n    assert main({args!r}) == 0\n"
        f"print(json.dumps([json.loads(buf.getvalue()), 'dp_accounting' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    card, parent_loaded_accountants = json.loads(done.stdout)
    assert not parent_loaded_accountants  # the epsilons came from the child process
    ds = load_embedded()
    expected = card_epsilons(planned_release(SynthesisConfig(mechanism=mechanism, l=8, T=100, sigma_x=0.5), ds), 1e-5)
    assert card["epsilons"] == json.loads(json.dumps(expected))


def test_cli_memmap_card_from_the_background_process(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.integers(0, 256, (300, 6), dtype=np.uint8))
    np.save(tmp_path / "Y.npy", rng.integers(0, 3, 300))
    args = [
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
        "8",
        "--T",
        "500",
        "--sigma-x",
        "0.5",
        "--out",
        str(tmp_path / "rel"),
        "--json",
    ]
    code = (
        f"import contextlib, io, json, sys\nfrom dpmix_core.cli.main import main\nbuf = io.StringIO()\n"
        f"with contextlib.redirect_stdout(buf):\n    assert main({args!r}) == 0\n"
        f"print(json.dumps([json.loads(buf.getvalue()), 'dp_accounting' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    card, parent_loaded_accountants = json.loads(done.stdout)
    assert not parent_loaded_accountants
    expected = card_epsilons(stream_release(mechanism="dpmix", n=300, d=6, k=3, l=8, T=500, sigma_x=0.5), 1e-5)
    assert card["epsilons"] == json.loads(json.dumps(expected))
    assert (tmp_path / "rel" / "x.npy").exists()
