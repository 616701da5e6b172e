"""Numbers typed by a user: parsed exactly (scientific notation included) or refused with a message that names
the field and the value, so a page never silently clamps ``1e9`` to 1 or keeps an old result on screen."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

_IGNORED = str.maketrans("", "", " ,_\u202f\u00a0")  # thousands separators a user may type: 60,000 / 60 000 / 60_000


def _decimal(text: str, name: str) -> Decimal:
    cleaned = str(text).strip().translate(_IGNORED)
    if not cleaned:
        raise ValueError(f"invalid: {name} is empty; type a number.")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError(f"invalid: {name} = {text!r} is not a number (examples: 60000, 6e4, 1.5e-5).") from None
    if not value.is_finite():
        raise ValueError(f"invalid: {name} = {text!r} must be finite.")
    return value


def parse_count(text: str, *, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """A whole number from text such as ``60000``, ``60,000`` or ``1e9``; ValueError "invalid: …" otherwise."""
    value = _decimal(text, name)
    if value != value.to_integral_value():
        raise ValueError(f"invalid: {name} = {text!r} must be a whole number.")
    count = int(value)
    if count < minimum:
        raise ValueError(f"invalid: {name} = {text.strip()} must be at least {minimum:,}.")
    if maximum is not None and count > maximum:
        raise ValueError(f"invalid: {name} = {text.strip()} must be at most {maximum:,}.")
    return count


def parse_real(
    text: str,
    *,
    name: str,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """A finite real number from text such as ``1e-5`` or ``0.0711``, within [minimum, maximum] (open at the
    minimum when ``strict_minimum``); ValueError "invalid: …" otherwise."""
    value = float(_decimal(text, name))
    if not math.isfinite(value):
        raise ValueError(f"invalid: {name} = {text!r} is out of range.")
    if minimum is not None and (value < minimum or (strict_minimum and value == minimum)):
        bound = "greater than" if strict_minimum else "at least"
        raise ValueError(f"invalid: {name} = {text.strip()} must be {bound} {minimum:g}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"invalid: {name} = {text.strip()} must be at most {maximum:g}.")
    return value


def format_count(value: int) -> str:
    """How a count is written back into a text box: plain digits, no separators (``60000``)."""
    return str(int(value))


def format_real(value: float) -> str:
    """How a real is written back into a text box: short, exact enough to parse back (``1e-05``, ``0.0711``)."""
    return f"{value:.6g}"


def parse_counts(text: str, *, name: str, minimum: int = 1, maximum: int | None = None) -> tuple[int, ...]:
    """Whole numbers separated by commas or semicolons (``16, 64`` or ``16000; 64000``; no thousands commas in a
    list), each as :func:`parse_count` takes it; ValueError "invalid: …" for an empty list or a bad entry."""
    return tuple(parse_count(part, name=name, minimum=minimum, maximum=maximum) for part in _list_parts(text, name))


def parse_reals(
    text: str, *, name: str, minimum: float | None = None, strict_minimum: bool = False
) -> tuple[float, ...]:
    """Real numbers separated by commas or semicolons (``0.5, 1``), each as :func:`parse_real` takes it."""
    return tuple(
        parse_real(part, name=name, minimum=minimum, strict_minimum=strict_minimum) for part in _list_parts(text, name)
    )


def _list_parts(text: str, name: str) -> list[str]:
    parts = [part.strip() for part in str(text).replace(";", ",").split(",")]
    if not any(parts):
        raise ValueError(f"invalid: {name} is empty; type values separated by commas.")
    if not all(parts):
        raise ValueError(f"invalid: {name} = {text!r} has an empty entry between two commas.")
    return parts
