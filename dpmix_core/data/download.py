"""Verified, atomic downloads of the official dataset files.

Each file is streamed to a temporary file in the destination folder, its
SHA-256 is checked against the mirror table, and only then is it moved into
place with :func:`os.replace`, so the cache never holds a partial or
unverified file. Network failures surface as :class:`OSError` (``URLError``,
timeouts) or :class:`http.client.HTTPException`; the caller words them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dpmix_core.data.base import ChecksumMismatchError

__all__ = ["Progress", "RemoteFile", "Mirror", "fetch_files"]

Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``, called as a download advances."""

TIMEOUT_S = 30.0
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One official file: its name on the mirror, SHA-256 and size in bytes."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Mirror:
    """Where a dataset's official files can be downloaded (``base_url + name``)."""

    base_url: str
    files: tuple[RemoteFile, ...]


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: report nothing."""


def _fetch_one(url: str, dest: Path, sha256: str, progress: Progress, offset: int, total: int) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            done = 0
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                progress(offset + done, total)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ChecksumMismatchError(
                f"{url} has SHA-256 {digest.hexdigest()}, expected {sha256}; the download was discarded."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_files(files: Sequence[RemoteFile], base_url: str, dest_dir: Path, progress: Progress | None = None) -> None:
    """Download those of ``files`` that are not yet in ``dest_dir``, verifying each SHA-256.

    ``progress(done, total)`` counts bytes over all missing files (total from the table).
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    missing = [f for f in files if not (dest_dir / f.name).is_file()]
    total = sum(f.size for f in missing)
    offset = 0
    for remote in missing:
        url = f"{base_url.rstrip('/')}/{remote.name}"
        _fetch_one(url, dest_dir / remote.name, remote.sha256, progress or _no_progress, offset, total)
        offset += remote.size
