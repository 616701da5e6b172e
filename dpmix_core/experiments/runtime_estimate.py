"""How long a sweep will take on *this* machine: the cost model rescaled by the measured time of past runs.

The cost model (:func:`dpmix_core.experiments.presets.estimate_seconds`) was fitted on an idle 2-core machine;
on a loaded one, or with several workers sharing the cores, runs take several times longer (issue 15: 0.4 min
estimated, 5.4 min actual). Every finished run in the results store records its wall time, so the ratio
measured / modelled of past runs of the same model (and method) on this host says how far off the model is
here and now; the spread of those ratios gives the range.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.presets import estimate_seconds
from dpmix_core.experiments.spec import SweepSpec
from dpmix_core.runtime.store import HOST, ResultStore, Run

HISTORY_RUNS = 400  # newest finished runs read from the store (enough for every model; a cheap query)
NO_HISTORY_RANGE = (1.0, 10.0)  # cost model x this, when no run of the model finished here: honest but wide


@dataclass(frozen=True)
class PastRun:
    """One finished run: its model, method, measured wall time and what the cost model says it should take."""

    model: str
    method: str
    seconds: float
    modelled_seconds: float

    def __post_init__(self) -> None:
        for name in ("seconds", "modelled_seconds"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive finite number. Found {value}.")

    @property
    def ratio(self) -> float:
        return self.seconds / self.modelled_seconds


@dataclass(frozen=True)
class RuntimeEstimate:
    """A wall-clock range for a sweep, and what it rests on."""

    low_minutes: float
    high_minutes: float
    runs_to_compute: int  # runs not already finished in the store
    runs_reused: int
    past_runs: int  # finished runs of the same model(s) that calibrated the range; 0: cost model only
    runs_from_history: int = 0  # runs to compute whose model has past runs here (the others: cost model only)

    def __post_init__(self) -> None:
        if not (0 <= self.low_minutes <= self.high_minutes) or not math.isfinite(self.high_minutes):
            raise ValueError(f"need 0 <= low <= high (finite). Found {self.low_minutes}, {self.high_minutes}.")
        if min(self.runs_to_compute, self.runs_reused, self.past_runs, self.runs_from_history) < 0:
            raise ValueError("run counts must be >= 0.")
        if self.runs_from_history > self.runs_to_compute:
            raise ValueError("runs_from_history cannot exceed runs_to_compute.")

    @property
    def text(self) -> str:
        """e.g. "3–6 min, from 12 past runs of this model on this machine" or "0.5–5 min (rough: no past runs …)"."""
        if self.runs_to_compute == 0:
            return "no time: every run is already in the store"
        span = f"{_minutes(self.low_minutes)}–{_minutes(self.high_minutes)} min"
        past = f"{self.past_runs} past run{'s' * (self.past_runs != 1)}"
        if self.runs_from_history == self.runs_to_compute:
            return f"{span}, from {past} of this model on this machine"
        if self.runs_from_history == 0:
            return f"{span} (rough: no past runs of this model on this machine yet)"
        return (
            f"{span} (rough: {self.runs_from_history} of {self.runs_to_compute} runs from {past} of their model "
            "on this machine, the others from the cost model alone)"
        )


def _minutes(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def past_runs(store: ResultStore, *, host: str | None = HOST, limit: int = HISTORY_RUNS) -> list[PastRun]:
    """Finished trade-off runs of this host with their measured and modelled times (undecodable ones skipped)."""
    out = []
    for run in store.list_runs(status="done", newest_first=True, limit=limit):
        if host is not None and run.host not in (None, host):
            continue
        past = _past(run)
        if past is not None:
            out.append(past)
    return out


def _past(run: Run) -> PastRun | None:
    if run.started is None or run.finished is None or run.finished <= run.started:
        return None
    try:
        cfg = RunConfig.from_dict(run.config)
        return PastRun(cfg.model, cfg.method, run.finished - run.started, estimate_seconds(cfg))
    except (ValueError, TypeError, KeyError):
        return None


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of a non-empty list (numpy's default rule)."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def estimate_runtime(
    runs: Iterable[RunConfig], history: Sequence[PastRun], *, slots: int, done_keys: frozenset[str] = frozenset()
) -> RuntimeEstimate:
    """Wall-clock range of ``runs`` on ``slots`` parallel workers.

    Each run's modelled time is scaled by the ratios measured/modelled of past runs of its model and method
    (of its model alone when no run of that method finished; the 20th and 80th percentiles of the ratios, or
    their min and max below 5 runs); with no past run of the model, by :data:`NO_HISTORY_RANGE`. Runs whose
    key is in ``done_keys`` are reused and cost nothing.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1. Found {slots}.")
    low = high = 0.0
    todo = reused = known = 0
    used: set[int] = set()
    for cfg in runs:
        if run_key(cfg) in done_keys:
            reused += 1
            continue
        todo += 1
        matches = [i for i, p in enumerate(history) if p.model == cfg.model and p.method == cfg.method]
        matches = matches or [i for i, p in enumerate(history) if p.model == cfg.model]
        modelled = estimate_seconds(cfg)
        if matches:
            ratios = [history[i].ratio for i in matches]
            q = (0.2, 0.8) if len(ratios) >= 5 else (0.0, 1.0)
            low += modelled * _quantile(ratios, q[0])
            high += modelled * _quantile(ratios, q[1])
            used.update(matches)
            known += 1
        else:
            low += modelled * NO_HISTORY_RANGE[0]
            high += modelled * NO_HISTORY_RANGE[1]
    return RuntimeEstimate(
        low_minutes=low / slots / 60.0,
        high_minutes=high / slots / 60.0,
        runs_to_compute=todo,
        runs_reused=reused,
        past_runs=len(used),
        runs_from_history=known,
    )


def estimate_sweep_runtime(
    spec: SweepSpec, store: ResultStore, *, slots: int, keys: Collection[str] | None = None
) -> RuntimeEstimate:
    """:func:`estimate_runtime` of a sweep from the store's history on this host (what the page shows); ``keys``:
    only the runs with these keys (those its data can make, ``trade_offs.runs_the_data_can_make``)."""
    runs = spec.runs() if keys is None else [cfg for cfg in spec.runs() if run_key(cfg) in keys]
    history = past_runs(store)
    done = frozenset(
        key for key in (run_key(cfg) for cfg in runs) if (r := store.get_by_key(key)) is not None and r.status == "done"
    )
    return estimate_runtime(runs, history, slots=slots, done_keys=done)
