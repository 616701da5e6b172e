"""Accountant speed targets (issue: accountants). Prints a markdown table of medians.

    python bench/bench_accountants.py [--repeats 7]
    python bench/bench_accountants.py --worst-case 16 [--seed 0]   # only the worst-case table

Targets on the 2-core reference machine: all six accountants at one point
<= 50 ms together; a 50-point eps-sigma curve for the closed-form/RDP
accountants <= 0.5 s; one calibration <= 0.3 s. Worst case over the ranges a
page allows (n <= 1e7, l <= n, T <= 1e7, sigma 1e-3..1e3, delta 1e-10..0.1, target
eps 0.05..20): every evaluation, every calibration and every max-points search (the most T
at the case's sigma) <= 5 s (issues 14 §1, 16).
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import resource
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from dpmix_core.privacy.accountants import ACCOUNTANTS, MixingSetting, epsilon_all, get_accountant
from dpmix_core.privacy.analysis import wbk_subsampling
from dpmix_core.privacy.calibration import calibrate_sigma, max_points

POINTS = {
    "thesis §4.1": MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711),
    "DPFMix": MixingSetting(n=50000, l=64, T=50000, sigma_x=0.01865, sigma_y=0.01865),
}
LIVE_PLD = 0.2  # the page's default PLD relative accuracy
CLOSED_FORM_RDP = ["lee2019", "dpcda", "gdp-clt", "rdp-poisson", "rdp-wor"]


def _fresh() -> None:
    """Drop memoised moments so every repeat pays the full price."""
    wbk_subsampling._log_moments_cached.cache_clear()


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        _fresh()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


CORNERS = [  # hand-picked hard cases: tiny q, huge T, l = n, tiny noise
    MixingSetting(n=10**7, l=1, T=10**7, sigma_x=1.0, sigma_y=1.0),
    MixingSetting(n=10**7, l=10, T=10**7, sigma_x=1.0, sigma_y=1.0),
    MixingSetting(n=10**7, l=10**7, T=10**7, sigma_x=1.0, sigma_y=1.0),
    MixingSetting(n=1000, l=500, T=1000, sigma_x=1.0, sigma_y=1.0),
    MixingSetting(n=60000, l=256, T=10000, sigma_x=1.0, sigma_y=1.0),
]


def random_page_case(rng: random.Random) -> tuple[MixingSetting, float, float, float]:
    """(setting, sigma, delta, target eps) drawn log-uniformly over the ranges a page allows."""
    n = int(10 ** rng.uniform(1, 7))
    setting = MixingSetting(
        n=n,
        l=max(1, int(10 ** rng.uniform(0, math.log10(n)))),
        T=int(10 ** rng.uniform(0, 7)),
        sigma_x=1.0,
        sigma_y=1.0,
    )
    return (
        setting,
        10 ** rng.uniform(-3, 3),
        10 ** rng.uniform(-10, -1),
        10 ** rng.uniform(math.log10(0.05), math.log10(20)),
    )


def worst_case(cases: int, seed: int) -> None:
    """Median and worst seconds per accountant, one evaluation and one calibration, over random page inputs."""
    rng = random.Random(seed)
    draws = [random_page_case(rng) for _ in range(cases)]
    draws += [(c, sig, 1e-5, tgt) for c in CORNERS for sig, tgt in [(10 ** rng.uniform(-3, 0), 1.0)]]
    print(f"{len(draws)} cases (seed {seed}); machine: {platform.processor() or platform.machine()}\n")
    print(
        "| accountant | eval median | eval worst | calibration median | calibration worst | worst calibration case "
        "| max-points median | max-points worst |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name in ACCOUNTANTS:
        acc = get_accountant(name)
        evals, cals, points = [], [], []
        for setting, sigma, delta, target in draws:
            s = replace(setting, sigma_x=sigma, sigma_y=sigma)
            t0 = time.perf_counter()
            acc.epsilon(acc.release_for(s), delta)
            evals.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            try:
                calibrate_sigma(acc, setting, target_epsilon=target, delta=delta)
            except ValueError:
                pass  # out of reach: answered too
            cals.append((time.perf_counter() - t0, setting, target, delta))
            t0 = time.perf_counter()
            try:
                max_points(acc, s, target_epsilon=target, delta=delta)
            except ValueError:
                pass  # one point already over the target: answered too
            points.append(time.perf_counter() - t0)
        worst = max(cals, key=lambda c: c[0])
        print(
            f"| {name} | {statistics.median(evals) * 1000:.0f} ms | {max(evals) * 1000:.0f} ms "
            f"| {statistics.median(c[0] for c in cals) * 1000:.0f} ms | {worst[0]:.2f} s "
            f"| n={worst[1].n:g} l={worst[1].l:g} T={worst[1].T:g} eps={worst[2]:.3g} delta={worst[3]:.1e} "
            f"| {statistics.median(points) * 1000:.0f} ms | {max(points):.2f} s |",
            flush=True,
        )
    print(f"\npeak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--worst-case", type=int, default=0, help="only the worst-case table, over this many random cases"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worst_case:
        worst_case(args.worst_case, args.seed)
        return
    rows = []
    for label, s in POINTS.items():
        rows.append(
            (
                f"all six, one point, live PLD grid ({label})",
                median_seconds(lambda: epsilon_all(s, 1e-5, relative_accuracy=LIVE_PLD), args.repeats),
                0.050,
            )
        )
        rows.append(
            (
                f"all six, one point, precise PLD grid ({label})",
                median_seconds(lambda: epsilon_all(s, 1e-5), args.repeats),
                None,
            )
        )
        for name in ACCOUNTANTS:
            acc = get_accountant(name)
            rows.append(
                (
                    f"  {name}, one point ({label})",
                    median_seconds(lambda: acc.epsilon(acc.release_for(s), 1e-5), args.repeats),
                    None,
                )
            )
    s = POINTS["thesis §4.1"]
    sigmas = np.geomspace(0.01, 1.0, 50)

    def curve(names):
        for name in names:
            acc = get_accountant(name)
            for sig in sigmas:
                acc.epsilon(acc.release_for(replace(s, sigma_x=sig, sigma_y=sig)), 1e-5)

    for name in CLOSED_FORM_RDP:
        rows.append(
            (f"50-point eps-sigma curve, {name}", median_seconds(lambda: curve([name]), max(3, args.repeats // 2)), 0.5)
        )
    rows.append(
        ("50-point eps-sigma curve, all five together", median_seconds(lambda: curve(CLOSED_FORM_RDP), 3), None)
    )
    for name in ACCOUNTANTS:
        acc = get_accountant(name, **({"relative_accuracy": LIVE_PLD} if name == "pld-poisson" else {}))
        rows.append(
            (
                f"one calibration (eps=2), {name}",
                median_seconds(
                    lambda: calibrate_sigma(acc, s, target_epsilon=2.0, delta=1e-5), max(3, args.repeats // 2)
                ),
                0.3,
            )
        )
    precise, live = (
        get_accountant("pld-poisson", relative_accuracy=a)
        .epsilon(get_accountant("pld-poisson").release_for(POINTS["DPFMix"]), 1e-5)
        .epsilon
        for a in (0.02, LIVE_PLD)
    )
    print(
        f"Live PLD grid error at the DPFMix point: {live:.4f} vs {precise:.4f} at a {LIVE_PLD / 0.02:.0f}x finer grid "
        f"(+{100 * (live / precise - 1):.1f} %, still an upper bound)\n"
    )
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}\n")
    print("| measurement | median | target | ok |\n|---|---:|---:|:---:|")
    for name, sec, target in rows:
        ok = "" if target is None else ("yes" if sec <= target else "**no**")
        tgt = "" if target is None else f"{target * 1000:.0f} ms"
        print(f"| {name} | {sec * 1000:.1f} ms | {tgt} | {ok} |")


if __name__ == "__main__":
    main()
