"""The one ``Cancelled``: raised by long work (training, audits) when its reporter asks it to stop.

It lives in the lowest layer that raises it and imports nothing heavy (no torch), so the runtime (workers,
backends) and the pages can share it. The worker also treats any exception class named ``Cancelled`` as a
cancellation (job code outside dpmix_core may define its own).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Cancelled", "StopCheck"]


class Cancelled(Exception):
    """The reporter asked the run to stop (``reporter.should_stop()`` returned True)."""


class StopCheck:
    """Calls ``should_stop`` at most every ``interval`` seconds (always when forced); raises :class:`Cancelled`."""

    def __init__(self, should_stop: Callable[[], bool] | None, interval: float = 1.0) -> None:
        self.should_stop = should_stop
        self.interval = interval
        self._last = time.monotonic()

    def __call__(self, force: bool = False) -> None:
        if self.should_stop is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            if self.should_stop():
                raise Cancelled("run cancelled")
