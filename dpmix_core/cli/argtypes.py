"""argparse value types shared by every subcommand: one clear message per bad value."""

from __future__ import annotations

import argparse
import math
import re
from decimal import Decimal, InvalidOperation

__all__ = ["MAX_INT", "positive_int", "nonnegative_int", "finite_float", "positive_float", "attach_negative_pairs"]

MAX_INT = 10**18  # larger counts are typos (and overflow int64 arrays); refused with one line


NEGATIVE_PAIR = re.compile(r"-\.?\d[^,]*,")  # "-5,5", "-0.5,1e3": a LO,HI pair that starts with a minus


def attach_negative_pairs(argv: list[str]) -> list[str]:
    """``--feature-range -5,5`` as ``--feature-range=-5,5``: argparse reads a value that starts with "-" and is not
    a plain negative number as an option and says "expected one argument". No option looks like "-5,", so only
    such values are joined to the option before them."""
    out: list[str] = []
    for token in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and NEGATIVE_PAIR.match(token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def positive_int(text: str) -> int:
    """'256', '1e4' -> int, exactly (parsed as a decimal, never through a float); rejects fractions,
    zero, negatives and values above :data:`MAX_INT`."""
    return _whole_number(text, minimum=1, what="a positive integer")


def nonnegative_int(text: str) -> int:
    """As :func:`positive_int`, with 0 allowed (a seed)."""
    return _whole_number(text, minimum=0, what="a whole number >= 0")


def _whole_number(text: str, *, minimum: int, what: str) -> int:
    try:
        value = Decimal(text.strip().replace("_", ""))
    except (InvalidOperation, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {MAX_INT:.0e})")
    if value != value.to_integral_value() or value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return int(value)


def finite_float(text: str) -> float:
    """A finite number (NaN and infinities rejected)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not positive")
    return value
