"""Accountant speed targets (issue: accountants). Prints a markdown table of medians.

    python bench/bench_accountants.py [--repeats 7]

Targets on the 2-core reference machine: all six accountants at one point
<= 50 ms together; a 50-point eps-sigma curve for the closed-form/RDP
accountants <= 0.5 s; one calibration <= 0.3 s.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from dpmix_core.privacy.accountants import ACCOUNTANTS, MixingSetting, epsilon_all, get_accountant
from dpmix_core.privacy.analysis import wbk_subsampling
from dpmix_core.privacy.calibration import calibrate_sigma

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows = []
    for label, s in POINTS.items():
        rows.append((
            f"all six, one point, live PLD grid ({label})",
            median_seconds(lambda: epsilon_all(s, 1e-5, relative_accuracy=LIVE_PLD), args.repeats),
            0.050,
        ))
        rows.append((
            f"all six, one point, precise PLD grid ({label})",
            median_seconds(lambda: epsilon_all(s, 1e-5), args.repeats),
            None,
        ))
        for name in ACCOUNTANTS:
            acc = get_accountant(name)
            rows.append((f"  {name}, one point ({label})", median_seconds(lambda: acc.epsilon(acc.release_for(s), 1e-5), args.repeats), None))
    s = POINTS["thesis §4.1"]
    sigmas = np.geomspace(0.01, 1.0, 50)

    def curve(names):
        for name in names:
            acc = get_accountant(name)
            for sig in sigmas:
                acc.epsilon(acc.release_for(replace(s, sigma_x=sig, sigma_y=sig)), 1e-5)

    for name in CLOSED_FORM_RDP:
        rows.append((f"50-point eps-sigma curve, {name}", median_seconds(lambda: curve([name]), max(3, args.repeats // 2)), 0.5))
    rows.append(("50-point eps-sigma curve, all five together", median_seconds(lambda: curve(CLOSED_FORM_RDP), 3), None))
    for name in ACCOUNTANTS:
        acc = get_accountant(name, **({"relative_accuracy": LIVE_PLD} if name == "pld-poisson" else {}))
        rows.append((
            f"one calibration (eps=2), {name}",
            median_seconds(lambda: calibrate_sigma(acc, s, target_epsilon=2.0, delta=1e-5), max(3, args.repeats // 2)),
            0.3,
        ))
    precise, live = (
        get_accountant("pld-poisson", relative_accuracy=a).epsilon(
            get_accountant("pld-poisson").release_for(POINTS["DPFMix"]), 1e-5
        ).epsilon
        for a in (0.02, LIVE_PLD)
    )
    print(f"Live PLD grid error at the DPFMix point: {live:.4f} vs {precise:.4f} at a {LIVE_PLD / 0.02:.0f}x finer grid "
          f"(+{100 * (live / precise - 1):.1f} %, still an upper bound)\n")
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}\n")
    print("| measurement | median | target | ok |\n|---|---:|---:|:---:|")
    for name, sec, target in rows:
        ok = "" if target is None else ("yes" if sec <= target else "**no**")
        tgt = "" if target is None else f"{target * 1000:.0f} ms"
        print(f"| {name} | {sec * 1000:.1f} ms | {tgt} | {ok} |")


if __name__ == "__main__":
    main()
