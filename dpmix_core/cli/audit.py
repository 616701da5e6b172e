"""``python -m dpmix_core audit``: the empirical epsilon lower bound from the command line."""

from __future__ import annotations

import argparse
import json

from dpmix_core.audit.empirical import MECHANISMS, AuditConfig, run_audit
from dpmix_core.cli.argtypes import finite_float, positive_int

__all__ = ["add_audit_arguments", "cli_audit"]


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``python -m dpmix_core audit`` (wire with ``set_defaults(func=cli_audit)``)."""
    parser.add_argument(
        "--mechanism",
        choices=MECHANISMS,
        required=True,
        help="dpmix: without replacement, replace-one; poisson: rate m/n, add/remove-one",
    )
    parser.add_argument("--n", type=positive_int, required=True, help="dataset size (canary included)")
    parser.add_argument("--l", type=positive_int, required=True, help="mix degree l (m for poisson)")
    parser.add_argument("--T", type=positive_int, required=True, help="number of synthetic points")
    parser.add_argument("--sigma-x", type=finite_float, required=True)
    parser.add_argument("--sigma-y", type=finite_float, default=None, help="default: --sigma-x (lambda = 1)")
    parser.add_argument("--trials", type=positive_int, default=10_000, help="runs per neighbouring dataset")
    parser.add_argument("--d", type=positive_int, default=16, help="feature dimension of the audit dataset")
    parser.add_argument("--num-classes", type=positive_int, default=2)
    parser.add_argument("--delta", type=finite_float, default=1e-5)
    parser.add_argument("--confidence", type=finite_float, default=0.95)
    parser.add_argument(
        "--noise-scale",
        type=finite_float,
        default=1.0,
        help="multiply the actual noise (0.1 = a broken mechanism; accountants see nominal sigma)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cli_audit(args: argparse.Namespace) -> int:
    """Run the audit from parsed arguments; ValueError on bad input. Returns the exit code (0)."""
    config = AuditConfig(
        mechanism=args.mechanism,
        n=args.n,
        l=args.l,
        T=args.T,
        sigma_x=args.sigma_x,
        sigma_y=args.sigma_x if args.sigma_y is None else args.sigma_y,
        d=args.d,
        num_classes=args.num_classes,
        trials=args.trials,
        delta=args.delta,
        confidence=args.confidence,
        seed=args.seed,
        noise_scale=args.noise_scale,
    )
    result = run_audit(config)
    if args.json:
        print(json.dumps(result.to_json(), allow_nan=False))
        return 0
    print(f"{result.release.describe()}")
    print(
        f"empirical epsilon lower bound: {result.epsilon_lower_bound:.4g} "
        f"({100 * result.confidence:g} % confidence, {result.evaluation_trials} evaluation runs per dataset; "
        f"FPR {result.fpr:.4g} <= {result.fpr_upper:.4g}, FNR {result.fnr:.4g} <= {result.fnr_upper:.4g})"
    )
    for r in result.accountant_results:
        print(f"  {r.accountant:12s} eps={r.epsilon:.4g}  ({r.guarantee})")
    print(result.reading)  # starts with "VIOLATION:" when the lower bound exceeds a rigorous upper bound
    return 0
