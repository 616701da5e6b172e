"""Experiments: run configs and their identity, sweep specs, the papers' presets, result aggregation.

* :mod:`~dpmix_core.experiments.config` — ``RunConfig``, ``run_key``;
* :mod:`~dpmix_core.experiments.spec` — ``SweepSpec``, ``load_spec``;
* :mod:`~dpmix_core.experiments.presets` — ``PRESETS``, ``get_preset``, ``estimate_seconds``;
* :mod:`~dpmix_core.experiments.results` — ``aggregate``.
"""

from dpmix_core.experiments.config import RunConfig, run_key

__all__ = ["RunConfig", "run_key"]
