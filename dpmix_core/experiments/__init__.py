"""Experiments: run configs and their identity, sweep specs, the papers' presets, result aggregation.

* :mod:`~dpmix_core.experiments.config` — ``RunConfig``, ``run_key``;
* :mod:`~dpmix_core.experiments.spec` — ``SweepSpec``, ``load_spec``;
* :mod:`~dpmix_core.experiments.presets` — ``PRESETS``, ``get_preset``, ``estimate_seconds``;
* :mod:`~dpmix_core.experiments.results` — ``aggregate``, ``certified_epsilon`` (a run's smallest rigorous bound);
* :mod:`~dpmix_core.experiments.certified_axis` — ``on_certified_epsilon``: a sweep's points at their certified
  ε instead of its own axis;
* :mod:`~dpmix_core.experiments.best_release` — ``run_search``: the best feature-mixing release for a budget;
* :mod:`~dpmix_core.experiments.solve_epsilon` — ``solve_epsilon``: the epsilon a stored curve needs for X %;
* :mod:`~dpmix_core.experiments.quick_vs_full` — ``quick_vs_full``: a stored quick sweep's points next to its full
  protocol's runs (the 5-point target);
* :mod:`~dpmix_core.experiments.sweep_view` — ``view_sweep``: what Train & trade-offs and the sweep report show of a
  stored sweep, from one read of its runs (``trade_offs.read_stored_sweep``; a page caches both under
  ``ResultStore.results_version``);
* :mod:`~dpmix_core.experiments.release_files` — ``read_release``: a release made earlier, read back with its
  card to train on (``train --release``);
* :mod:`~dpmix_core.experiments.run_data` — ``load_run_dataset``: the dataset a run reads, one's own file split into
  released and held-out records (``train --data-file``).
"""

from dpmix_core.experiments.config import RunConfig, run_key

__all__ = ["RunConfig", "run_key"]
