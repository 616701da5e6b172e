"""``python -m dpmix_core verify FILE``: recompute a release's epsilons from its privacy card and compare.

Exit 0 when the card's release description follows from its parameters and every epsilon on it is what this
version's accountants give; exit 1 (with the reason) when not; exit 2 for a file that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math

__all__ = ["EXIT_MISMATCH", "add_verify_arguments", "cli_verify"]

EXIT_MISMATCH = 1


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``verify`` (wire with ``set_defaults(func=cli_verify)``)."""
    parser.add_argument("file", help="FILE.npz, FILE.csv (with FILE.card.json beside it) or FILE.card.json")
    parser.add_argument("--json", action="store_true", help="print the check as one JSON object")


def _eps(value: float | None) -> str:
    if value is None:
        return "—"
    return "inf" if math.isinf(value) else f"{value:.6g}"


def cli_verify(args: argparse.Namespace) -> int:
    """Print one line per accountant (card, recomputed, ok or DIFFERS) and the verdict."""
    from dpmix_core.experiments.release_files import read_card, verify_card

    check = verify_card(read_card(args.file))
    if args.json:
        rows = [{k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()} for r in check.rows]
        print(json.dumps({"matches": check.matches, "reason": check.reason, "rows": rows}, allow_nan=False))
    else:
        for r in check.rows:
            kind = "upper bound" if r["upper_bound"] else "not an upper bound"
            verdict = "ok" if r["matches"] else "DIFFERS"
            print(
                f"  {r['accountant']:12s} card eps={_eps(r['card']):>10s}  recomputed {_eps(r['recomputed']):>10s}  "
                f"[{kind}]  {verdict}"
            )
        print(("verified: " if check.matches else "NOT verified: ") + check.reason)
    return 0 if check.matches else EXIT_MISMATCH
