"""Shared by the Train & trade-offs page tests: a tiny sweep on one's own file, built, launched and waited for."""

from __future__ import annotations

import time
from pathlib import Path

from dpmix_core.runtime.store import ResultStore, Run


def launch_tiny_own_sweep(at, store: Path, seconds: float = 150, *, loose_bounds: bool = False) -> list[Run]:
    """Build your own on the uploaded file (DPMix, σ = 0.3, ℓ = 4, T = 200, no baseline, 1 epoch, 1 repeat), launch
    it in the background and wait for every run: the stored runs, each of them done. ``loose_bounds``: the bounds
    are meant to be loose (their warning is expected)."""
    at.multiselect(key="tr_mechs").set_value(["dpmix"])
    at.text_input(key="tr_values").input("0.3")
    at.text_input(key="tr_l").input("4")
    at.text_input(key="tr_T").input("200")
    at.multiselect(key="tr_baselines").set_value([])
    at.number_input(key="tr_epochs_own").set_value(1)
    at.number_input(key="tr_repeats").set_value(1).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert loose_bounds or not [w for w in at.warning if "bounds" in w.value]
    at.button(key="tr_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    results, deadline = ResultStore(store), time.time() + seconds
    while {r.status for r in results.list_runs()} - {"done"} and time.time() < deadline:
        time.sleep(1.0)
    runs = results.list_runs()
    assert runs and {r.status for r in runs} == {"done"}
    return runs
