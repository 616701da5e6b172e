"""The cost model in front of every computation: estimate memory and time from the parameters,
refuse before computing when a request exceeds the configured limits.

Limits (environment, read at call time; defaults are safe for a shared classroom server on a
small machine, e.g. 2 cores and a few GiB):

* ``DPMIX_MAX_MEMORY`` (default ``2G``): bytes one computation may allocate (``512M``, ``4G``,
  ``1e9``);
* ``DPMIX_MAX_SECONDS`` (default ``60``): seconds one interactive computation may take (a release
  prepared on a page, ``synthesize``, ``audit``);
* ``DPMIX_MAX_JOB_SECONDS`` (default ``43200``, 12 h): seconds one background job may take
  (a training run or a sweep's runs, which run in worker processes and never block a page);
* ``DPMIX_MAX_RUNS`` (default ``5000``): runs one sweep may list.

The costs are the mechanisms' known orders (T*l*(d+K) gathered values for mixing, T*(d+K) floats
held in memory, runs*epochs*n samples for training, trials*(one mixing release) for audits) with
conservative per-element rates; they are estimates for refusing absurd requests, not timings.
Every refusal is a :class:`LimitExceeded` (a ValueError) whose one-line message names the limit,
the estimate and what to change.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Cost",
    "Limits",
    "LimitExceeded",
    "audit_cost",
    "check_cost",
    "check_mixing_cost",
    "check_sweep_cost",
    "check_training_cost",
    "format_duration",
    "limits_from_env",
    "mixing_cost",
    "parse_bytes",
    "streaming_cost",
    "training_cost",
]

GIB = 1 << 30
DEFAULT_MAX_MEMORY = 2 * GIB
DEFAULT_MAX_SECONDS = 60.0
DEFAULT_MAX_JOB_SECONDS = 12 * 3600.0
DEFAULT_MAX_RUNS = 5000

# gathered-and-summed float values per second: the engine measures ~1.6e10/s on two cores (T=60000, l=256 on
# MNIST in 0.76 s, docs/PERFORMANCE.md); 2e9 keeps a margin for a loaded or slower machine without refusing
# the papers' own releases
MIX_VALUES_PER_S = 2e9
AUDIT_VALUES_PER_S = 2e7  # simulated log-likelihood-ratio terms per second (normal draw + logaddexp)
TRAIN_SAMPLES_PER_S = 2000.0  # samples per second through a small CNN on one slow core
BYTES_PER_VALUE = 4  # float32 releases
MIX_WORKSPACE = 64 << 20  # chunked gather, noise tiles and the table copy, beyond the output


class LimitExceeded(ValueError):
    """A request whose estimated cost exceeds a limit (one line: limit, estimate, what to change)."""


@dataclass(frozen=True)
class Limits:
    """The configured limits (see the module docstring); build with :func:`limits_from_env`."""

    max_memory: int = DEFAULT_MAX_MEMORY
    max_seconds: float = DEFAULT_MAX_SECONDS
    max_job_seconds: float = DEFAULT_MAX_JOB_SECONDS
    max_runs: int = DEFAULT_MAX_RUNS

    def __post_init__(self) -> None:
        for name in ("max_memory", "max_seconds", "max_job_seconds", "max_runs"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"limit {name} must be a positive number. Found {value!r}.")


@dataclass(frozen=True)
class Cost:
    """An estimate: what is computed, the bytes it holds at once and the seconds it takes."""

    what: str
    memory: float
    seconds: float

    def __post_init__(self) -> None:
        if not (self.memory >= 0 and self.seconds >= 0):
            raise ValueError(f"a cost is non-negative. Found memory={self.memory}, seconds={self.seconds}.")


_SUFFIXES = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str, *, name: str = "DPMIX_MAX_MEMORY") -> int:
    """'2G', '512M', '1e9', '1048576' -> bytes (binary suffixes, optional trailing 'iB'/'B')."""
    raw = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = raw[-1:] if raw[-1:] in _SUFFIXES and raw[-1:] else ""
    number = raw[: len(raw) - len(unit)] if unit else raw
    try:
        value = float(number) * _SUFFIXES[unit]
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a size such as 2G, 512M or 1e9.") from None
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{name}={text!r} must be a positive size such as 2G.")
    return int(value)


def _positive_env(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number of seconds.") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={text!r} must be a positive number.")
    return value


def limits_from_env(env: Mapping[str, str] | None = None) -> Limits:
    """The limits from ``DPMIX_MAX_MEMORY``, ``DPMIX_MAX_SECONDS``, ``DPMIX_MAX_JOB_SECONDS``,
    ``DPMIX_MAX_RUNS`` (``env`` defaults to ``os.environ``)."""
    env = os.environ if env is None else env
    memory = env.get("DPMIX_MAX_MEMORY")
    return Limits(
        max_memory=parse_bytes(memory) if memory and memory.strip() else DEFAULT_MAX_MEMORY,
        max_seconds=_positive_env(env, "DPMIX_MAX_SECONDS", DEFAULT_MAX_SECONDS),
        max_job_seconds=_positive_env(env, "DPMIX_MAX_JOB_SECONDS", DEFAULT_MAX_JOB_SECONDS),
        max_runs=int(_positive_env(env, "DPMIX_MAX_RUNS", DEFAULT_MAX_RUNS)),
    )


def _size(nbytes: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes / 1024:.3g} KiB"


def format_duration(seconds: float) -> str:
    """A duration for a person: "45 s", "12 min", "2.5 h", "3.1 days" (3 significant digits at most)."""
    if seconds >= 86400:
        return f"{seconds / 86400:.3g} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def mixing_cost(*, T: int, l: int, d: int, k: int, n: int = 0) -> Cost:
    """One mixing release of T points of l records each, d features and K labels (n: records held)."""
    width = max(1, d) + max(0, k)
    return Cost(
        what=f"a release of T={T:,} points (l={l:,}, d={d:,})",
        memory=float(T) * width * BYTES_PER_VALUE + float(n) * width * BYTES_PER_VALUE + MIX_WORKSPACE,
        seconds=float(T) * max(1, l) * width / MIX_VALUES_PER_S,
    )


def training_cost(*, runs: int, epochs: int, n: int, d: int = 784) -> Cost:
    """``runs`` trainings of ``epochs`` passes over ``n`` samples (the release, held in memory)."""
    return Cost(
        what=f"{runs:,} run(s) x {epochs:,} epoch(s) x {n:,} samples",
        memory=float(n) * max(1, d) * BYTES_PER_VALUE + MIX_WORKSPACE,
        seconds=float(runs) * epochs * n * max(1.0, d / 784) / TRAIN_SAMPLES_PER_S,
    )


def audit_cost(*, trials: int, T: int, chunk_values: int) -> Cost:
    """The simulated audit: 2 x ``trials`` runs of T likelihood-ratio terms, ``chunk_values`` at once."""
    return Cost(
        what=f"an audit of {trials:,} trials x T={T:,}",
        memory=float(chunk_values) * 8 * 4 + MIX_WORKSPACE,
        seconds=2.0 * trials * T / AUDIT_VALUES_PER_S,
    )


def streaming_cost(*, T: int, l: int, d: int, k: int, chunk_values: int) -> Cost:
    """A streamed release: the output goes to disk, memory is the chunk; time as for :func:`mixing_cost`."""
    width = max(1, d) + max(0, k)
    return Cost(
        what=f"a streamed release of T={T:,} points (l={l:,}, d={d:,})",
        memory=float(chunk_values) * 8 + MIX_WORKSPACE,
        seconds=float(T) * max(1, l) * width / MIX_VALUES_PER_S,
    )


def check_cost(cost: Cost, limits: Limits, *, change: str, job: bool = False) -> Cost:
    """``cost`` if within ``limits``, else :class:`LimitExceeded` naming the limit and ``change``
    (what the user can lower). ``job``: a background job, held to ``DPMIX_MAX_JOB_SECONDS``.

    Args:
        cost: the estimate (bytes held at once, seconds).
        limits: the limits to hold it to (e.g. :func:`limits_from_env`).
        change: the words completing "lower ..." in the message (e.g. "T or l").
        job: True for a background job (``max_job_seconds``), False for an interactive computation
            (``max_seconds``); the memory limit applies to both.

    Returns:
        ``cost`` itself, unchanged.

    Raises:
        LimitExceeded: (a ValueError) the memory or the time estimate is over its limit (memory is checked
            first); the one-line message names the limit, the estimate and what to lower.
    """
    if cost.memory > limits.max_memory:
        raise LimitExceeded(
            f"{cost.what} needs about {_size(cost.memory)} of memory, over the limit of "
            f"{_size(limits.max_memory)} (DPMIX_MAX_MEMORY): lower {change}."
        )
    max_s, name = (
        (limits.max_job_seconds, "DPMIX_MAX_JOB_SECONDS") if job else (limits.max_seconds, "DPMIX_MAX_SECONDS")
    )
    if cost.seconds > max_s:
        raise LimitExceeded(
            f"{cost.what} takes about {format_duration(cost.seconds)}, over the limit of {format_duration(max_s)} ({name}): "
            f"lower {change}."
        )
    return cost


def check_mixing_cost(*, T: int, l: int, d: int, k: int, n: int = 0, limits: Limits | None = None) -> Cost:
    """:func:`mixing_cost` checked against ``limits`` (default: from the environment).

    Args:
        T: the number of released points.
        l: the mix degree (the expected batch size m for Poisson mixing).
        d: the number of features per record.
        k: the number of label entries per record (K classes).
        n: the number of records held in memory alongside the output (0: not counted).
        limits: the limits; None reads them from the environment. Held to the interactive time limit.

    Returns:
        The :class:`Cost` estimate (bytes, seconds) when it is within the limits.

    Raises:
        LimitExceeded: (a ValueError) over the memory limit or ``DPMIX_MAX_SECONDS``; the message says to
            lower T or l.
        ValueError: a malformed limit in the environment (when ``limits`` is None).
    """
    return check_cost(mixing_cost(T=T, l=l, d=d, k=k, n=n), limits or limits_from_env(), change="T or l")


def check_training_cost(*, runs: int, epochs: int, n: int, d: int = 784, limits: Limits | None = None) -> Cost:
    """:func:`training_cost` checked against the job limits (training runs in the background).

    Args:
        runs: the number of trainings (e.g. a sweep's runs or repeats).
        epochs: passes over the training set per run.
        n: training samples per epoch (the release's T, or the records).
        d: features per sample (784 by default; time scales with d / 784 above it).
        limits: the limits; None reads them from the environment.

    Returns:
        The :class:`Cost` estimate (bytes, seconds) when it is within the limits.

    Raises:
        LimitExceeded: (a ValueError) over the memory limit or ``DPMIX_MAX_JOB_SECONDS``; the message says to
            lower the repeats, epochs or T.
        ValueError: a malformed limit in the environment (when ``limits`` is None).
    """
    return check_cost(
        training_cost(runs=runs, epochs=epochs, n=n, d=d),
        limits or limits_from_env(),
        change="the repeats, epochs or T",
        job=True,
    )


def check_sweep_cost(runs: int, limits: Limits | None = None) -> int:
    """A sweep's run list may hold at most ``DPMIX_MAX_RUNS`` runs."""
    limits = limits or limits_from_env()
    if runs > limits.max_runs:
        raise LimitExceeded(
            f"the sweep lists {runs:,} runs, over the limit of {limits.max_runs:,} (DPMIX_MAX_RUNS): "
            "lower the repeats or the grid's values."
        )
    return runs
