"""How far a quick preset's points are from its full protocol's, from the runs in the results store (issue #13).

A quick variant (``SweepSpec.quick``) trades the paper's protocol for a run of a minute or less; it is a
preview only while it lands where the full protocol does. The target: each point within
:data:`QUICK_WITHIN_PTS` points of the full protocol's mean. This module compares the two wherever the
store holds both. The full protocol's runs are found by identity key, so they count whichever sweep ran
them (``sweep preset:NAME``, a narrowed ``--values``/``--series``/``--seeds`` run, ``--repeats 10``), as
long as they are that preset's own runs (same config, any of the first :data:`MAX_FULL_SEEDS` seeds).

Verdict per point (the quick sweep's series and axis value):

* ``within 5 points``: both learned and the means differ by at most :data:`QUICK_WITHIN_PTS`;
* ``quick above`` / ``quick below``: both learned and they differ by more;
* ``both collapsed``: every run on both sides stayed at the constant predictor (they agree; no number);
* ``quick collapsed`` / ``full collapsed``: one side never learned, the other did (they disagree);
* ``full protocol not run``: no finished run of the full protocol at that point in this store;
* ``no full-protocol point``: the full preset has no such series.

Nothing is written; the store is only read. No Streamlit.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import NamedTuple

import pandas as pd

from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.experiments.presets import get_preset, preset_names
from dpmix_core.experiments.results import aggregate, all_collapsed
from dpmix_core.experiments.spec import SweepSpec, axis_value, is_spec_file, load_spec
from dpmix_core.experiments.trade_offs import (
    StoredSweep,
    narrow_spec,
    read_stored_sweep,
    sweep_rows,
    sweep_spec,
    sweep_test_inputs,
    with_dataset,
)
from dpmix_core.runtime.store import ResultStore

__all__ = [
    "MAX_FULL_SEEDS",
    "QUICK_WITHIN_PTS",
    "QuickVsFull",
    "full_command",
    "full_protocol",
    "other_full_commands",
    "quick_vs_full",
    "quick_vs_full_by_test_inputs",
    "sweep_points",
]

QUICK_WITHIN_PTS = 5.0  # issue #13: "keep quick presets ... within 5 points of their full protocol"
MAX_FULL_SEEDS = 20  # the full protocol's seeds looked up per point (a `--repeats 10` run counts all ten)
WITHIN = f"within {QUICK_WITHIN_PTS:g} points"

COLUMNS = [  # what decides the verdict first (a page's table is read left to right), then the seeds behind it
    "series",
    "axis value",
    "quick (%)",
    "full (%)",
    "gap (pts)",
    "verdict",
    "full ± std",
    "quick seeds",
    "quick collapsed",
    "full seeds",
    "full collapsed",
]


@dataclass(frozen=True)
class QuickVsFull:
    """The comparison of one stored quick sweep with its full protocol.

    ``full_name``: the full preset's name, or the path of the spec file that holds it; ``table``: one row per
    point of the quick sweep (:data:`COLUMNS`); ``full_runs``: how many finished runs of the full protocol the
    store holds for those points; ``command``: the ``python -m dpmix_core sweep`` arguments that run the full
    protocol there (default: the whole preset or spec file); ``elsewhere``: the arguments for the quick's points
    the full preset does not list, run by another full preset (:func:`other_full_commands`).
    """

    full_name: str
    table: pd.DataFrame
    full_runs: int
    command: str = ""  # the `sweep` arguments that run the full protocol at the quick's points
    elsewhere: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if list(self.table.columns) != COLUMNS:
            raise ValueError(f"a quick-vs-full table has the columns {COLUMNS}. Found {list(self.table.columns)}.")
        if self.full_runs < 0:
            raise ValueError(f"full_runs counts runs: it cannot be negative. Found {self.full_runs}.")

    def to_json(self) -> dict:
        """JSON-ready: the full preset, its run count, :meth:`sentence` and one dict per point (None for no number)."""
        points = self.table.astype(object).where(self.table.notna(), None).to_dict("records")
        return {
            "full_variant": self.full_name,
            "full_runs": self.full_runs,
            "summary": self.sentence(),
            "points": points,
        }

    def _source(self) -> str:
        """The ``sweep`` argument that runs the whole full protocol: its spec file, else ``preset:NAME``."""
        return shlex.quote(self.full_name) if is_spec_file(self.full_name) else "preset:" + self.full_name

    def tally(self) -> tuple[int, int]:
        """(points within the target or both collapsed, points compared: both sides have finished runs)."""
        verdicts = self.table["verdict"]
        compared = ~verdicts.isin(["full protocol not run", "no full-protocol point"])
        return int(verdicts.isin([WITHIN, "both collapsed"]).sum()), int(compared.sum())

    def sentence(self, *, markdown: bool = False) -> str:
        """One line: how many points are within the target, or what to run to find out (``markdown``: names and
        the command as code spans, for the page; plain text for the terminal and the HTML report)."""
        code = (lambda t: f"`{t}`") if markdown else (lambda t: t)
        agree, compared = self.tally()
        if not compared:
            commands = ([self.command] if self.command else []) + list(self.elsewhere)
            runs = " and ".join(code(f"python -m dpmix_core sweep {c}") for c in commands or [self._source()])
            return (
                f"The full protocol ({code(self.full_name)}) has no finished run at these points in this store; "
                f"run it with {runs} (far longer than the quick)."
            )
        return (
            f"{agree} of {compared} points compared are within {QUICK_WITHIN_PTS:g} points of the full "
            f"protocol ({code(self.full_name)}, {self.full_runs} finished runs in this store)"
            + ("." if agree == compared else ": the others preview it badly (verdict column).")
        )


def full_protocol(quick: SweepSpec) -> SweepSpec | None:
    """The full protocol a quick spec previews, on the quick's dataset (None: not a quick variant, its full
    preset or spec file no longer loads, or the quick runs on one's own file: a quick preset moved onto a file is a
    sweep of its own, with no full protocol on that file to compare with)."""
    if not quick.quick or not quick.full_variant or quick.base.data_file is not None:
        return None
    try:
        full = _full_spec(quick.full_variant)
    except ValueError:  # a spec file that calls itself quick but names no preset, or a moved or broken file
        return None
    return with_dataset(full, quick.base.dataset, quick.base.data_dir)


def _full_spec(full_variant: str) -> SweepSpec:
    """The full protocol ``full_variant`` names, as written: a spec file, else a preset."""
    return load_spec(full_variant) if is_spec_file(full_variant) else get_preset(full_variant)


Point = tuple[str, float | None]  # (series, axis value; None for a series the axis does not move)


def _value(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def sweep_points(spec: SweepSpec) -> dict[Point, RunConfig]:
    """{(series, axis value): the point's first-seed config} of every point a spec runs."""
    return {(cfg.label, _value(axis_value(cfg, spec.axis))): cfg for cfg in replace(spec, repeats=1).runs()}


def full_command(quick: SweepSpec, full: SweepSpec, source: str | None = None) -> str:
    """``sweep`` arguments for the full protocol at a (possibly narrowed) quick spec's series, values, dataset
    ("" when none of the quick's axis values is a point of the full protocol). ``source``: the spec file that
    holds ``full`` (None: the preset named like it)."""
    own = _full_spec(source or full.name.split("@")[0])
    parts = [shlex.quote(source) if source else f"preset:{own.name}"]
    series = [s for s in quick.series_names if s in full.series_names]
    if series and set(series) != set(full.series_names):
        parts += ["--series", *(shlex.quote(s) for s in series)]
    values = [f"{v:g}" for v in quick.values if v in full.values]
    if quick.values and not values:
        return ""  # none of the quick's points is the full preset's (another preset runs them: other_full_commands)
    if len(values) < len(full.values):
        parts += ["--values", *values]
    if full.base.dataset != own.base.dataset:
        parts += ["--dataset", full.base.dataset]
    return " ".join(parts)


def _ran(spec: SweepSpec, points: Collection[Point]) -> SweepSpec:
    """The quick spec narrowed to the series and axis values of ``points`` (its finished points); a baseline the
    axis does not move (non-private at ε = ∞) has no value of the axis and narrows none."""
    values = sorted({x for _, x in points if x is not None and x in spec.values})
    series = [s for s in spec.series_names if s in {name for name, _ in points}]
    return narrow_spec(spec, values=values or None, series=series or None)


def other_full_commands(quick: SweepSpec, full: SweepSpec) -> tuple[str, ...]:
    """``sweep`` arguments of the other full presets that run the quick's points ``full`` does not list.

    thesis-4.2-sigma-quick's sigma = 0.7 is not a point of thesis-4.2-sigma: the same run is thesis-4.2-l's
    l = 128 ("preset:thesis-4.2-l --values 128"). Found by identity key among every full preset on the quick's
    dataset; a point no preset runs is left out (the table still says "full protocol not run" for it).
    """
    missing = tuple(v for v in quick.values if v not in full.values)
    if not missing:
        return ()
    series = tuple(s for s in full.series if s.name in quick.series_names) or full.series
    points = replace(full, values=missing, series=series, published=(), published_best=())  # its runs alone
    wanted = {run_key(cfg) for cfg in sweep_points(points).values()}
    found: dict[str, tuple[list, list]] = {}  # preset: (its series names, its axis values) holding those runs
    for key, (name, label, value) in _full_preset_points(quick.base.dataset, quick.base.data_dir).items():
        if key in wanted and name != full.name.split("@")[0]:
            names, values = found.setdefault(name, ([], []))
            names.extend([label] if label not in names else [])
            values.extend([value] if value not in values else [])
    commands = []
    for name, (names, values) in found.items():
        other = with_dataset(get_preset(name), quick.base.dataset, quick.base.data_dir)
        piece = narrow_spec(other, values=[v for v in other.values if v in values], series=names or None)
        commands.append(full_command(piece, other))
    return tuple(commands)


@functools.lru_cache(maxsize=4)
def _full_preset_points(dataset: str, data_dir: str | None) -> dict[str, tuple[str, str, float | None]]:
    """{run key: (full preset, series, axis value)} of every full preset's first-seed runs on a dataset.

    Presets are fixed at import, so this is computed once per dataset (about 0.3 s for all of them).
    """
    out: dict[str, tuple[str, str, float | None]] = {}
    for name in preset_names(quick=False):
        spec = with_dataset(get_preset(name), dataset, data_dir)
        for (label, value), cfg in sweep_points(spec).items():
            out.setdefault(run_key(cfg), (name, label, value))
    return out


def _full_rows(store: ResultStore, full_points: dict[Point, RunConfig], points: Collection[Point]) -> list[dict]:
    """The full protocol's finished runs at ``points`` (its first MAX_FULL_SEEDS seeds), whichever sweep ran them."""
    keys: dict[str, str] = {}
    for point, cfg in full_points.items():
        if point in points:
            for r in range(MAX_FULL_SEEDS):
                keys[run_key(replace(cfg, seed=cfg.seed + r))] = cfg.label
    rows = store.results(status="done", keys=keys)
    for row in rows:  # the series name in the full preset, whatever the sweep that ran it called it
        row["config"] = {**row["config"], "label": keys[row["key"]]}
    return rows


def _verdict(quick_mean: float, quick_dead: bool, full_mean: float | None, full_dead: bool) -> str:
    if full_mean is None:
        return "full protocol not run"
    if quick_dead or full_dead:
        return {
            (True, True): "both collapsed",
            (True, False): "quick collapsed",
            (False, True): "full collapsed",
        }[(quick_dead, full_dead)]
    gap = quick_mean - full_mean
    if abs(gap) <= QUICK_WITHIN_PTS:
        return WITHIN
    return "quick above" if gap > 0 else "quick below"


class _Side(NamedTuple):
    mean: float  # % over the runs that learned (all of them when none did)
    std: float | None  # % (None for one run)
    seeds: int  # runs in the mean
    collapsed: int  # runs that never left the constant predictor
    dead: bool  # every run collapsed: no number


def _sides(agg: pd.DataFrame) -> dict[Point, _Side]:
    """{(series, axis value): its aggregated side} (:func:`~dpmix_core.experiments.results.aggregate`'s rule)."""
    if agg.empty:
        return {}
    dead = all_collapsed(agg)
    out = {}
    for i, row in agg.iterrows():
        n = int(row["test_accuracy_count"])
        std = 100 * float(row["test_accuracy_std"]) if n > 1 and pd.notna(row["test_accuracy_std"]) else None
        lost = int(row["collapsed"]) if "collapsed" in row and pd.notna(row["collapsed"]) else 0
        side = _Side(100 * float(row["test_accuracy_mean"]), std, n, lost, bool(dead[i]))
        out[(str(row["label"]), _value(row["axis_value"]))] = side
    return out


def quick_vs_full(
    store: ResultStore, sweep: int | str | StoredSweep, *, test_rows: str | None = None, test_inputs: str | None = None
) -> QuickVsFull | None:
    """A stored quick sweep's points next to its full protocol's (None: the sweep is not a quick preset's).

    Only finished runs count on both sides; a point whose runs all collapsed has no number (its verdict says
    so). The quick side is the sweep's rows aggregated as :func:`dpmix_core.experiments.trade_offs.sweep_results`
    does, so the two tables on the page agree. ``test_rows`` / ``test_inputs``: the reading shown, the same on
    both sides, so the full protocol's points sit next to the plotted ones (None: the quick spec's test rows,
    and each run read through its own loader).
    """
    found = _comparisons(store, sweep, test_rows, (test_inputs,))
    return None if found is None else found[test_inputs]


def quick_vs_full_by_test_inputs(
    store: ResultStore, sweep: int | str | StoredSweep, *, test_rows: str | None = None
) -> dict[str, QuickVsFull]:
    """{test loader: :func:`quick_vs_full` read through it} for every loader a stored quick sweep's runs were
    read through, the sweep's own first ({} when the sweep is not a quick variant). A clipped class-centric
    z-score quick can preview its full protocol on one loader and not on another (REPRODUCTION 3b): the
    terminal and the page show every reading, not only the one on screen."""
    if not isinstance(sweep, StoredSweep):
        spec = sweep_spec(store, sweep, must_exist=True)
        if spec is None or full_protocol(spec) is None:
            return {}  # not a quick variant: its runs are not read
        sweep = read_stored_sweep(store, sweep)
    own, loaders = sweep_test_inputs(store, sweep)
    found = _comparisons(store, sweep, test_rows, (own, *(name for name in loaders if name != own)))
    return {} if found is None else {str(loader): check for loader, check in found.items()}


def _comparisons(
    store: ResultStore, sweep: int | str | StoredSweep, test_rows: str | None, loaders: tuple[str | None, ...]
) -> dict[str | None, QuickVsFull] | None:
    """:func:`quick_vs_full` through each of ``loaders``; the sweep, both specs and the full protocol's stored
    runs are read once for all of them."""
    spec = sweep_spec(store, sweep, must_exist=True)
    full = None if spec is None else full_protocol(spec)
    if spec is None or full is None:
        return None
    source = spec.full_variant if spec.full_variant and is_spec_file(spec.full_variant) else None
    rows_read = spec.test_rows if test_rows is None else test_rows
    quick_rows = sweep_rows(store, sweep)
    quicks = {
        loader: _sides(aggregate(quick_rows, axis=spec.axis, test_rows=rows_read, test_inputs=loader))
        for loader in loaders
    }
    # the full protocol at the quick's axis values, listed in the full preset or not (e.g. thesis-4.2-sigma-quick's
    # sigma = 0.7, which thesis-4.2-sigma leaves to thesis-4.2-l), at every point some reading has results for
    full_points = sweep_points(replace(full, values=spec.values))
    rows_full = _full_rows(store, full_points, set().union(*quicks.values()))
    out = {}
    for loader, quick in quicks.items():
        at_points = [row for row in rows_full if _point(row["config"], full.axis) in quick]
        fulls = _sides(aggregate(at_points, axis=full.axis, test_rows=rows_read, test_inputs=loader))
        out[loader] = _comparison(spec, full, source, quick, full_points, fulls, len(at_points))
    return out


def _point(config: dict, axis: str) -> Point:
    return str(config["label"]), _value(axis_value(config, axis))


def _comparison(
    spec: SweepSpec,
    full: SweepSpec,
    source: str | None,
    quick: dict[Point, _Side],
    full_points: dict[Point, RunConfig],
    fulls: dict[Point, _Side],
    full_runs: int,
) -> QuickVsFull:
    """One reading's table: the quick's points (``quick``) next to the full protocol's (``fulls``)."""
    full_name = source or full.name
    if not quick:
        command, elsewhere = full_command(spec, full, source), other_full_commands(spec, full)
        return QuickVsFull(full_name, pd.DataFrame(columns=COLUMNS), 0, command, elsewhere)
    ran = _ran(spec, quick)  # what to run is the full protocol at the points the quick has results for
    command, elsewhere = full_command(ran, full, source), other_full_commands(ran, full)
    rows = []
    for point, q in quick.items():
        f = fulls.get(point)
        if point not in full_points:
            verdict = "no full-protocol point"
        else:
            verdict = _verdict(q.mean, q.dead, None if f is None else f.mean, f is not None and f.dead)
        full_number = f is not None and not f.dead
        rows.append(
            {
                "series": point[0],
                "axis value": point[1],
                "quick (%)": None if q.dead else round(q.mean, 2),
                "quick seeds": q.seeds,
                "quick collapsed": q.collapsed,
                "full (%)": round(f.mean, 2) if f is not None and full_number else None,
                "full ± std": round(f.std, 2) if f is not None and full_number and f.std is not None else None,
                "full seeds": 0 if f is None else f.seeds,
                "full collapsed": 0 if f is None else f.collapsed,
                "gap (pts)": round(q.mean - f.mean, 2) if f is not None and full_number and not q.dead else None,
                "verdict": verdict,
            }
        )
    return QuickVsFull(full_name, pd.DataFrame(rows, columns=COLUMNS), full_runs, command, elsewhere)
