"""Decoded copies of the official dataset files, so a second load skips the decompression.

Inflating the keras ``mnist.npz`` (or the IDX ``.gz`` files) costs 0.3-0.4 s on a laptop
core on every command; the decoded arrays, kept as plain ``.npy`` files in
``<cache>/decoded/<dataset>-<stamp>/``, are memory-mapped in a few milliseconds.

The stamp hashes the source files' resolved paths, sizes and modification times, so a
changed or replaced source is decoded again. Copies are written to a temporary folder
and renamed, so a reader never sees half a copy; failing to write one (read-only or full
cache) is not an error, the decoded arrays are simply returned. Nothing here is
security-relevant: the cache holds what the user's own files decode to.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dpmix_core.data.formats import Splits

__all__ = ["DECODED_DIR", "load_decoded", "read_through", "save_decoded", "source_stamp"]

DECODED_DIR = "decoded"


def source_stamp(paths: Sequence[Path]) -> str:
    """A short hash of the files' resolved paths, sizes and modification times (OSError if one is missing)."""
    parts = []
    for path in paths:
        st = path.stat()
        parts.append(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def load_decoded(folder: Path) -> Splits | None:
    """The four arrays of a decoded copy, memory-mapped read-only; None if the copy is absent or unreadable."""
    try:
        arrays = [
            np.asarray(np.load(folder / f"{key}.npy", mmap_mode="r", allow_pickle=False)) for key in Splits._fields
        ]
    except (OSError, ValueError):
        return None
    return Splits(*arrays)


def save_decoded(folder: Path, splits: Splits) -> bool:
    """Write ``splits`` as ``folder/<field>.npy`` atomically (temporary folder, then rename); False if it failed."""
    tmp = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
        for key, array in zip(Splits._fields, splits):
            np.save(tmp / f"{key}.npy", np.ascontiguousarray(array), allow_pickle=False)
        os.replace(tmp, folder)
        return True
    except OSError:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return False


def read_through(cache: Path, name: str, sources: Sequence[Path], read: Callable[[], Splits]) -> Splits:
    """``read()``'s arrays via the decoded copy under ``cache`` for these ``sources`` (decoding and saving once)."""
    try:
        folder = cache / DECODED_DIR / f"{name}-{source_stamp(sources)}"
    except OSError:
        return read()
    found = load_decoded(folder)
    if found is not None:
        return found
    splits = read()
    save_decoded(folder, splits)
    return splits
