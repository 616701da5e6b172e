"""The "why mixing is private" lesson (DP foundations, section 4): what one uncached change of its controls costs.

    .venv/bin/python bench/bench_mixing_effects.py [--model without-replacement]

Times :func:`~dpmix_core.teaching.mixing_effects` (five releases, each through pld-poisson) over every
combination of the page's extreme and default controls (m, T, sigma at n = 60000); prints the median and the
slowest combinations. The page caches each combination, so going back to a setting is instant.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpmix_core.teaching import mixing_effects  # noqa: E402

GRID = {"m": (1, 64, 4096), "T": (1, 60000, 600000), "sigma": (1e-4, 0.0263, 1.0, 100.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["poisson", "without-replacement"], default="poisson")
    model = parser.parse_args().model
    timings = []
    for m, T, sigma in itertools.product(*GRID.values()):
        t0 = time.perf_counter()
        mixing_effects(n=60000, m=m, T=T, sigma_x=sigma, sigma_y=sigma, delta=1e-5, model=model)
        timings.append((time.perf_counter() - t0, m, T, sigma))
    timings.sort(reverse=True)
    print(f"{model}, {len(timings)} settings: median {statistics.median(t for t, *_ in timings):.2f} s")
    for seconds, m, T, sigma in timings[:3]:
        print(f"  slowest: {seconds:.2f} s at m = {m}, T = {T}, sigma = {sigma:g}")


if __name__ == "__main__":
    main()
