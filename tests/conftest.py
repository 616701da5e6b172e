import importlib.util
import os
import sys
import types
from pathlib import Path

# `make test` runs the suite in one process per core (pytest-xdist): each runs torch on one thread, so the
# workers share the cores instead of each spreading over all of them (oversubscribed, training runs 5-20x slower).
# Set before any test module imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

# Hermetic datasets: no test sees this machine's /usr/share/datasets (Debian's dataset packages) unless it sets
# DPMIX_SYSTEM_DATA_DIRS itself.
os.environ.setdefault("DPMIX_SYSTEM_DATA_DIRS", "")

import pytest
from hypothesis import HealthCheck, settings

BENCH = Path(__file__).resolve().parents[1] / "bench"

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def bench_script():
    """``bench_script("name")``: bench/name.py loaded as a module (bench/ holds scripts, not a package)."""

    def load(name: str) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(BENCH))  # a script may import its neighbours (set_fields, timing)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(BENCH))
        return module

    return load


@pytest.fixture
def finished_sweep():
    """``finished_sweep(store, spec, result_for)``: fake_jobs.finish_sweep (the spec's sweep in ``store``, with a
    finished run for every run config ``result_for(config)`` gives a result for; returns the stored sweep)."""
    from fake_jobs import finish_sweep

    return finish_sweep
