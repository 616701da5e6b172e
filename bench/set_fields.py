"""``--set FIELD=VALUE`` for the bench scripts that re-run one preset cell with some RunConfig fields changed."""

from __future__ import annotations

import json


def parse_set(items: list[str]) -> dict:
    """``["lr=1e-3", "model=dpcda-cnn-gn"]`` -> ``{"lr": 0.001, "model": "dpcda-cnn-gn"}``: a value is read as
    JSON (numbers, true/false, quoted strings) and kept as text when it is not JSON."""
    fields = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field:
            raise SystemExit(f"--set takes FIELD=VALUE. Found {item!r}.")
        try:
            fields[field] = json.loads(text)
        except json.JSONDecodeError:
            fields[field] = text
    return fields
