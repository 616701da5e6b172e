"""What a results view shows of one stored sweep, computed from one read of its runs.

Train & trade-offs and the sweep's HTML report show the same pieces of a sweep: the aggregate behind the chart,
the paper's numbers beside ours, each series' best ℓ or T, and for a quick preset how far each point is from its
full protocol. Each used to read the sweep's runs from the store on its own (six reads per rerun of the page);
:func:`view_sweep` computes them all from one :class:`~dpmix_core.experiments.trade_offs.StoredSweep`, so a page
can cache the result under :meth:`~dpmix_core.runtime.store.ResultStore.results_version` and answer a click that
changes nothing in the store without touching it::

    store --read_stored_sweep--> StoredSweep --view_sweep(test rows, test images)--> SweepView
      '---results_version() (three aggregate queries): the cache key of both arrows

A ``SweepView`` holds no run rows (it pickles small: a page's data cache copies it on every hit); what needs the
rows (the report's ε readings, its collapsed runs) reads them from the ``StoredSweep``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from dpmix_core.experiments.best_axis import AxisPick
from dpmix_core.experiments.quick_vs_full import QuickVsFull, quick_vs_full_by_test_inputs
from dpmix_core.experiments.spec import Published
from dpmix_core.experiments.trade_offs import (
    StoredSweep,
    read_stored_sweep,
    runs_left_out,
    sweep_best_axis,
    sweep_comparison,
    sweep_published,
    sweep_results,
    sweep_test_inputs,
    sweep_test_rows,
)
from dpmix_core.runtime.store import ResultStore

__all__ = ["SweepView", "overlay_aggregates", "view_sweep"]


@dataclass(frozen=True, eq=False)
class SweepView:
    """One reading of a stored sweep: its ``test_rows`` ("all", "even", "odd") read through ``test_inputs`` (a
    test loader; ``own_inputs`` is the sweep's own, ``loaders`` every one its runs were read through).

    ``agg``/``axis``/``title``: :func:`~dpmix_core.experiments.trade_offs.sweep_results`; ``left_out``: finished
    runs without this reading; ``published``/``comparison``: the paper's numbers and ours beside them;
    ``best_axis``: each series' best ℓ or T (empty off those axes); ``checks``: for a quick variant, its
    comparison with the full protocol through each loader (empty otherwise), :attr:`check` the one shown.
    """

    sweep_id: int
    name: str
    test_rows: str
    test_inputs: str
    own_inputs: str
    loaders: tuple[str, ...]
    agg: pd.DataFrame
    axis: str | None
    title: str
    left_out: int
    published: tuple[Published, ...]
    comparison: pd.DataFrame
    best_axis: tuple[AxisPick, ...]
    checks: dict[str, QuickVsFull] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.test_inputs not in self.loaders and not self.agg.empty:
            raise ValueError(f"test images {self.test_inputs!r} are not among the sweep's: {', '.join(self.loaders)}.")
        if self.left_out < 0:
            raise ValueError(f"left_out counts runs: it cannot be negative. Found {self.left_out}.")

    @property
    def check(self) -> QuickVsFull | None:
        """The quick-vs-full comparison through the test images shown (None: not a quick variant)."""
        return self.checks.get(self.test_inputs)


def view_sweep(
    store: ResultStore,
    sweep: int | str | StoredSweep,
    *,
    test_rows: str | None = None,
    test_inputs: str | None = None,
) -> SweepView:
    """The :class:`SweepView` of ``sweep`` (a read of it, or its id or name: read once here) on ``test_rows``
    (None: the rows its spec reports) through ``test_inputs`` (None: its own loader). ValueError: no such sweep."""
    stored = sweep if isinstance(sweep, StoredSweep) else read_stored_sweep(store, sweep)
    rows_read = sweep_test_rows(store, stored) if test_rows is None else test_rows
    own, loaders = sweep_test_inputs(store, stored)
    inputs = own if test_inputs is None else test_inputs
    agg, axis, title = sweep_results(store, stored, test_rows=rows_read, test_inputs=inputs)
    checks = quick_vs_full_by_test_inputs(store, stored, test_rows=rows_read)
    return SweepView(
        sweep_id=stored.id,
        name=stored.name,
        test_rows=rows_read,
        test_inputs=inputs,
        own_inputs=own,
        loaders=loaders,
        agg=agg,
        axis=axis,
        title=title,
        left_out=runs_left_out(store, stored, agg),
        published=sweep_published(store, stored),
        comparison=sweep_comparison(store, stored, agg),
        best_axis=sweep_best_axis(store, stored, test_inputs=inputs),
        checks=checks,
    )


def overlay_aggregates(store: ResultStore, sweeps: list[int | str]) -> dict[str, pd.DataFrame]:
    """{sweep name: its aggregate, each on its own test rows through its own test images} of ``sweeps``, to draw
    beside another on the certified-ε axis (``certified_axis.overlaid``). ValueError: no such sweep."""
    out = {}
    for sweep in sweeps:
        view = view_sweep(store, sweep)
        out[view.name] = view.agg
    return out
