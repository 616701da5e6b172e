"""The experiment bench behind "Train & trade-offs": launch a sweep as background jobs, follow it, aggregate it.

Its figure is drawn by :mod:`dpmix_core.views.accuracy_figure`.

Everything goes through the results store (the only channel between the app
and the workers); nothing here blocks or imports Streamlit.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from dpmix_core.data import (
    DATASET_NAMES,
    DATASET_TITLES,
    OWN_DATA,
    Dataset,
    DatasetError,
    load_dataset,
    locate_dataset,
    public_zscore_constants,
)
from dpmix_core.experiments.best_axis import AxisPick, best_axis_values
from dpmix_core.experiments.config import RunConfig, on_dataset, run_key
from dpmix_core.experiments.presets import estimate_sweep_seconds, get_preset
from dpmix_core.experiments.release_files import ReleaseFile, release_run_options, release_synthesis
from dpmix_core.experiments.results import aggregate, all_collapsed, runs_per_point
from dpmix_core.experiments.run_data import (
    OwnData,
    check_run_on,
    image_model_problem,
    load_run_dataset,
    own_data_sizes,
)
from dpmix_core.experiments.spec import Published, SweepSpec, axis_value, load_spec
from dpmix_core.experiments.sweeps import DEFAULT_RETRY, RunSpec, submit_sweep
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.privacy.statement import bound_text
from dpmix_core.resources.limits import (
    LimitExceeded,
    Limits,
    check_cost,
    check_sweep_cost,
    check_training_cost,
    limits_from_env,
    mixing_cost,
)
from dpmix_core.runtime.jobs import LocalProcessBackend, default_max_parallel
from dpmix_core.runtime.store import RETRYABLE_STATUSES, ResultStore, Run, config_key
from dpmix_core.training.collapse import shift_note
from dpmix_core.training.names import TEST_INPUTS

__all__ = [
    "cli_spec",
    "default_sweep",
    "sweep_activity",
    "sweep_choices",
    "cancel_runs",
    "pump_local",
    "waiting_without_worker",
    "resume_runs",
    "JOB_KIND",
    "Launch",
    "custom_spec",
    "AUTO_ACCOUNTANT",
    "release_file_spec",
    "release_model_choices",
    "estimate_minutes",
    "expand_cli_spec",
    "narrow_spec",
    "check_job_datasets",
    "runs_the_data_can_make",
    "with_data_file",
    "check_seeds",
    "sweep_jobs",
    "sweep_id_from_query",
    "spec_problem",
    "launch_sweep",
    "unreadable_runs",
    "run_table",
    "sweep_results",
    "CLASS_CENTRIC_RECORDS",
    "sweep_test_rows",
    "sweep_test_inputs",
    "runs_left_out",
    "TEST_INPUTS_TITLES",
    "sweep_rows",
    "sweep_run_ids",
    "StoredSweep",
    "read_stored_sweep",
    "sweep_spec",
    "sweep_published",
    "stored_spec",
    "published_comparison",
    "reproduction_verdict",
    "sweep_best_axis",
    "best_axis_table",
    "axis_column",
    "REPRODUCED_WITHIN_PTS",
    "with_dataset",
]

# custom_spec's accountant that calibrates each mechanism with the tightest rigorous bound of its sampling scheme
AUTO_ACCOUNTANT = "auto"

# A job kind is part of a stored run's identity (the store refuses a key under another kind), so it keeps the
# spelling stores were written with; the worker resolves it to its current home (runtime.worker.MOVED_KINDS).
JOB_KIND = "dpmix_core.experiments.runner:run_job"
AXIS_TITLES = {
    "sigma": "noise σx",
    "l": "ℓ (records mixed per point)",
    "T": "T (synthetic points released)",
    "target_epsilon": "ε (δ as configured)",
    "label_epsilon": "label ε",
    "pca_epsilon": "PCA ε",
    "dpsgd_epsilon": "DP-SGD ε",
    "certified_epsilon": "certified ε (smallest rigorous upper bound; δ as configured)",  # certified_axis
}


@dataclass(frozen=True)
class Launch:
    sweep_id: int
    sweep_name: str
    run_ids: tuple[int, ...]
    reused: int  # runs already done in the store: not recomputed
    location: str


def with_dataset(spec: SweepSpec, dataset: str, data_dir: str | None = None) -> SweepSpec:
    """The same sweep on another dataset (the name records it, so results never mix)."""
    if spec.base.dataset == dataset and spec.base.data_dir == data_dir:
        return spec
    base = on_dataset(spec.base, dataset, data_dir)  # public z-score constants follow the data
    if dataset == "embedded":  # 4,000 records: keep l and T meaningful, never above what exists
        base = replace(base, train_limit=None, test_limit=None)
    name = spec.name if spec.name.endswith(f"@{dataset}") else f"{spec.name}@{dataset}"
    where = f" (on {DATASET_TITLES.get(dataset, 'the embedded MNIST sample')})"  # a chart's title says the data
    title = spec.title if not spec.title or spec.title.endswith(where) else spec.title + where
    return replace(
        spec,
        name=name,
        title=title,
        base=base,
        published=spec.published_for(dataset),
        published_best=spec.published_best_for(dataset),
    )


def with_data_file(spec: SweepSpec, own: OwnData, feature_range: FeatureRange | None = None) -> SweepSpec:
    """The same sweep on one's own file (:func:`~dpmix_core.experiments.run_data.open_data_file`): a sweep of its
    own (``NAME@FILE-<sha256[:8]>``), scored on the file's held-out records, with no published numbers (those are
    the papers' datasets'). ``feature_range``: the public bounds of float features, with which every run scales
    them to [0,1] (its release and the records a baseline trains on). Whether its runs can train on the file is checked with its jobs (:func:`check_job_datasets`).
    """
    fields = {k: v for k, v in own.options.items() if k != "dataset"}
    base = on_dataset(spec.base, OWN_DATA, None, **fields, feature_range=feature_range)
    label = f"{own.dataset.name}-{own.options['data_sha256'][:8]}"
    name = spec.name if spec.name.endswith(f"@{label}") else f"{spec.name}@{label}"
    where = f" (on {own.dataset.name})"
    title = spec.title if not spec.title or spec.title.endswith(where) else spec.title + where
    return replace(
        spec, name=name, title=title, base=base, published=(), published_best=(), description=own.dataset.source
    )


def estimate_minutes(spec: SweepSpec, max_parallel: int | None = None) -> float:
    """Rough wall-clock minutes for the whole sweep on this machine's worker slots."""
    slots = max_parallel or default_max_parallel()
    return estimate_sweep_seconds(spec) / slots / 60.0


