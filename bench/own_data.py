"""Shared by the benches of one's own file: accuracy over seeds, and their ``--seeds`` / ``--eps`` options."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterable, Sequence

import numpy as np

from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.runner import run_config


def mean_test_accuracy(configs: Iterable[RunConfig]) -> tuple[float, float]:
    """Each run in this process (no store; its notes on stderr swallowed): mean and sd of test accuracy, in %."""
    out = []
    for config in configs:
        with contextlib.redirect_stderr(io.StringIO()):
            out.append(run_config(config)["test_accuracy"])
    return 100 * float(np.mean(out)), 100 * float(np.std(out))


def seeds_and_eps(description: str, eps: Sequence[float]) -> argparse.Namespace:
    """``--seeds`` (3) and ``--eps`` (``eps``) from the command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", type=float, nargs="+", default=list(eps))
    return parser.parse_args()
