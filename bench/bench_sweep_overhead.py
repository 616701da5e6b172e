"""Benchmark: per-run overhead of a sweep, pool workers vs one process per run (issue #16).

A sweep of N tiny runs on the embedded MNIST sample (DPMix release l = 8, T = 500, sigma 0.5, a
linear model, 1 epoch, 500 training / 200 test records) runs through ``run_sweep`` on a fresh store
with one worker slot (``max_parallel = 1``), so runs execute one after another and

    overhead per run = (sweep wall time - sum of the runs' own seconds) / N

where a run's own seconds are ``result["seconds"]`` (what ``run_config`` measures from its first line
to its result: data, release, epsilons, training, evaluation). The overhead is everything else:
process start, imports, reading the job, the store's writes, the launcher's polling. A fresh process
also pays first-call costs *inside* ``run_config`` (torch and accountant imports on first use, the
embedded dataset's decode), so the table also gives the wall time per run minus the runs' own
training and evaluation seconds (``timings["train"] + timings["evaluate"]``): everything a run costs
beyond its training. Each mode is
measured ``--repeats`` times on a new store (so no result is reused); medians are printed with the load
average, because the reference machine is shared.

Command: ``.venv/bin/python bench/bench_sweep_overhead.py --runs 8 --repeats 3``. Target: ≤ 2 s per run
on CPU with pool workers. ``--features scattering``: DPFMix-style runs (Poisson mixing of ScatterNet
features of the whole embedded sample, scatter-linear), where the pool's memo keeps the features (the
"features phase" column: the median run's ``timings["features"]``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpmix_core.experiments.config import RunConfig  # noqa: E402
from dpmix_core.experiments.sweeps import run_sweep  # noqa: E402
from dpmix_core.experiments.trade_offs import JOB_KIND  # noqa: E402
from dpmix_core.runtime.jobs import LocalProcessBackend, is_alive  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402
from dpmix_core.synthesis.pipeline import SynthesisConfig  # noqa: E402


def tiny_runs(n: int, tag: str, features: str = "pixels") -> list[tuple[str, dict, None]]:
    """N distinct tiny mixing runs (seeds differ; ``label`` keeps the modes' stores apart). ``features=
    "scattering"``: DPFMix-style runs on ScatterNet features of the whole embedded sample (5,000 images)."""
    runs = []
    scattering = features == "scattering"
    for seed in range(n):
        config = RunConfig(
            method="mixing",
            dataset="embedded",
            synthesis=SynthesisConfig(
                mechanism="poisson" if scattering else "dpmix", l=8, T=500, sigma_x=0.5, sigma_y=0.5, features=features
            ),
            features=features,
            model="scatter-linear" if scattering else "linear",
            epochs=1,
            batch_size=128,
            train_limit=None if scattering else 500,
            test_limit=None if scattering else 200,
            seed=seed,
            label=tag,
            device="cpu",
        )
        runs.append((JOB_KIND, config.to_dict(), None))
    return runs


def measure(pool: bool, n: int, folder: Path, features: str = "pixels") -> dict[str, float]:
    store = ResultStore(folder / f"{'pool' if pool else 'per-run'}-{time.time_ns()}.sqlite")
    backend = LocalProcessBackend(store, max_parallel=1, pool=pool)
    runs = tiny_runs(n, "pool" if pool else "per-run", features)
    t0 = time.perf_counter()
    summary = run_sweep(store, "bench", runs, backend=backend, poll_s=0.05)
    wall = time.perf_counter() - t0
    if not summary.ok:
        failed = [r.error_summary for r in store.list_runs() if r.status != "done"]
        raise SystemExit(f"sweep failed: {summary.line()} {failed[:2]}")
    done = store.list_runs(status="done")
    deadline = time.monotonic() + 30
    while any(is_alive(r.pid) for r in done) and time.monotonic() < deadline:
        time.sleep(0.1)  # idle pool workers exit after idle_exit_s: not into the next measurement
    in_run = sum(r.result["seconds"] for r in done)
    train = sum(r.result["timings"].get("train", 0.0) + r.result["timings"].get("evaluate", 0.0) for r in done)
    return {
        "per_run": wall / n,
        "in_run": in_run / n,
        "overhead": (wall - in_run) / n,
        "beyond_train": (wall - train) / n,
        "processes": len({r.pid for r in done}),
        "features": statistics.median(r.result["timings"].get("features", 0.0) for r in done),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--features", choices=("pixels", "scattering"), default="pixels")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    rows: dict[str, list[dict[str, float]]] = {"per-run processes (before)": [], "pool workers (after)": []}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        for _ in range(args.repeats):  # interleaved, so both modes see the same load
            for name, pool in (("per-run processes (before)", False), ("pool workers (after)", True)):
                rows[name].append(measure(pool, args.runs, Path(tmp), args.features))
                print(name, {k: round(v, 2) for k, v in rows[name][-1].items()}, os.getloadavg(), flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"\n{args.runs} tiny runs per sweep, 1 slot, median of {args.repeats} sweeps (seconds per run)\n")
    print(
        "| mode | wall per run | in run_config | overhead outside the run | wall minus train+evaluate |"
        " overheads of each sweep | processes | features phase (median run) |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name, samples in rows.items():
        med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
        every = ", ".join(f"{s['overhead']:.2f}" for s in samples)
        print(
            f"| {name} | {med['per_run']:.2f} | {med['in_run']:.2f} | **{med['overhead']:.2f}** |"
            f" **{med['beyond_train']:.2f}** | {every} | {med['processes']:.0f} | {med['features']:.2f} |"
        )


if __name__ == "__main__":
    main()