def spec_problem(
    spec: SweepSpec, limits: Limits | None = None, *, d: int = 784, k: int = 10, n: int = 60_000
) -> str | None:
    """One line saying which limit the sweep would exceed (None when it fits), checked from the spec's
    numbers before its run list is built: the run count, one release (T, l at their largest on the
    axis) and one training (epochs over T points). ``d``, ``k``, ``n``: the dataset's sizes (MNIST; one's own file:
    its own ``n`` and ``d``)."""
    limits = limits or limits_from_env()
    if spec.base.data_file is not None:  # one's own file: its sizes
        n, _, d = own_data_sizes(spec.base)
    syn = spec.base.synthesis
    values = [v for v in spec.values if isinstance(v, (int, float)) and math.isfinite(v)]
    T = int(max(values)) if spec.axis == "T" and values else (syn.T if syn is not None else n)
    l = int(max(values)) if spec.axis == "l" and values else (syn.l if syn is not None else 1)
    try:
        check_sweep_cost(max(1, len(spec.series)) * max(1, len(spec.values)) * spec.repeats, limits)
        if syn is not None:
            check_cost(mixing_cost(T=T, l=l, d=d, k=k, n=n), limits, change="T or l", job=True)
        check_training_cost(runs=1, epochs=spec.base.epochs, n=T, d=d, limits=limits)
    except LimitExceeded as exc:
        return str(exc)
    return None


def sweep_id_from_query(store: ResultStore, text: str | None) -> int | None:
    """The sweep id in a page's ``?sweep=`` (None when absent); ValueError with one line when it is
    not a number or names no sweep in ``store``."""
    if text is None or text == "":
        return None
    try:
        sweep_id = int(text)
    except ValueError:
        raise ValueError(f"?sweep={text!r} in the address is not a sweep number; pick a sweep below.") from None
    if store.get_sweep(sweep_id) is None:
        raise ValueError(f"?sweep={sweep_id} names no sweep in the results store {store.path}; pick one below.")
    return sweep_id


def unreadable_runs(store: ResultStore, sweep: int | str | StoredSweep) -> list[tuple[int, str]]:
    """(run id, reason) of the sweep's finished runs whose stored config no longer loads (e.g. written
    by an older version); :func:`sweep_rows` leaves them out so the other runs still show."""
    return list(_stored(store, sweep).unreadable)


def sweep_jobs(spec: SweepSpec) -> list[RunSpec]:
    """The sweep as (job kind, config, run key) triples for the results store."""
    return [(JOB_KIND, cfg.to_dict(), run_key(cfg)) for cfg in spec.runs()]


def cli_spec(
    text: str,
    dataset: str | None = None,
    *,
    own: OwnData | None = None,
    feature_range: FeatureRange | None = None,
) -> SweepSpec:
    """The spec ``sweep SPEC`` names (a .toml/.json spec file, or ``preset:NAME``), on ``dataset`` where given
    (:func:`with_dataset`), or on one's own file (:func:`with_data_file`)."""
    spec = get_preset(text.removeprefix("preset:")) if text.startswith("preset:") else load_spec(text)
    if own is not None:
        return with_data_file(spec, own, feature_range)
    return spec if dataset is None else with_dataset(spec, dataset)


def expand_cli_spec(
    text: str,
    *,
    repeats: int | None = None,
    values: list | tuple | None = None,
    series: list | tuple | None = None,
    seeds: list | tuple | None = None,
    dataset: str | None = None,
    own: OwnData | None = None,
    feature_range: FeatureRange | None = None,
) -> tuple[str, list[RunSpec], dict]:
    """``sweep SPEC`` on the command line: a .toml/.json spec file, or ``preset:NAME``.

    ``repeats``, ``values``, ``series`` and ``seeds`` narrow the spec to a
    piece of it (fewer seeds, some axis values, some series, some of its
    seeds): the runs keep the spec's own keys, so running the whole spec later
    reuses every run a piece finished. ``repeats`` above the spec's widens it
    (``seeds`` then picks among the wider range): the spec returned for the
    store then has those repeats, so the sweep's views show every seed that ran.
    ``dataset`` runs the same protocol on another dataset (a sweep of its own,
    ``NAME@dataset``); ``own`` on one's own file, with the public ``feature_range`` of float features.
    """
    # whether the data is here (and one's own file fits the releases): check_job_datasets, before anything is queued
    spec = cli_spec(text, dataset, own=own, feature_range=feature_range)
    if seeds:
        check_seeds(spec, seeds, repeats)
    stored = spec if repeats is None or repeats <= spec.repeats else replace(spec, repeats=repeats)
    jobs = sweep_jobs(narrow_spec(spec, repeats=repeats, values=values, series=series))
    if seeds:
        jobs = [job for job in jobs if job[1]["seed"] in seeds]
    return spec.name, jobs, stored.to_dict()


def check_job_datasets(jobs: list[RunSpec], store: ResultStore | None = None) -> None:
    """ValueError (the loader's one line) unless every dataset the runs train on is here: in DPMIX_DATA_DIR, the
    run's data_dir, the cache or a system folder, or downloaded once now. ``sweep`` calls it before queueing
    anything, so a preset on MNIST without a copy fails once, not once per run; a run on one's own file needs the
    file as it was when the run was defined, and a release the file can make. ``store``: runs done there are
    reused, not run, so their datasets are not needed (a finished sweep reports without its data)."""
    if store is not None:
        keys = [key or config_key(config) for _, config, key in jobs]
        done = {run.key for run in store.list_runs(keys=keys, status="done", results=False)}
        jobs = [job for job, key in zip(jobs, keys, strict=True) if key not in done]
    _check_own_data_jobs([config for _, config, _ in jobs if config.get("data_file")])
    wanted = {
        (str(config["dataset"]), config.get("data_dir"))
        for _, config, _ in jobs
        if config.get("dataset") and not config.get("data_file")
    }
    for name, data_dir in sorted(wanted, key=str):
        try:
            if locate_dataset(name, data_dir=data_dir) is None:  # not here: found nowhere, so fetch it once now
                load_dataset(name, data_dir=data_dir)
        except DatasetError as exc:
            raise ValueError(str(exc)) from None


