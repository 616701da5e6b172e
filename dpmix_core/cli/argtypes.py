"""argparse value types shared by every subcommand: one clear message per bad value."""

from __future__ import annotations

import argparse
import math

__all__ = ["positive_int", "finite_float", "positive_float"]


def positive_int(text: str) -> int:
    """'256', '1e4' -> int; rejects fractions, zero and negatives."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
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
