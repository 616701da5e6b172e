"""Benchmark: empirical epsilon lower bound (privacy audit) wall time.

Run: .venv/bin/python bench/bench_audit.py
Target: a 10^4-trial audit in <= 30 s on 2 CPU cores. Prints a markdown table
with the lower bound next to the smallest rigorous accountant epsilon.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpmix_core.audit import AuditConfig, run_audit  # noqa: E402

CASES = [
    # (mechanism, n, l, T, sigma, noise_scale)
    ("dpmix", 20, 1, 1, 1.0, 1.0),
    ("dpmix", 100, 4, 5, 1.0, 1.0),
    ("dpmix", 20, 1, 1, 4.0, 0.1),
    ("poisson", 50, 2, 3, 0.5, 1.0),
    ("dpmix", 1000, 10, 1000, 0.5, 1.0),
]


def main() -> None:
    print(
        "| mechanism | n | l | T | sigma | noise_scale | trials | eps_lb (95 %) | min rigorous eps "
        "| violation | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mech, n, l, T, sigma, ns in CASES:
        for trials in (10_000, 100_000):
            if T * trials > 2e8:
                continue
            config = AuditConfig(
                mechanism=mech, n=n, l=l, T=T, sigma_x=sigma, sigma_y=sigma, trials=trials, noise_scale=ns, seed=0
            )
            start = time.perf_counter()
            r = run_audit(config)
            seconds = time.perf_counter() - start
            print(
                f"| {mech} | {n} | {l} | {T} | {sigma:g} | {ns:g} | {trials} | {r.epsilon_lower_bound:.3f} | "
                f"{r.smallest_upper_bound:.3f} | {r.violation} | {seconds:.2f} |"
            )
    print()
    print(
        "CLI: python -m dpmix_core audit --mechanism dpmix --n 20 --l 1 --T 1 --sigma-x 1 --sigma-y 1 "
        "--trials 10000 --seed 0 --json"
    )


if __name__ == "__main__":
    main()