def runs_the_data_can_make(jobs: list[RunSpec]) -> tuple[list[RunSpec], tuple[str, ...]]:
    """(the runs their named dataset can make, one line per reason the others cannot, with how many runs it holds).

    Each run on a dataset found on this machine is checked as ``train`` checks one: on its dataset as the run reads
    it (subsampled to its train and test limits), by :func:`~dpmix_core.experiments.run_data.check_run_on`. A
    preset's ℓ = 512 of one class on the embedded sample (400 records a class) cannot be made: it is left out with
    its reason ("“mixing”: class '0' has 400 records, fewer than l=512 (1 run)") instead of being queued to fail.
    Runs on one's own file are refused by :func:`check_job_datasets` instead (the file is the user's: its problems
    are errors), and so is a dataset not here (its one line). ValueError (one line): a dataset here that does not
    load.
    """
    from dpmix_core.training.data import subsample

    datasets: dict[tuple, Dataset | None] = {}
    kept: list[RunSpec] = []
    reasons: Counter[tuple[str, str]] = Counter()
    for job in jobs:
        config = job[1]
        if config.get("data_file") or config.get("release_file") or not config.get("dataset"):
            kept.append(job)
            continue
        run = RunConfig.from_dict(dict(config))
        where = (run.dataset, run.data_dir, run.train_limit, run.test_limit)
        if where not in datasets:
            try:
                here = locate_dataset(run.dataset, data_dir=run.data_dir) is not None
                ds = load_dataset(run.dataset, data_dir=run.data_dir) if here else None
            except DatasetError as exc:
                raise ValueError(str(exc)) from None
            limits = {"train_limit": run.train_limit, "test_limit": run.test_limit}
            datasets[where] = None if ds is None else subsample(ds, **limits)
        if (ds := datasets[where]) is not None:
            try:
                check_run_on(run, ds)
            except ValueError as exc:
                reasons[(run.label or run.method, str(exc))] += 1
                continue
        kept.append(job)
    lines = tuple(f"“{label}”: {why} ({n} run{'s' if n > 1 else ''})" for (label, why), n in reasons.items())
    return kept, lines


def _check_own_data_jobs(configs: list[Mapping[str, Any]]) -> None:
    """ValueError (one line) unless every run on one's own file can read it (its bytes as when the run was defined)
    and train on it (:func:`~dpmix_core.experiments.run_data.check_run_on`)."""
    checked: dict[tuple, Dataset] = {}
    for config in configs:
        run = RunConfig.from_dict(dict(config))
        where = (run.data_file, run.data_sha256, run.label_column, run.test_fraction)
        if where not in checked:
            checked[where] = load_run_dataset(run)
        if (problem := image_model_problem(run, checked[where])) is not None:  # a spec's runs keep their model
            raise ValueError(
                f"{problem}, and a spec's runs keep their model and its protocol. On a table: the Train & trade-offs "
                "page's custom sweep (each model with its own-data protocol), or sweep preset:dp-pca-quick; or "
                f'--save-spec FILE.json, then set "model" to "linear" where it says {run.model!r} (with lr, epochs '
                "and batch_size for your records' count) and run sweep FILE.json."
            )
        check_run_on(run, checked[where])


def check_seeds(spec: SweepSpec, seeds: list | tuple, repeats: int | None = None) -> None:
    """ValueError unless every one of ``seeds`` is a seed of the spec (of ``repeats`` repeats, when given)."""
    first = spec.base.seed
    count = repeats if repeats is not None else spec.repeats
    outside = sorted({s for s in seeds if not first <= s < first + count})
    if outside:
        where = f"--repeats {repeats}" if repeats is not None else f"{spec.name!r}"
        hint = f"; --repeats {max(outside) - first + 1} widens it" if max(outside) >= first + count else ""
        raise ValueError(f"seeds {outside} are not among the seeds of {where} ({first}..{first + count - 1}){hint}.")


def narrow_spec(
    spec: SweepSpec,
    *,
    repeats: int | None = None,
    values: list | tuple | None = None,
    series: list | tuple | None = None,
) -> SweepSpec:
    """The spec with other repeats and/or a subset of its axis values and series (ValueError for one not in it)."""
    if values:
        unknown = [v for v in values if not any(_same(v, w) for w in spec.values)]
        if unknown:
            raise ValueError(
                f"values {unknown} are not on the {spec.axis} axis of {spec.name!r} "
                f"({', '.join(str(v) for v in spec.values)})."
            )
        kept = tuple(w for w in spec.values if any(_same(v, w) for v in values))
        spec = replace(  # the paper's numbers at the values it runs (a reference point stays: it is no verdict)
            spec,
            values=kept,
            published=tuple(p for p in spec.published if p.reference or any(_same(p.value, w) for w in kept)),
        )
    if series:
        unknown = [name for name in series if name not in spec.series_names]
        if unknown:
            raise ValueError(f"series {unknown} are not in {spec.name!r} (its series: {'; '.join(spec.series_names)}).")
        if spec.series:  # a spec without series runs its one implicit series: nothing to narrow
            spec = replace(
                spec,
                series=tuple(s for s in spec.series if s.name in series),
                published=tuple(p for p in spec.published if p.reference or p.series in series),
                published_best=tuple(b for b in spec.published_best if b.series in series),
            )
    if repeats is not None:
        spec = replace(spec, repeats=repeats)
    return spec


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def launch_sweep(spec: SweepSpec, store: ResultStore, *, max_parallel: int | None = None) -> Launch:
    """Queue every run of the sweep that its data can make (done ones are reused; the page names the others before
    launch, :func:`runs_the_data_can_make`) and start workers up to the limit. ValueError (one line): the data can
    make none of them."""
    runs, left_out = runs_the_data_can_make(sweep_jobs(spec))
    if not runs:
        raise ValueError(f"this data can make none of the sweep's runs: {left_out[0]}")
    backend = LocalProcessBackend(store, max_parallel=max_parallel)
    sweep, submitted = submit_sweep(store, spec.name, runs, backend=backend, spec=spec.to_dict())
    backend.pump()
    reused = sum(1 for run, outcome in submitted if outcome == "existing" and run.status == "done")
    return Launch(sweep.id, sweep.name, tuple(run.id for run, _ in submitted), reused, backend.describe())


def sweep_choices(store: ResultStore) -> dict[int, str]:
    """{sweep id: its label in a picker}, oldest first: name, id and where it ran ("dpfmix-table1 (#3, local @ vm)").

    The labels do not change while a sweep runs: Streamlit (1.67) keeps showing a keyed picker's first label for its
    chosen value, so what is still active is told apart by :func:`sweep_activity`, beside the picker."""
    out = {}
    for sw in store.list_sweeps():
        where = f"{sw.backend}{' @ ' + sw.location if sw.location else ''}"
        out[sw.id] = f"{sw.name} (#{sw.id}, {where})"
    return out


