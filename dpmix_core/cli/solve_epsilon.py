"""``python -m dpmix_core solve-epsilon``: the epsilon a stored sweep's series needs for X % accuracy."""

from __future__ import annotations

import argparse
import json

from dpmix_core.cli.argtypes import finite_float
from dpmix_core.data import TEST_ROWS
from dpmix_core.training.names import TEST_INPUTS

__all__ = ["add_solve_epsilon_arguments", "cli_solve_epsilon"]


def add_solve_epsilon_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``solve-epsilon`` (wire with ``set_defaults(func=cli_solve_epsilon)``)."""
    parser.add_argument("--sweep", required=True, help="a sweep in the results store: its name or number")
    parser.add_argument("--accuracy", type=finite_float, required=True, help="the test accuracy wanted: 0.9 or 90")
    parser.add_argument("--series", help="one series of the sweep (default: every series with a curve)")
    parser.add_argument(
        "--epsilon",
        dest="epsilon_name",
        help="'target epsilon', 'certified' (each point's smallest rigorous bound) or an accountant "
        "(default: the target epsilon on a target-epsilon sweep, else 'certified')",
    )
    parser.add_argument(
        "--test-rows",
        choices=TEST_ROWS,
        help="read the accuracy on every test row or on one half (default: what the sweep's spec reports)",
    )
    parser.add_argument(
        "--test-inputs",
        choices=TEST_INPUTS,
        help="read the trained models through this test loader (default: each run's own; a clipped class-centric "
        "z-score release's runs record each: with the release's clip, without it, and at the release's scale)",
    )
    parser.add_argument("--store", help="results store (default: $DPMIX_STORE or ~/.cache/dpmix/results.sqlite)")
    parser.add_argument("--json", action="store_true", help="print a list of JSON answers")


def cli_solve_epsilon(args: argparse.Namespace) -> int:
    """Print one answer per series; ValueError (one line) for an unknown sweep, series or epsilon."""
    from dpmix_core.experiments.solve_epsilon import sweep_epsilon_answers
    from dpmix_core.runtime.store import ResultStore

    accuracy = args.accuracy / 100 if 1 < args.accuracy <= 100 else args.accuracy  # 90 means 90 %
    store = ResultStore.existing(args.store)
    sweep: int | str = int(args.sweep) if args.sweep.isdigit() else args.sweep
    answers = sweep_epsilon_answers(
        store,
        sweep,
        accuracy=accuracy,
        series=args.series,
        epsilon_name=args.epsilon_name,
        test_rows=args.test_rows,
        test_inputs=args.test_inputs,
    )
    if args.json:
        print(json.dumps([a.to_dict() for a in answers], allow_nan=False))
    else:
        for answer in answers:
            print(answer.sentence())
    return 0
