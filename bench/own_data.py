"""Shared by the benches of one's own file: accuracy over seeds, and their ``--seeds`` / ``--eps`` options."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterable, Sequence

import numpy as np

from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.run_data import OwnData
from dpmix_core.experiments.runner import run_config
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training.protocols import protocol_options


def mean_test_accuracy(configs: Iterable[RunConfig]) -> tuple[float, float]:
    """Each run in this process (no store; its notes on stderr swallowed): mean and sd of test accuracy, in %."""
    out = []
    for config in configs:
        with contextlib.redirect_stderr(io.StringIO()):
            out.append(run_config(config)["test_accuracy"])
    return 100 * float(np.mean(out)), 100 * float(np.std(out))


def own_run(
    own: OwnData,
    method: str,
    mechanism: str | None,
    bounds: FeatureRange,
    eps: float,
    seed: int,
    releases: dict[str, tuple[int, int]],
    range_share: float | None = None,
) -> RunConfig:
    """A run of ``train --data-file`` on ``own`` (the own-data linear protocol): a ``mechanism`` release of
    ``releases[mechanism]`` = (l, T) calibrated to ``eps`` (its tightest rigorous accountant), or a baseline
    ``method`` (DP-SGD at ``eps``, non-private), every one scaling the features with ``bounds``. ``range_share``:
    the release narrows the bounds by private ranges at this share of ``eps`` (``--private-ranges``), the target
    then covering both."""
    if method == "mixing":
        assert mechanism is not None
        l, T = releases[mechanism]
        options = protocol_options("linear", mechanism=mechanism, own_data=True)
        ranges = None if range_share is None else range_share * eps
        synthesis = SynthesisConfig(mechanism, l=l, T=T, target_epsilon=eps, feature_range=bounds, range_epsilon=ranges)
        return RunConfig(
            "mixing", model="linear", synthesis=synthesis, feature_range=bounds, seed=seed, **own.options, **options
        )
    options = protocol_options("linear", method=method, own_data=True)
    return RunConfig(
        method, model="linear", dpsgd_epsilon=eps, feature_range=bounds, seed=seed, **own.options, **options
    )


def seeds_and_eps(description: str, eps: Sequence[float]) -> argparse.Namespace:
    """``--seeds`` (3) and ``--eps`` (``eps``) from the command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", type=float, nargs="+", default=list(eps))
    return parser.parse_args()
