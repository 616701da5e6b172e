"""A bounded in-memory memo that a long-lived worker owns and lends to the runs it executes (issue #16).

A sweep worker process lives across runs, so what a run derives from public inputs (ScatterNet
features of a dataset, their group-normalised form) can be kept for the next run instead of being
re-read (1.1 GB of float32 for MNIST's features) or recomputed. The memo is an LRU bounded by bytes
and by entries; it belongs to the worker object, which activates it around each run with
:func:`active_memo`. Library code asks :func:`memoized` — with no active memo (the CLI, the app, a
test) it simply computes, so behaviour never depends on whether a memo is present.

Values are shared between runs, so arrays are stored read-only (``writeable = False``): a run that
tried to change a memoised array in place raises instead of corrupting the next run's input. Keys
must name everything the value depends on (e.g. a SHA-256 of the input array).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["ArrayMemo", "MemoLimits", "active_memo", "memoized", "value_nbytes"]

T = TypeVar("T")


@dataclass(frozen=True)
class MemoLimits:
    """How much a worker may keep: ``max_bytes`` in total (values' ``nbytes``), at most ``max_entries``."""

    max_bytes: int = 2 << 30
    max_entries: int = 16

    def __post_init__(self) -> None:
        if int(self.max_bytes) < 0:
            raise ValueError(f"max_bytes must be >= 0 (0 disables the memo). Found {self.max_bytes}.")
        if int(self.max_entries) < 1:
            raise ValueError(f"max_entries must be >= 1. Found {self.max_entries}.")


def value_nbytes(value: Any) -> int:
    """Bytes a value holds: ``nbytes`` of an array, the sum over a tuple/list of arrays, else 0."""
    if isinstance(value, (tuple, list)):
        return sum(value_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0) or 0)


def _freeze(value: Any) -> Any:
    """Make numpy arrays read-only (a shared value must not be changed in place by one run)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            _freeze(v)
    elif hasattr(value, "setflags"):
        value.setflags(write=False)
    return value


class ArrayMemo:
    """LRU of computed values, bounded by :class:`MemoLimits`; counts hits and misses.

    A value larger than ``max_bytes`` is returned but not kept. Owned by one worker; not shared
    between threads (a worker runs one job at a time).
    """

    def __init__(self, limits: MemoLimits | None = None) -> None:
        self.limits = limits or MemoLimits()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value stored under ``key``, else ``compute()`` (kept when it fits, evicting the oldest)."""
        if key in self._items:
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key][0]
        self.misses += 1
        value = compute()
        size = value_nbytes(value)
        if size > self.limits.max_bytes:
            return value
        _freeze(value)
        self._items[key] = (value, size)
        while len(self._items) > self.limits.max_entries or self.nbytes > self.limits.max_bytes:
            self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        self._items.clear()


# The memo lent to the code running now (a context variable, not a cache: it holds a reference the
# worker sets around each run and resets afterwards; the memo itself is the worker's).
_ACTIVE: ContextVar[ArrayMemo | None] = ContextVar("dpmix_active_memo", default=None)


@contextmanager
def active_memo(memo: ArrayMemo | None) -> Iterator[ArrayMemo | None]:
    """Lend ``memo`` to :func:`memoized` calls inside the block (None: no memo)."""
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)


def memoized(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, through the active memo when a worker lent one (see the module docstring)."""
    memo = _ACTIVE.get()
    return compute() if memo is None else memo.get_or_compute(key, compute)
