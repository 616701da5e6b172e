"""Page rerun time of the Privacy accountant page after one change, as a user makes it (issue 15 target:
the whole rerun <= 300 ms median on the 2-core machine; the table and readout <= 150 ms).

Drives the page with Streamlit's AppTest (server time only, no browser), after a warm-up that fills the
caches of the default setting. Each change is applied, the page rerun and timed; then the change is undone.

    .venv/bin/python bench/bench_app.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

PAGE = str(ROOT / "app_pages" / "privacy_accountant.py")


def _timed(at: AppTest) -> float:
    t0 = time.perf_counter()
    at.run()
    assert not at.exception, at.exception
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    at = AppTest.from_file(PAGE, default_timeout=300)
    first = _timed(at)
    changes = {
        "σ change (new table, cached curve)": ("acc_sigma_x", [0.05 + 0.001 * i for i in range(args.repeats)]),
        "T change (new table, the σ-curve depends on T: recomputed)": (
            "acc_T",
            [9000 + 100 * i for i in range(args.repeats)],
        ),
        "class-centric toggle": ("acc_class_centric", [True, False] * args.repeats),
    }
    print(f"first render (cold caches): {first * 1000:.0f} ms")
    print("| change | median rerun (ms) | max (ms) | reruns |")
    print("|---|---|---|---|")
    for label, (key, values) in changes.items():
        times = []
        for value in values[: args.repeats]:
            widget = at.checkbox(key=key) if isinstance(value, bool) else at.number_input(key=key)
            widget.set_value(value)
            times.append(_timed(at))
        print(f"| {label} | {1000 * statistics.median(times):.0f} | {1000 * max(times):.0f} | {len(times)} |")
    mix = AppTest.from_file(str(ROOT / "app_pages" / "mixed_samples.py"), default_timeout=300)
    _timed(mix)
    draws = []
    for _ in range(args.repeats):
        mix.button(key="mix_redraw").click()
        draws.append(_timed(mix))
    print(
        f"| Mixed samples: New draw (embedded data) | {1000 * statistics.median(draws):.0f} | "
        f"{1000 * max(draws):.0f} | {len(draws)} |"
    )


if __name__ == "__main__":
    main()
