"""Shared by the tests of one's own file: a small CSV of separable classes, as bytes or written to a path."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def pets_bytes(n: int = 600, seed: int = 0, label: str = "species") -> bytes:
    """A 3-class CSV (header a,b,LABEL,c,d): four float features in about (-3, 6), the classes 1.5 apart on each,
    the label column between them holding class names (bird, cat, dog)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 4)) + 1.5 * y[:, None]
    names = np.array(["bird", "cat", "dog"])[y]
    rows = [f"{a:.3f},{b:.3f},{s},{c:.3f},{d:.3f}" for (a, b, c, d), s in zip(x, names, strict=True)]
    return (f"a,b,{label},c,d\n" + "\n".join(rows) + "\n").encode()


def write_pets(path: Path, n: int = 600, seed: int = 0) -> Path:
    """:func:`pets_bytes` (label column 'species') written to ``path``; the path."""
    path.write_bytes(pets_bytes(n, seed))
    return path
