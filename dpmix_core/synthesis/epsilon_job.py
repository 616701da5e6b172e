"""A release's card epsilons, computed in a second process while the mechanism runs.

The accountants need dp_accounting and scipy (about 1 s to import on a laptop core),
the mechanism needs torch (about 1.5 s) and then the mixing kernel. A card's epsilons
depend only on the release *description* (n, l, T, sigmas, bounds), which is known
before any data is mixed, so the command line starts ``python -m dpmix_core.synthesis.epsilon_job``
with the planned release and collects the result after writing the data: the two
imports run on two cores instead of one after the other.

:func:`background_epsilons` is a context manager yielding ``epsilons_for(release)``:
the child's result when ``release`` is the one it was started with and it succeeded,
else the epsilons computed in this process (so an accountant's error surfaces exactly
as without the child). When this process has loaded the accountants already (a test,
the app, a long-lived worker) no child is started: computing here is cheaper.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dpmix_core
from dpmix_core.privacy.release import MixingRelease

__all__ = ["accountants_loaded", "background_epsilons"]

_ACCOUNTANT_MODULES = ("dpmix_core.privacy.accountants", "dp_accounting")


def accountants_loaded() -> bool:
    """True when this process has imported the accountants (then a child process would only cost time)."""
    return any(name in sys.modules for name in _ACCOUNTANT_MODULES)


def _child_env() -> dict[str, str]:
    """The parent's environment with ``dpmix_core`` importable and one BLAS thread (the parent mixes)."""
    env = dict(os.environ)
    root = str(Path(dpmix_core.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    return env


def _start(release: MixingRelease, delta: float) -> subprocess.Popen | None:
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dpmix_core.synthesis.epsilon_job"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_child_env(),
        )
    except OSError:
        return None
    try:
        if proc.stdin is None:
            raise OSError("no pipe to the epsilon job")
        proc.stdin.write(pickle.dumps((release, float(delta))))
        proc.stdin.close()
    except OSError:
        _stop(proc)
        return None
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _collect(proc: subprocess.Popen) -> list[dict] | None:
    """The child's epsilons, or None if it failed."""
    try:
        if proc.stdout is None:
            return None
        out = proc.stdout.read()
        proc.wait()
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    try:
        result = json.loads(out)
    except ValueError:
        return None
    return result if isinstance(result, list) else None


@contextmanager
def background_epsilons(
    release: MixingRelease | None, delta: float, *, enabled: bool = True
) -> Iterator[Callable[[MixingRelease], list[dict]]]:
    """Start computing ``card_epsilons(release, delta)`` in a child process; yield ``epsilons_for``.

    ``release`` None or ``enabled`` False (or the accountants already loaded here): no child,
    ``epsilons_for`` computes in this process. A child still running when the block exits is killed.
    """
    from dpmix_core.synthesis.export import card_epsilons

    proc = None
    if enabled and release is not None and not accountants_loaded():
        proc = _start(release, delta)

    def epsilons_for(made: MixingRelease) -> list[dict]:
        nonlocal proc
        if proc is not None and made == release:
            result = _collect(proc)
            proc = None
            if result is not None:
                return result
        return card_epsilons(made, delta)

    try:
        yield epsilons_for
    finally:
        if proc is not None:
            _stop(proc)


def main() -> int:
    """Child side: a pickled (release, delta) on stdin from the parent, the epsilons as JSON on stdout."""
    from dpmix_core.synthesis.export import card_epsilons

    release, delta = pickle.loads(sys.stdin.buffer.read())
    if not isinstance(release, MixingRelease):
        return 2
    sys.stdout.write(json.dumps(card_epsilons(release, delta)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # the parent reads our stdout to EOF: leave without the interpreter's teardown of scipy/dp_accounting
    # (~0.25 s of CPU on the core the parent mixes on; issue #16), as ``python -m dpmix_core`` does
    os._exit(code)
