"""Ray backend: a local Ray (num_cpus=2) smoke sweep of tiny runs, resume, failures, cancel.

The Ray tests are skipped when Ray is not installed (it is an optional extra); the checks that need
no Ray (a clear error when it is missing, the resources spec) always run.
"""

from __future__ import annotations

import sys
import time

import fake_jobs
import pytest
from fake_jobs import TESTS_DIR, executions

from dpmix_core.experiments.sweeps import run_sweep
from dpmix_core.runtime.backends import make_backend
from dpmix_core.runtime.ray_backend import RAY_MISSING, run_resources
from dpmix_core.runtime.store import ResultStore, config_key

RAY_REASON = "Ray is not installed (optional: pip install -r requirements-ray.txt)"


# -- without Ray --------------------------------------------------------------------------------------
def test_missing_ray_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    store = ResultStore(tmp_path / "s.sqlite")
    with pytest.raises(ImportError, match="requirements-ray.txt"):
        make_backend("ray", store)
    with pytest.raises(ImportError, match="--backend local"):
        make_backend("ray", store, address="auto")
    assert "not installed" in RAY_MISSING


def test_resources_and_backend_choice(tmp_path):
    assert run_resources({}) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert run_resources({"resources": {"cpu": 2, "gpu": 0.25}}) == {"num_cpus": 2.0, "num_gpus": 0.25}
    assert run_resources({"resources": {"cpu": 1, "memory": 2e9}})["memory"] == 2e9
    with pytest.raises(ValueError, match="unknown resources"):
        run_resources({"resources": {"gpus": 1}})
    with pytest.raises(ValueError, match="non-negative"):
        run_resources({"resources": {"cpu": -1}})
    store = ResultStore(tmp_path / "s.sqlite")
    assert make_backend("local", store, max_parallel=2).name == "local"
    with pytest.raises(ValueError, match="--address needs --backend ray"):
        make_backend("local", store, address="auto")
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("slurm", store)


# -- with a local Ray ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason=RAY_REASON)
    from dpmix_core.runtime.ray_backend import PACKAGE_ROOT

    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": f"{TESTS_DIR}:{PACKAGE_ROOT}"}},
        )
    yield ray
    ray.shutdown()


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite")


def ray_backend(store, **options):
    return make_backend("ray", store, extra_pythonpath=[TESTS_DIR], **options)


def grid(marker, xs=(1, 2, 3, 4), kind="fake_jobs:quick", **base):
    configs = [{"marker": str(marker), **base, "x": x, "resources": {"cpu": 1}} for x in xs]
    return [(kind, c, config_key(c)) for c in configs]


def test_smoke_sweep_and_resume(ray_cluster, store, tmp_path):
    marker = tmp_path / "marker"
    backend = ray_backend(store)
    assert backend.name == "ray" and backend.max_parallel == 2 and "ray" in backend.location
    assert "2 CPU" in backend.describe()
    summary = run_sweep(store, "ray-grid", grid(marker), backend=backend, poll_s=0.05, timeout_s=120)
    assert summary.ok and summary.total == 4 and summary.new == 4, summary.line()
    runs = store.list_runs(sweep=summary.sweep_id)
    assert sorted(r.result["value"] for r in runs) == [2, 4, 6, 8]
    assert all(r.backend == "ray" and r.status == "done" for r in runs)
    assert all(r.progress["ray"]["node"] and r.progress["epoch"] == 1 for r in runs)  # reporter fields kept
    assert {r.result["pid"] for r in runs}.isdisjoint({fake_jobs.os.getpid()})  # ran in Ray workers
    sweep = store.get_sweep(summary.sweep_id)
    assert sweep.backend == "ray" and "ray" in sweep.location
    assert executions(marker) == 4
    # resume: the same sweep plus one new run -> only the new run executes
    again = run_sweep(
        store, "ray-grid", grid(marker, xs=(1, 2, 3, 4, 5)), backend=ray_backend(store), poll_s=0.05, timeout_s=120
    )
    assert again.ok and again.total == 5 and again.reused == 4 and again.new == 1
    assert executions(marker) == 5


def test_failure_and_cancel(ray_cluster, store, tmp_path):
    backend = ray_backend(store)
    bad = backend.submit("fake_jobs:crash", {"msg": "on ray"})
    slow = backend.submit("fake_jobs:slow", {"epochs": 600, "step_s": 0.1, "x": 1})
    fake_jobs.wait_for(lambda: store.get(slow.id).status == "running", timeout=60, pump=backend)
    time.sleep(0.5)
    backend.cancel(slow.id)
    fake_jobs.wait_for(lambda: store.get(bad.id).final and store.get(slow.id).final, timeout=60, pump=backend)
    failed = store.get(bad.id)
    assert failed.status == "failed" and failed.error_summary.startswith("ValueError: boom: on ray")
    assert store.get(slow.id).status == "cancelled"
    # a queued run is cancelled at once, without Ray
    queued = store.submit("fake_jobs:quick", {"x": 99}, backend="ray")
    assert backend.cancel(queued.id).status == "cancelled"


def test_bad_resources_rejected_before_queueing(ray_cluster, store):
    backend = ray_backend(store)
    with pytest.raises(ValueError, match="unknown resources"):
        backend.submit_many([("fake_jobs:quick", {"x": 1, "resources": {"tpu": 1}}, None)])
    assert store.counts()["queued"] == 0
