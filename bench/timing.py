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
