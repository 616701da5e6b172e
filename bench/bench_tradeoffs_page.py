"""Rerun time of Train & trade-offs with a large stored sweep on screen, after a click that changes nothing in the
store (the the test-rows radio, the second ε axis), as a presenter makes it.

Builds a store in a temporary folder: DPFMix Table 1's best-m grid (`dpfmix-table1-m`, every run config, ``--seeds``
seeds) and its quick variant with DPFMix Table 1's full protocol beside it (the quick-vs-full check), each run
finished with a result shaped like the runner's (a 200-epoch history, a privacy card with every accountant's ε,
per-half accuracies; the numbers are made up). Then drives the page with Streamlit's AppTest (server time only, no
browser): the first render, then reruns after each click.

    .venv/bin/python bench/bench_tradeoffs_page.py [--seeds 3] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402
from timing import median_max_ms, timed_rerun  # noqa: E402

from dpmix_core.experiments.presets import get_preset  # noqa: E402
from dpmix_core.experiments.trade_offs import narrow_spec, sweep_jobs  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402

PAGE = str(ROOT / "app_pages" / "train_tradeoffs.py")
ACCOUNTANTS = ("gdp-clt", "pld-poisson", "rdp-poisson", "rdp-wor", "lee2019")


def _result(config: dict, rng: random.Random) -> dict:
    """A finished run's result with the runner's keys and sizes (made-up numbers)."""
    halves = [rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9)]
    epochs = config.get("epochs", 200)
    return {
        "test_accuracy": sum(halves) / 2,
        "test_accuracy_halves": halves,
        "val_accuracy": rng.uniform(0.1, 0.2),
        "collapsed": halves[0] < 0.12,
        "collapse_reason": None,
        "delta": 1e-5,
        "seconds": rng.uniform(200, 7000),
        "history": [
            {"epoch": e, "loss": 2.3 - e / 100, "val_loss": 2.3, "val_accuracy": 0.15, "lr": 1e-3, "seconds": 21.0}
            for e in range(1, epochs + 1)
        ],
        "privacy_card": {
            "epsilons": [
                {
                    "accountant": name,
                    "epsilon": rng.uniform(0.5, 12),
                    "upper_bound": name != "gdp-clt",
                    "assumptions": "sampling, adjacency, public bounds and constants " * 4,
                }
                for name in ACCOUNTANTS
            ]
        },
        "versions": {"torch": "2.13.0", "numpy": "2.4.6", "dp-accounting": "0.6.0"},
    }


def finished_sweep(store: ResultStore, spec, rng: random.Random) -> int:
    """Create ``spec``'s sweep in ``store`` with every run finished (made-up results shaped like the runner's); its id."""
    sweep = store.create_sweep(spec.name, spec.to_dict())
    for kind, config, key in sweep_jobs(spec):
        run = store.submit(kind, config, key, sweep=sweep.id)
        store.claim(run.id)
        store.finish(run.id, _result(config, rng))
    return sweep.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultStore(Path(tmp) / "results.sqlite")
        t0 = time.perf_counter()
        big = finished_sweep(store, narrow_spec(get_preset("dpfmix-table1-m"), repeats=args.seeds), rng)
        quick = finished_sweep(store, narrow_spec(get_preset("dpfmix-table1-quick"), repeats=args.seeds), rng)
        finished_sweep(store, narrow_spec(get_preset("dpfmix-table1"), repeats=args.seeds), rng)
        runs = len(store.list_runs(sweep=big))
        print(f"store: {runs} runs in the best-m sweep, built in {time.perf_counter() - t0:.1f} s")
        os.environ["DPMIX_STORE"] = str(store.path)
        print("| sweep on screen | change | median rerun (ms) | max (ms) | reruns |")
        print("|---|---|---|---|---|")
        for name, sweep in ((f"dpfmix-table1-m ({runs} runs)", big), ("dpfmix-table1-quick", quick)):
            at = AppTest.from_file(PAGE, default_timeout=300)
            at.query_params["sweep"] = str(sweep)
            first = timed_rerun(at)
            print(f"| {name} | first render | {1000 * first:.0f} | {1000 * first:.0f} | 1 |")
            for label, (widget, values) in {
                "test rows radio (all / even)": (f"tr_rows_{sweep}", ["all", "even"]),
                "ε on a second axis": ("tr_eps2", None),
            }.items():
                times = []
                for i in range(args.repeats):
                    if values is None:
                        box = at.selectbox(key=widget)
                        box.set_value(box.options[i % len(box.options)])
                    else:
                        at.radio(key=widget).set_value(values[i % 2])
                    times.append(timed_rerun(at))
                print(f"| {name} | {label} | {median_max_ms(times)} | {len(times)} |")


if __name__ == "__main__":
    main()
