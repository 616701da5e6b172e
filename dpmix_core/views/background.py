"""Slow results computed off the page's rerun: a worker, results keyed by exactly their inputs.

A live page asks for a result (an epsilon curve), draws it when it is ready and otherwise shows a
placeholder and polls; the rerun itself never waits for it. A request still queued when the same user
(``group``: a page passes its browser session) asks for something newer is dropped, unless another user
waits for it too; the one running finishes and is kept. Many users share one queue and one cache: the same
key is computed once for all of them.

Where the work runs::

    request(key, fn, ...) ──> queue (dispatcher threads; a queued request can still be cancelled)
                                │ processes=False: fn runs on the dispatcher thread
                                │ processes=True:  the dispatcher sends (fn, args, kwargs), pickled, to a
                                │                  long-lived worker process and waits for the reply
                                ▼                  (holding no lock and no GIL)
                              future (done: fn's result, or the exception fn raised)

A worker process keeps the computation off the interpreter that serves the pages, so a rerun that
arrives while a curve is being computed does not wait for the GIL (issue 15's rerun target). It is a
plain ``python -m dpmix_core.views.background`` child, not a multiprocessing one: while a Streamlit page
runs, the page is the ``__main__`` module, and multiprocessing's spawn would run it again in the child.
A worker that dies (killed for memory, say) is replaced and the call retried once; a second death is the
request's exception (:class:`WorkerDied`). A worker exits when its parent does (its pipe closes). It
imports the library once: an edit to ``dpmix_core`` reaches it when the server restarts, not on
Streamlit's rerun-on-save.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

from dpmix_core.runtime.jobs import worker_env  # its PYTHONPATH makes dpmix_core importable in the worker

_LOG = logging.getLogger(__name__)


class WorkerDied(RuntimeError):
    """The worker process exited while it computed a request (twice: the retry died too)."""


class WorkerProcess:
    """One long-lived Python process that runs pickled calls one at a time (not thread-safe: one caller)."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self._preload = tuple(preload)
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None

    def start(self) -> None:
        """Start the process (it imports ``preload`` at once) unless it is running."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self.stop()
        ours, theirs = Pipe()
        command = [sys.executable, "-m", __name__, str(theirs.fileno()), *self._preload]
        try:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), env=worker_env(1)
            )
        finally:
            theirs.close()
        self._conn = ours

    def stop(self) -> None:
        """End the process (closing its pipe ends its loop; a stuck one is killed)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """``fn(*args, **kwargs)`` in the worker; a dead worker is replaced and the call retried once."""
        try:
            return self._call_once(fn, args, kwargs)
        except WorkerDied:
            return self._call_once(fn, args, kwargs)  # on a fresh worker; a second death is the caller's

    def _call_once(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        self.start()
        assert self._conn is not None and self._proc is not None
        try:
            self._conn.send((fn, args, kwargs))  # pickles before it writes: an unpicklable call raises, no OSError
            ok, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self._proc.wait()
            self.stop()
            raise WorkerDied(f"the background worker process exited (code {code}) while computing this") from exc
        if ok:
            return value
        raise value


def serve(conn: Connection) -> None:
    """The worker's loop: receive (fn, args, kwargs), send back (True, result) or (False, exception)."""
    while True:
        try:
            request = conn.recv_bytes()
        except (EOFError, OSError):  # the parent closed the pipe or exited
            return
        try:
            fn, args, kwargs = pickle.loads(request)  # fails here if fn's module does not import
            reply: tuple[bool, Any] = (True, fn(*args, **kwargs))
        except Exception as exc:  # the request's failure, not the worker's
            reply = (False, exc)
        try:
            conn.send(reply)
        except OSError:  # the parent has gone
            return
        except Exception as exc:  # the result (or the exception) would not pickle; nothing was written
            conn.send((False, RuntimeError(f"the result could not be sent back: {exc}")))


def _worker_died(future: Future) -> bool:
    """Whether ``future`` failed because its worker died (asked again, it is computed again)."""
    return future.done() and not future.cancelled() and isinstance(future.exception(), WorkerDied)


class BackgroundResults:
    """A small keyed store of futures over dispatcher threads, least recently used dropped first.

    ``processes=True`` runs each call in a worker process (one per dispatcher thread; ``fn``, its
    arguments and its result must pickle; ``preload`` names modules a worker imports when it starts).
    """

    def __init__(
        self,
        *,
        max_results: int = 64,
        workers: int = 1,
        processes: bool = False,
        preload: Sequence[str] = (),
    ) -> None:
        if max_results < 1 or workers < 1:
            raise ValueError(f"max_results and workers must be >= 1. Found {max_results}, {workers}.")
        self._max = max_results
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpmix-background")
        self._processes: queue.SimpleQueue[WorkerProcess] | None = None
        if processes and os.name != "posix":  # the worker's pipe is handed over by pass_fds (POSIX only)
            _LOG.warning("background work runs on threads: worker processes need a POSIX system")
        elif processes:
            self._processes = queue.SimpleQueue()
            try:
                for _ in range(workers):
                    worker = WorkerProcess(preload)
                    worker.start()  # its imports run now, not on the first request
                    self._processes.put(worker)
            except OSError as exc:  # no process can be started here: the same results, on threads
                _LOG.warning("background work runs on threads: could not start a worker process (%s)", exc)
                while not self._processes.empty():
                    self._processes.get().stop()
                self._processes = None
        self._futures: OrderedDict[Hashable, Future] = OrderedDict()
        self._groups: dict[Hashable, set[Hashable]] = {}  # who still wants each key (see request)
        self._order: dict[Hashable, int] = {}  # when each key was submitted (the queue is first in, first out)
        self._submitted = 0
        self._lock = threading.Lock()

    def _in_process(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        assert self._processes is not None
        worker = self._processes.get()  # one idle worker per dispatcher thread
        try:
            return worker.call(fn, args, kwargs)
        finally:
            self._processes.put(worker)

    def request(
        self, key: Hashable, fn: Callable[..., Any], /, *args: Any, group: Hashable = None, **kwargs: Any
    ) -> Future:
        """The future of ``fn(*args, **kwargs)`` stored under ``key``; submitted unless already known.

        ``key`` must identify the call completely (the same key, the same result: two groups asking for it
        share one computation; a result lost to a dead worker is computed again when asked again).
        ``group`` is who asks (a page passes its browser session): a new request cancels the queued
        requests that only this group still wants, so a user typing fast leaves one request waiting behind
        the one being computed, and never cancels another user's (``fn`` cannot take a keyword named
        ``group``).
        """
        with self._lock:
            future = self._futures.get(key)
            if future is not None and not future.cancelled() and not _worker_died(future):
                self._futures.move_to_end(key)
                self._groups[key].add(group)
                return future
            for other_key, wanted_by in list(self._groups.items()):
                other = self._futures[other_key]
                if group not in wanted_by or other.running() or other.done():
                    continue
                wanted_by.discard(group)  # this group has moved on from that queued request
                if not wanted_by and other.cancel():  # nobody else waits for it, and it has not started
                    del self._futures[other_key], self._groups[other_key], self._order[other_key]
            if self._processes is None:
                future = self._pool.submit(fn, *args, **kwargs)
            else:
                future = self._pool.submit(self._in_process, fn, args, kwargs)
            self._futures[key] = future
            self._groups[key] = {group}
            self._submitted += 1
            self._order[key] = self._submitted
            while len(self._futures) > self._max:
                dropped, _ = self._futures.popitem(last=False)
                del self._groups[dropped], self._order[dropped]
            return future

    def ahead_of(self, key: Hashable) -> int:
        """How many requests the workers take before ``key`` starts (those running included); 0 once it has."""
        with self._lock:
            future = self._futures.get(key)
            if future is None or future.running() or future.done():
                return 0
            mine = self._order[key]
            return sum(1 for k, f in self._futures.items() if self._order[k] < mine and not f.done())

    def known(self, key: Hashable) -> bool:
        """Whether ``key`` is still requested or computed (not cancelled, not dropped as least recently used).

        A page waiting for a result that is no longer known reruns to ask for it again.
        """
        with self._lock:
            return key in self._futures

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
    """The process-wide store the pages use: one worker process for every session of the server."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = BackgroundResults(processes=True, preload=("dpmix_core.views.reports",))
        return _SHARED


def main(argv: Sequence[str]) -> None:
    """``python -m dpmix_core.views.background FD [MODULE ...]``: a worker serving the pipe end FD."""
    fd, *preload = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server; its exit closes our pipe
    for name in preload:
        importlib.import_module(name)
    serve(Connection(int(fd)))


if __name__ == "__main__":
    main(sys.argv[1:])