def sweep_activity(store: ResultStore, chosen: int | None = None) -> str | None:
    """The sweeps with runs queued or running, in one line ("Still in progress: this sweep: 2 running, 4 queued;
    dpfmix-table1 (#3, local @ vm): 1 queued."); None when nothing is. ``chosen`` is called "this sweep"."""
    names = sweep_choices(store)
    busy = []
    for sweep_id, now in sorted(store.active_counts().items()):
        counts = ", ".join(f"{now[s]} {s}" for s in ("running", "queued") if now.get(s))
        name = "this sweep" if sweep_id == chosen else names.get(sweep_id, f"sweep #{sweep_id}")
        busy.append(f"{name}: {counts}")
    return f"Still in progress: {'; '.join(busy)}." if busy else None


def default_sweep(store: ResultStore) -> int | None:
    """The sweep a fresh session shows: the newest one with a finished run (not a cancelled, empty one)."""
    sweeps = store.list_sweeps()
    for sweep in reversed(sweeps):
        if store.counts(sweep=sweep.id).get("done", 0):
            return sweep.id
    return sweeps[-1].id if sweeps else None


def pump_local(store: ResultStore, max_parallel: int | None = None, *, start: bool = True) -> None:
    """One scheduling step of this machine's workers: notice finished or dead runs and (``start``) start queued
    ones; ``start=False`` for a page that watches runs someone else launched."""
    LocalProcessBackend(store, max_parallel=max_parallel).pump(start=start)


RESUMED = ("queued", *DEFAULT_RETRY)  # what a re-run of `sweep` runs again (interrupted runs from their checkpoint)


def waiting_without_worker(store: ResultStore, run_ids: list[int] | tuple[int, ...]) -> dict[str, int]:
    """``{status: count}`` of ``run_ids`` that a re-run would run (queued, interrupted) while none of them runs:
    their launcher stopped (Ctrl-C on ``sweep``, a stopped app server), so nothing takes them until someone resumes
    them. Empty while one runs or none waits."""
    counts = store.counts(run_ids=run_ids)
    return {} if counts["running"] else {status: counts[status] for status in RESUMED if counts[status]}


def resume_runs(store: ResultStore, run_ids: list[int] | tuple[int, ...], max_parallel: int | None = None) -> None:
    """What a re-run of the sweep does for ``run_ids``: interrupted runs queued again (each continues from its
    checkpoint), then this machine's workers started for the queued ones."""
    stopped = store.list_runs(ids=run_ids, status=DEFAULT_RETRY)
    store.submit_many([(run.kind, run.config, run.key) for run in stopped], requeue=DEFAULT_RETRY)
    pump_local(store, max_parallel=max_parallel)


def cancel_runs(store: ResultStore, run_ids: list[int] | tuple[int, ...]) -> int:
    """Ask every queued or running run among ``run_ids`` to stop; returns how many were asked."""
    backend = LocalProcessBackend(store)
    active = store.list_runs(ids=run_ids, status=("queued", "running"))
    for run in active:
        backend.cancel(run.id)
    return len(active)


