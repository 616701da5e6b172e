"""Slow results computed off the page's rerun: a worker thread, results keyed by exactly their inputs.

A live page asks for a result (an epsilon curve), draws it when it is ready and otherwise shows a
placeholder and polls; the rerun itself never waits for it. Requests that are still queued when a newer
one arrives are dropped (the user has moved on); the one running finishes and is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class BackgroundResults:
    """A small keyed store of futures over one worker thread, least recently used dropped first."""

    def __init__(self, *, max_results: int = 64, workers: int = 1) -> None:
        if max_results < 1 or workers < 1:
            raise ValueError(f"max_results and workers must be >= 1. Found {max_results}, {workers}.")
        self._max = max_results
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpmix-background")
        self._futures: OrderedDict[Hashable, Future] = OrderedDict()
        self._lock = threading.Lock()

    def request(self, key: Hashable, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """The future of ``fn(*args, **kwargs)`` stored under ``key``; submitted unless already known.

        ``key`` must identify the call completely (the same key, the same result). Queued requests for
        other keys are cancelled, so only the newest setting waits behind the one being computed.
        """
        with self._lock:
            future = self._futures.get(key)
            if future is not None and not future.cancelled():
                self._futures.move_to_end(key)
                return future
            for other_key, other in list(self._futures.items()):
                if other.cancel():  # only succeeds for requests that have not started
                    del self._futures[other_key]
            future = self._pool.submit(fn, *args, **kwargs)
            self._futures[key] = future
            while len(self._futures) > self._max:
                self._futures.popitem(last=False)
            return future

    def ready(self, key: Hashable) -> bool:
        """Whether the result under ``key`` is known (computed or failed)."""
        with self._lock:
            future = self._futures.get(key)
        return future is not None and future.done() and not future.cancelled()

    def wait(self, key: Hashable, timeout: float | None = None) -> bool:
        """Block until the result under ``key`` is known (for tests and benchmarks); whether it is."""
        with self._lock:
            future = self._futures.get(key)
        if future is None:
            return False
        try:
            future.exception(timeout=timeout)
        except TimeoutError:
            return False
        return True

    def wait_all(self, timeout: float | None = None) -> bool:
        """Block until every known request is done; whether all are."""
        with self._lock:
            futures = list(self._futures.values())
        return all(self._wait_one(f, timeout) for f in futures)

    @staticmethod
    def _wait_one(future: Future, timeout: float | None) -> bool:
        if future.cancelled():
            return True
        try:
            future.exception(timeout=timeout)
        except TimeoutError:
            return False
        return True


_SHARED: BackgroundResults | None = None
_SHARED_LOCK = threading.Lock()


def shared_background() -> BackgroundResults:
    """The process-wide store the pages use (one worker thread for every session of the server)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = BackgroundResults()
        return _SHARED
