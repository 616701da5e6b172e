"""Shared by the bench scripts: the median wall time of a call (run them as ``python bench/NAME.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median of ``repeats`` wall-clock timings of ``fn()`` (seconds, ``time.perf_counter``)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed_rerun(at) -> float:
    """Seconds one ``AppTest.run()`` takes (server time, no browser); fails on an exception the page raised."""
    t0 = time.perf_counter()
    at.run()
    assert not at.exception, at.exception
    return time.perf_counter() - t0


def median_max_ms(times: list[float]) -> str:
    """``"median | max"`` of ``times`` (seconds) in milliseconds: two cells of a markdown table."""
    return f"{1000 * statistics.median(times):.0f} | {1000 * max(times):.0f}"