def run_table(
    store: ResultStore,
    run_ids: list[int] | tuple[int, ...],
    *,
    axis: str | None = None,
    settled: Mapping[int, SettledCells] | None = None,
) -> pd.DataFrame:
    """One row per run: what it is, where it stands, its error if any, and why it collapsed if it did.

    With the sweep's ``axis``, a column after "series" gives each run's value on it (runs of one series differ
    by it: ℓ = 32 and ℓ = 128 of "eps = 2" would otherwise be two identical rows); empty where it does not apply.
    ``settled``: :func:`settled_cells` of these runs on the same axis, kept by a caller that refreshes the table
    while runs train, so a refresh parses no result and validates no config. A run missing from it shows no
    position, and a run done since it was read no accuracy or note, until the caller reads it again.
    """
    settled = settled_cells(store, run_ids, axis=axis) if settled is None else settled
    rows = []
    for run in store.list_runs(ids=run_ids, results=False):
        cfg, prog = run.config, run.progress or {}
        syn = cfg.get("synthesis") or {}
        epoch, epochs = prog.get("epoch"), prog.get("epochs")
        cells = settled.get(run.id, SettledCells(None, None, ""))
        note = (
            cells.note
            if run.status == "done"
            else _run_note({}, saved_epoch=_saved_epoch(store, run), status=run.status)
        )
        rows.append(
            {
                "run": run.id,
                "series": cfg.get("label") or cfg.get("method"),
                **({} if axis is None else {axis_column(axis): cells.position}),
                "mechanism": syn.get("mechanism", ""),
                "seed": cfg.get("seed"),
                "status": run.status,
                "progress": (epoch / epochs)
                if epoch is not None and epochs
                else (1.0 if run.status == "done" else 0.0),
                "phase": prog.get("phase", ""),
                "loss": prog.get("loss"),
                "val accuracy": prog.get("val_accuracy"),  # the release's own validation split, while it trains
                "test accuracy": cells.test_accuracy,  # the real test split, once done
                "eta (s)": prog.get("eta_seconds") if run.status == "running" else None,
                "where": ((prog.get("ray") or {}).get("node") and f"ray node {prog['ray']['node']}")
                or (f"{run.backend} @ {run.host}" if run.host else run.backend),
                "error": run.error_summary or "",
                "note": note,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class SettledCells:
    """What :func:`run_table` shows of a run that cannot change while it trains: its value on the sweep's axis
    and, once it is done, its test accuracy and note (None and "" before)."""

    position: float | None
    test_accuracy: float | None
    note: str


def settled_cells(
    store: ResultStore, run_ids: list[int] | tuple[int, ...], *, axis: str | None = None
) -> dict[int, SettledCells]:
    """:class:`SettledCells` of each of ``run_ids``: the part of :func:`run_table` that parses results (a
    200-epoch history each) and validates configs. It changes only when a run finishes, so a page keeps it under
    :meth:`ResultStore.results_version` and passes it to every refresh."""
    return {
        run.id: SettledCells(
            None if axis is None else _axis_value_or_none(run.config, axis),
            (run.result or {}).get("test_accuracy"),
            _run_note(run.result) if run.result is not None else "",
        )
        for run in store.list_runs(ids=run_ids)
    }


def axis_column(axis: str) -> str:
    """The short column name of a sweep axis in a run table: "ℓ", "T", "ε", "noise σx", "label ε", ..."""
    return AXIS_TITLES.get(axis, axis).split(" (")[0]


def _axis_value_or_none(config: dict, axis: str) -> float | None:
    """A stored run's value on ``axis``; None where the axis does not apply or the config no longer loads."""
    try:
        return axis_value(config, axis)
    except (ValueError, TypeError, KeyError):
        return None


def sweep_axis(store: ResultStore, sweep: int | str | StoredSweep) -> str | None:
    """The axis of a stored sweep's current spec (None when it has no loadable spec or no such sweep)."""
    spec = sweep_spec(store, sweep)
    return None if spec is None else spec.axis


def _saved_epoch(store: ResultStore, run: Run) -> int | None:
    """For a run that stopped before its result (failed, cancelled, interrupted) and kept its training
    checkpoint: the last epoch it reported (the checkpoint is at most one epoch and a minute behind)."""
    if run.status not in RETRYABLE_STATUSES or not store.checkpoint_path(run.id).is_file():
        return None
    return int((run.progress or {}).get("epoch") or 0)


def _run_note(result: dict, *, saved_epoch: int | None = None, status: str = "done") -> str:
    """Why a run collapsed, in a sentence; else the BatchNorm shift note when it applies; else that it was
    continued from a checkpoint (its `seconds` cover the last worker only); for a run that stopped with a
    checkpoint kept, how to continue it; else ""."""
    if result.get("collapse_reason"):
        return result["collapse_reason"]
    shift = shift_note(result.get("test_accuracy"), result.get("test_accuracy_bn_recalibrated"), collapsed=False)
    if shift:
        return shift
    if result.get("resumed_from_epoch"):
        return f"continued from a checkpoint after epoch {result['resumed_from_epoch']} (an earlier worker ran those)"
    if saved_epoch is not None:
        how = "launch the sweep again" if status == "interrupted" else "run `sweep … --retry-failed`"
        near = f" near epoch {saved_epoch}" if saved_epoch else ""
        return f"training state saved{near}: {how} to continue from it"
    return ""


def stored_spec(stored) -> SweepSpec | None:
    """The spec a stored sweep was last run with (None when it has none or it no longer loads)."""
    if not stored.spec:
        return None
    try:
        return load_spec(stored.spec)
    except ValueError:
        return None


@dataclass(frozen=True)
class StoredSweep:
    """One read of a stored sweep, which every view of it shares (the page caches it under
    :meth:`ResultStore.results_version`): its id and name, its current spec (None when it has none or it no
    longer loads), the ids of its runs under that spec (every run when it has none: what its progress table
    shows), its finished runs as :func:`sweep_rows` gives them, and the finished runs that no longer load.
    Treat ``rows`` as read-only: a cached snapshot is shared."""

    id: int
    name: str
    spec: SweepSpec | None
    run_ids: tuple[int, ...]
    rows: tuple[dict, ...]
    unreadable: tuple[tuple[int, str], ...]


def read_stored_sweep(store: ResultStore, sweep: int | str) -> StoredSweep:
    """The sweep's :class:`StoredSweep` from one read of its runs (ValueError: no such sweep).

    Only the runs of the sweep's current spec count: when a spec (or preset) changes, runs linked to the
    sweep under its earlier version are left out (they stay in the store). A reused run keeps the series name
    of *this* sweep (``config["label"]``).
    """
    stored = store.get_sweep(sweep)
    if stored is None:
        raise ValueError(f"No sweep {sweep!r} in the results store.")
    spec = stored_spec(stored)
    labels = {run_key(cfg): cfg.label for cfg in spec.runs()} if spec is not None else {}
    runs = store.list_runs(sweep=stored.id)
    rows, unreadable = [], []
    for row in (run.result_row() for run in runs if run.status == "done"):
        shown = not labels or row["key"] in labels
        if shown:
            row["config"] = {**row["config"], "label": labels.get(row["key"], row["config"].get("label"))}
        try:  # once here, not in each view (results.row_config)
            row["run_config"] = RunConfig.from_dict(row["config"])
        except (ValueError, TypeError, KeyError) as exc:
            unreadable.append((row["id"], " ".join(str(exc).split())))
            continue
        if shown:
            rows.append(row)
    run_ids = tuple(run.id for run in runs if not labels or run.key in labels)
    return StoredSweep(stored.id, stored.name, spec, run_ids, tuple(rows), tuple(unreadable))


def _stored(store: ResultStore, sweep: int | str | StoredSweep) -> StoredSweep:
    """``sweep`` itself when it is a read already, else one read of it."""
    return sweep if isinstance(sweep, StoredSweep) else read_stored_sweep(store, sweep)


def sweep_run_ids(store: ResultStore, sweep: int | str | StoredSweep) -> list[int]:
    """The ids of a stored sweep's runs under its current spec (every run when it has none): what its progress
    table shows. Runs linked to the sweep under an earlier version of its spec stay in the store, unlisted."""
    return list(_stored(store, sweep).run_ids)


def sweep_rows(store: ResultStore, sweep: int | str | StoredSweep) -> list[dict]:
    """The finished runs of a stored sweep (:func:`read_stored_sweep`), each ``config["label"]`` set to its series
    name in *this* sweep."""
    return list(_stored(store, sweep).rows)


def sweep_test_rows(store: ResultStore, sweep: int | str | StoredSweep) -> str:
    """The test rows a stored sweep's spec reports ("all", or "even" / "odd" when the other half gave the
    release's public constants); "all" for a sweep without a loadable spec."""
    spec = sweep_spec(store, sweep)
    return "all" if spec is None else spec.test_rows


# how each test loader (RunConfig.test_inputs) reads, for a title or a control
TEST_INPUTS_TITLES = {
    "release": "through the release's map, its clip included",
    "unclipped": "z-scored as the release's records, not clipped",
    "release-scale": "z-scored and clipped, then scaled to the released points' median norm",
}


def _own_test_inputs(spec: SweepSpec | None) -> str:
    """The test loader a sweep's spec reads through ("release" without a spec)."""
    return "release" if spec is None else spec.base.test_inputs


def sweep_test_inputs(store: ResultStore, sweep: int | str | StoredSweep) -> tuple[str, tuple[str, ...]]:
    """(the test loader a stored sweep's spec reads through, every loader its finished runs can be read through, in
    ``TEST_INPUTS`` order): a clipped class-centric z-score release's runs record the same trained model through
    each (the runner's ``test_accuracy_by_inputs``); ("release", ("release",)) for a sweep without a spec."""
    stored = _stored(store, sweep)
    own = _own_test_inputs(stored.spec)
    seen = {own}
    for row in stored.rows:
        seen.update((row.get("result") or {}).get("test_accuracy_by_inputs") or {})
    return own, tuple(name for name in TEST_INPUTS if name in seen)


def sweep_results(
    store: ResultStore, sweep: int | str | StoredSweep, *, test_rows: str | None = None, test_inputs: str | None = None
) -> tuple[pd.DataFrame, str | None, str]:
    """(aggregated results, axis, title) of a stored sweep (see :func:`sweep_rows`): loads instantly.

    ``test_rows``: the accuracy on every test row or on one half (results.TEST_ROWS); None: the rows its spec
    reports (:func:`sweep_test_rows`). ``test_inputs``: the test loader (``TEST_INPUTS``) the trained models are
    read through; None: each run's own (:func:`results.reading`; runs without that reading are left out). The
    title names a half, and a loader other than the spec's.
    """
    stored = _stored(store, sweep)
    spec = stored.spec
    axis, title = (spec.axis, spec.title or spec.name) if spec is not None else (None, stored.name)
    rows_read = (spec.test_rows if spec is not None else "all") if test_rows is None else test_rows
    if rows_read != "all":
        title = f"{title} (accuracy on the {rows_read} test rows)"
    if test_inputs is not None and test_inputs != _own_test_inputs(spec):
        title = f"{title} (the same models read with test images {TEST_INPUTS_TITLES.get(test_inputs, test_inputs)})"
    return aggregate(list(stored.rows), axis=axis, test_rows=rows_read, test_inputs=test_inputs), axis, title


def runs_left_out(store: ResultStore, sweep: int | str | StoredSweep, agg: pd.DataFrame) -> int:
    """Finished runs of a stored sweep that its aggregate ``agg`` (:func:`sweep_results`) leaves out: those with no
    reading on the chosen test rows or test images (stored before runs recorded one)."""
    return max(0, len(_stored(store, sweep).rows) - int(runs_per_point(agg).sum()))


REPRODUCED_WITHIN_PTS = 3.0  # issue 5: a miss of more than 3 points is investigated


def sweep_spec(store: ResultStore, sweep: int | str | StoredSweep, *, must_exist: bool = False) -> SweepSpec | None:
    """A stored sweep's current spec, without reading its runs: None when it has no spec that loads, or when there
    is no such sweep (``must_exist``: ValueError then)."""
    if isinstance(sweep, StoredSweep):
        return sweep.spec
    stored = store.get_sweep(sweep)
    if stored is None and must_exist:
        raise ValueError(f"No sweep {sweep!r} in the results store.")
    return None if stored is None else stored_spec(stored)


def sweep_published(store: ResultStore, sweep: int | str | StoredSweep) -> tuple[Published, ...]:
    """The paper's numbers stored with the sweep's spec for the sweep's dataset (empty for sweeps without any)."""
    spec = sweep_spec(store, sweep)
    return () if spec is None else spec.published_for(spec.base.dataset)


def sweep_comparison(store: ResultStore, sweep: int | str | StoredSweep, agg: pd.DataFrame) -> pd.DataFrame:
    """:func:`published_comparison` of a stored sweep's aggregate ``agg`` with the paper's numbers stored with it, at
    the axis values its spec runs (and any other value it has results at)."""
    spec = sweep_spec(store, sweep)
    if spec is None:
        return published_comparison(agg, (), None)
    return published_comparison(agg, spec.published_for(spec.base.dataset), spec.values)


def reproduction_verdict(gap: float | None) -> str:
    """How ours reads against the paper's number, ``gap`` = ours − published in points (None: nothing of ours yet):
    "reproduced" within REPRODUCED_WITHIN_PTS, "not reproduced" further below, "above the paper" further above (a
    better number is not a miss, but it is not the paper's either), "pending" without a gap."""
    if gap is None:
        return "pending"
    if abs(gap) <= REPRODUCED_WITHIN_PTS:
        return "reproduced"
    return "above the paper" if gap > 0 else "not reproduced"


def sweep_best_axis(
    store: ResultStore, sweep: int | str | StoredSweep, *, test_inputs: str | None = None
) -> tuple[AxisPick, ...]:
    """:func:`~dpmix_core.experiments.best_axis.best_axis_values` of a stored sweep along its axis, with the paper's
    best-value numbers stored with its spec (empty when its axis is not one a data holder tunes)."""
    spec = sweep_spec(store, sweep)
    if spec is None:
        return ()
    published = spec.published_best_for(spec.base.dataset)
    return best_axis_values(sweep_rows(store, sweep), spec.axis, test_inputs=test_inputs, published=published)


def best_axis_table(picks: tuple[AxisPick, ...]) -> pd.DataFrame:
    """One row per series of :func:`sweep_best_axis` (accuracies in %, rounded for a table), with the paper's best
    value and a verdict (:func:`reproduction_verdict`) where the spec carries one."""
    rows = []
    for p in picks:
        axis = axis_column(p.axis)
        rows.append(
            {
                "series": p.series,
                f"{axis} chosen (even rows)": None if p.chosen is None else _plain(p.chosen),
                "ours, odd rows (%)": _percent(p.accuracy),
                "± std": _percent(p.std),
                "seeds": p.runs,
                "published best (%)": None if p.published is None else _percent(p.published.accuracy),
                "gap (pts)": None if p.gap is None else round(p.gap, 2),
                "verdict": "every value collapsed (no result)"
                if p.collapsed
                else ("" if p.published is None else reproduction_verdict(p.gap)),
                # a bound is rounded up (3 significant digits), never below what the accountant computed
                "certified ε of the chosen release": None if p.epsilon is None else float(bound_text(p.epsilon)),
                "accountant": p.accountant,
                f"best {axis} on all rows (test-set search)": None if p.tuned is None else _plain(p.tuned),
                "its accuracy, all rows (%)": _percent(p.tuned_accuracy),
                f"{axis} values compared": p.values_compared,
            }
        )
    table = pd.DataFrame(rows)
    if not any(p.published is not None for p in picks):  # no paper number to compare with: no empty columns
        table = table.drop(columns=["published best (%)", "gap (pts)"])
        if not any(p.collapsed for p in picks):
            table = table.drop(columns=["verdict"])
    return table


def _percent(value: float | None) -> float | None:
    """A fraction as a table's percentage (2 decimals)."""
    return None if value is None else round(100 * value, 2)


def _plain(value: float) -> int | float:
    """An axis value as a table shows it: 64, not 64.0."""
    return int(value) if float(value).is_integer() else value


def published_comparison(
    agg: pd.DataFrame, published: tuple[Published, ...], axis_values: tuple | list | None = None
) -> pd.DataFrame:
    """One row per published point: the paper's accuracy, ours (mean ± std over n seeds), the gap and a verdict.

    ``axis_values`` (the values the sweep runs): a published point at another value, where ``agg`` has no result
    either, gets no row: the sweep will never run it, so it is not "pending" (a spec for l = 1 and 2 that carries the
    paper's whole row; the chart still draws it as a reference). None: every point gets a row.

    Verdict: "reproduced" within REPRODUCED_WITHIN_PTS points, "not reproduced" further below, "above the
    paper" further above (a better number is not a miss, but it is not the paper's either), "pending" while
    no run of that point has finished, "collapsed (no result)" when every run of it stayed at the constant
    predictor: its accuracy is then no result and is not compared (issue #13 §3). "collapsed runs" counts the
    point's runs that collapsed: where some did, "ours" is the mean of the others (a survivor's number, so the
    count stands beside it).
    """
    dead = all_collapsed(agg)
    rows = []
    for p in published:
        if p.reference:  # another method's published number: shown on the chart, no verdict
            continue
        match = agg[(agg["label"] == p.series) & agg["axis_value"].map(lambda v, p=p: _same(v, p.value))]
        if axis_values is not None and not len(match) and not any(_same(p.value, v) for v in axis_values):
            continue  # a value this sweep does not run: no verdict to wait for
        ours = match.iloc[0] if len(match) else None
        n = int(ours["test_accuracy_count"]) if ours is not None else 0
        lost = int(ours["collapsed"]) if ours is not None and "collapsed" in ours and pd.notna(ours["collapsed"]) else 0
        collapsed = bool(dead[match.index[0]]) if len(match) else False
        mean = 100 * float(ours["test_accuracy_mean"]) if ours is not None and n and not collapsed else None
        std = 100 * float(ours["test_accuracy_std"]) if ours is not None and mean is not None and n > 1 else None
        gap = None if mean is None else mean - 100 * p.accuracy
        verdict = "collapsed (no result)" if collapsed else reproduction_verdict(gap)
        rows.append(
            {
                "series": p.series,
                "axis value": p.value,
                "published (%)": round(100 * p.accuracy, 2),
                "ours (%)": None if mean is None else round(mean, 2),
                "± std": None if std is None else round(std, 2),
                "seeds": n,
                "collapsed runs": lost,
                "gap (pts)": None if gap is None else round(gap, 2),
                "verdict": verdict,
                "source": p.source,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "series",
            "axis value",
            "published (%)",
            "ours (%)",
            "± std",
            "seeds",
            "collapsed runs",
            "gap (pts)",
            "verdict",
            "source",
        ],
    )


def custom_spec(
    *,
    mechanisms: tuple[str, ...],
    axis: str,
    values: tuple[float, ...],
    repeats: int,
    model: str,
    loss: str,
    epochs: int,
    l: int,
    T: int,
    sigma: float,
    accountant: str,
    delta: float,
    dataset: str,
    baselines: tuple[str, ...] = (),
    train_limit: int | None = None,
    records: str = "unit",
    zscore_constants_file: str | None = None,
    own: OwnData | None = None,
    feature_range: FeatureRange | None = None,
    range_epsilon: float | None = None,
) -> SweepSpec:
    """A sweep built from the page's controls: one series per mechanism, plus baselines on the same model.

    ``accountant`` calibrates the target-epsilon axis: :data:`AUTO_ACCOUNTANT` gives each mechanism the tightest
    rigorous accountant of its sampling scheme (pld-poisson for poisson, rdp-wor for the others); a named one must
    cover every mechanism's release on that axis (ValueError with one line otherwise, before any run is queued).
    A ScatterNet model (scatter-linear, scatter-cnn) makes it a feature release: every record's ScatterNet
    features are normalised, clipped and mixed (DPFMix App. E.2), which the Poisson mechanism supports.
    corrected-lsq is fitted in closed form on pixel releases (its epochs are unused) and has no DP-SGD baseline.
    ``records`` are the class-centric series' (:data:`CLASS_CENTRIC_RECORDS`; the other mechanisms keep theirs):
    "unit" ([0,1] pixels, the thesis), "zscore" (DP-CDA: z-scored with the dataset's documented public mean and std,
    clipped to ||x|| <= 1) or "zscore-test-even" (z-scored per pixel with ``zscore_constants_file``, the constants of
    the test split's even rows, public_constants.test_split_constants_file; the sweep is then read on the odd rows,
    which never touched them).
    ``own``: one's own file (:func:`~dpmix_core.experiments.run_data.open_data_file`) instead of ``dataset``: its
    held-out records are the test split, the linear model takes its own-data protocol, and every run is checked on
    the file before any is queued (:func:`~dpmix_core.experiments.run_data.check_run_on`: the model suits it, each ℓ
    fits its records or classes, float features have their public ``feature_range`` where a release scales to [0,1]).
    ``range_epsilon``: every release narrows those bounds privately at this epsilon (the ranges are published with
    its points, and each run's epsilon covers both; :mod:`dpmix_core.synthesis.private_ranges`).
    """
    if not mechanisms:
        raise ValueError("Pick at least one mechanism.")
    if own is not None and records != "unit":
        raise ValueError(
            "z-scoring your file's records needs public constants the app does not have: keep [0,1] records "
            "(the features' public bounds), or use synthesize --zscore-constants in the CLI."
        )
    _check_class_centric_records(mechanisms, dataset, records, zscore_constants_file)
    preprocessing = "unit" if records == "unit" else "zscore"
    test_rows = "odd" if records == "zscore-test-even" else "all"
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.spec import Series
    from dpmix_core.synthesis.pipeline import SynthesisConfig
    from dpmix_core.training.names import CLOSED_FORM_MODELS, SCATTER_MODELS
    from dpmix_core.training.protocols import DPSGD_OWN_DATA_NORM

    features = "scattering" if model in SCATTER_MODELS else "pixels"
    if features == "scattering" and set(mechanisms) != {"poisson"}:
        raise ValueError(
            f"model {model!r} trains on released ScatterNet features, which only the poisson mechanism releases "
            "here: pick poisson alone, or a pixel model."
        )
    accountants = {m: _calibrating_accountant(m, accountant, axis) for m in mechanisms}
    synthesis = SynthesisConfig(
        mechanisms[0],
        l=l,
        T=T,
        sigma_x=sigma,
        accountant=accountants[mechanisms[0]],
        delta=delta,
        features=features,
        feature_range=feature_range,
        range_epsilon=range_epsilon,
        exact_features=() if own is None else own.exact_features,
    )
    data: dict = {"dataset": dataset}
    if own is not None:
        from dpmix_core.training.protocols import protocol_options

        data = {**own.options, **protocol_options(model, own_data=True)}
    base = RunConfig(
        "mixing",
        features=features,
        synthesis=synthesis,
        model=model,
        epochs=epochs,
        train_limit=train_limit,
        dpsgd_delta=delta,
        **{**data, "loss": loss},
    )
    class_centric = {"synthesis.preprocessing": preprocessing, "synthesis.zscore_constants_file": zscore_constants_file}
    series = [
        Series(
            m,
            {
                "synthesis.mechanism": m,
                "synthesis.accountant": accountants[m],
                **(class_centric if m == "class-centric" and records != "unit" else {}),
            },
        )
        for m in mechanisms
    ]
    if "non-private" in baselines:
        series.append(Series("non-private", {"method": "non-private", "synthesis": None}))
    if "dp-sgd" in baselines:
        if model in CLOSED_FORM_MODELS:
            raise ValueError(
                f"model {model!r} is fitted in closed form; DP-SGD trains by gradient steps: compare on 'linear'."
            )
        if axis != "target_epsilon":
            raise ValueError("DP-SGD is compared at equal epsilon: use the target ε axis.")
        # DP-SGD reads no statistic of its records outside its epsilon: on one's file, their ranges released privately
        norm = "none" if own is None else DPSGD_OWN_DATA_NORM
        series.append(Series("DP-SGD (Opacus)", {"method": "dp-sgd", "synthesis": None, "input_norm": norm}))
    # a sweep's name is its runs and reading; the defaults add nothing, so sweeps named before keep their names
    records_id = "" if records == "unit" else f"|{records}|{zscore_constants_file}"
    ident = hashlib.sha256(
        f"{run_key(base)}|{axis}|{values}|{repeats}|{mechanisms}|{baselines}{records_id}".encode()
    ).hexdigest()[:10]
    spec = SweepSpec(
        name=f"custom-{axis}-{ident}",
        base=base,
        axis=axis,
        values=tuple(values),
        series=tuple(series),
        repeats=repeats,
        title=f"Custom sweep over {AXIS_TITLES.get(axis, axis)} ({', '.join(mechanisms)})"
        + ("" if own is None else f" on {own.dataset.name}"),
        description="" if own is None else own.dataset.source,
        test_rows=test_rows,
    )
    if own is not None:  # next to the controls, before any run is queued (one seed: the data's limits are the same)
        for run in replace(spec, repeats=1).runs():
            check_run_on(run, own.dataset)
    return spec


CLASS_CENTRIC_RECORDS = ("unit", "zscore", "zscore-test-even")  # what a custom sweep's class-centric series mix


def _check_class_centric_records(
    mechanisms: tuple[str, ...], dataset: str, records: str, zscore_constants_file: str | None
) -> None:
    """ValueError (one line) unless the class-centric records can be made as asked, before any run is queued."""
    if records not in CLASS_CENTRIC_RECORDS:
        raise ValueError(f"class-centric records are one of {', '.join(CLASS_CENTRIC_RECORDS)}. Found {records!r}.")
    if records != "unit" and "class-centric" not in mechanisms:
        raise ValueError("z-scored records are DP-CDA's class-centric mixing: add class-centric, or keep [0,1] pixels.")
    if (zscore_constants_file is not None) != (records == "zscore-test-even"):
        raise ValueError("per-pixel records ('zscore-test-even') need the test split's constants file, and only they.")
    if records == "zscore" and public_zscore_constants(dataset) is None:
        raise ValueError(
            f"{dataset!r} has no documented public z-score constants: take per-pixel constants from its test split, "
            "or keep [0,1] pixels."
        )


def _calibrating_accountant(mechanism: str, accountant: str, axis: str) -> str:
    """The accountant of ``mechanism``'s series: the tightest rigorous one of its sampling for AUTO_ACCOUNTANT, else
    ``accountant``, which must cover the release where it calibrates (the target-epsilon axis)."""
    from dpmix_core.synthesis.pipeline import calibration_accountants, calibration_refusal

    if accountant == AUTO_ACCOUNTANT:
        return calibration_accountants(mechanism)[0]
    if axis == "target_epsilon" and (refusal := calibration_refusal(mechanism, accountant)) is not None:
        raise ValueError(f"{refusal} Or '{AUTO_ACCOUNTANT}': the tightest rigorous bound of each mechanism.")
    return accountant


def release_model_choices(release: ReleaseFile) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the models that can train on this release, a sensible default pair): feature models for a feature release."""
    from dpmix_core.training.names import FEATURE_MODELS, MODELS, SCATTER_MODELS

    if release_synthesis(release.card, where=f"the card of {release.path!r}").features != "pixels":
        return FEATURE_MODELS, ("scatter-linear", "corrected-lsq")
    return tuple(m for m in MODELS if m not in SCATTER_MODELS), ("linear", "corrected-lsq")


def release_file_spec(
    release: ReleaseFile,
    *,
    models: tuple[str, ...],
    epochs: int,
    repeats: int,
    display_name: str | None = None,
    available: Collection[str] | None = None,
    description: str | None = None,
    own: OwnData | None = None,
) -> SweepSpec:
    """Several models trained on one release file: a series per model, each on its paper's protocol.

    The axis is T with the release's own value (a release file has one setting; the series are the
    comparison). ``epochs`` applies to gradient-trained models; closed-form ones are fitted once.
    ``display_name``: the file's name for the title (an upload is stored under its hash). ``available``: the
    datasets this machine has (:func:`dpmix_core.data.choice.available_datasets`); a release of another one is refused here,
    before its runs would fail in the background. ``description``: the sweep's (default: the file and its hash;
    the page passes :func:`dpmix_core.views.release_card.release_summary`). ``own``: the data file a release of
    one's own records was made from, split as its card says (:func:`~dpmix_core.experiments.release_files.
    held_out_upload`): the models are scored on its held-out records, and each must suit that data
    (:func:`~dpmix_core.experiments.run_data.check_run_on`).
    """
    if not models:
        raise ValueError("Pick at least one model.")
    dataset = release.card["dataset"].get("name")
    if available is not None and dataset in DATASET_NAMES and dataset not in available:
        raise ValueError(
            f"the release is of {dataset!r}, whose test split is not on this machine: put it in DPMIX_DATA_DIR "
            "and restart the app, or use `train --release FILE --data-dir DIR`."
        )
    from dpmix_core.experiments.spec import Series
    from dpmix_core.training.protocols import protocol_options

    options = release_run_options(release, own)
    syn = options["synthesis"]
    base = RunConfig("mixing", model=models[0], epochs=epochs, **options)
    on_file = own is not None
    series = tuple(
        Series(model, {**protocol_options(model, mechanism=syn.mechanism, own_data=on_file), "model": model})
        for model in models
    )
    if own is not None:
        for model in models:
            check_run_on(base.replace(model=model), own.dataset)
    data = "" if own is None else f"|{own.options['data_sha256']}"
    ident = hashlib.sha256(f"{release.sha256}|{models}|{epochs}|{repeats}{data}".encode()).hexdigest()[:10]
    name = display_name or Path(release.path).name
    return SweepSpec(
        name=f"release-{release.sha256[:8]}-{ident}",
        base=base,
        axis="T",
        values=(syn.T,),
        series=series,
        repeats=repeats,
        title=f"Models on the release file {name}",
        description=description or f"the release file {name} (SHA-256 {release.sha256[:12]}…); ε as on its card",
    )
