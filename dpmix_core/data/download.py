"""Verified, atomic downloads of the official dataset files.

Each file is streamed to a temporary file in the destination folder, its
SHA-256 is checked against the mirror table, and only then is it moved into
place with :func:`os.replace`, so the cache never holds a partial or
unverified file. Network failures surface as :class:`OSError` (``URLError``,
timeouts) or :class:`http.client.HTTPException`; the caller words them.

Limits (:class:`DownloadLimits`): a download stops as soon as the server sends
more than the expected size (:class:`~dpmix_core.data.base.ChecksumMismatchError`),
when it exceeds a total deadline, or when, after a grace period, it runs slower
than a minimum rate (``TimeoutError``). On any failure the temporary file is
removed, and so is a destination folder this call created if it is left empty;
``.part`` files left by a killed earlier download (older than the deadline) are
removed before a new one starts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dpmix_core.data.base import ChecksumMismatchError

__all__ = ["DownloadLimits", "Progress", "RemoteFile", "Mirror", "fetch_files"]

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


@dataclass(frozen=True)
class DownloadLimits:
    """How long a download may take: ``timeout_s`` per network read, ``deadline_s`` in total per file,
    and at least ``min_rate`` bytes/s on average once ``grace_s`` seconds have passed."""

    timeout_s: float = TIMEOUT_S
    deadline_s: float = 3600.0
    min_rate: float = 16_384.0
    grace_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "deadline_s", "grace_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive. Found {getattr(self, name)!r}.")
        if not self.min_rate >= 0:
            raise ValueError(f"min_rate must be >= 0. Found {self.min_rate!r}.")


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: report nothing."""


def _check_pace(url: str, done: int, started: float, limits: DownloadLimits) -> None:
    elapsed = time.monotonic() - started
    if elapsed > limits.deadline_s:
        raise TimeoutError(f"{url}: the download took longer than {limits.deadline_s:g} s and was abandoned.")
    if elapsed > limits.grace_s and done < limits.min_rate * elapsed:
        raise TimeoutError(
            f"{url}: the server sends {done / elapsed:,.0f} bytes/s, below the minimum of "
            f"{limits.min_rate:,.0f}; the download was abandoned."
        )


def _fetch_one(
    url: str,
    dest: Path,
    sha256: str,
    progress: Progress,
    offset: int,
    total: int,
    size: int | None = None,
    limits: DownloadLimits = DownloadLimits(),
) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        started = time.monotonic()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=limits.timeout_s) as response:
            done = 0
            while chunk := response.read1(_CHUNK):  # what has arrived: a trickle never blocks for long
                done += len(chunk)
                if size is not None and done > size:
                    raise ChecksumMismatchError(
                        f"{url} sent more than the expected {size:,} bytes; the download was discarded."
                    )
                out.write(chunk)
                digest.update(chunk)
                progress(offset + done, total)
                _check_pace(url, done, started, limits)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ChecksumMismatchError(
                f"{url} has SHA-256 {digest.hexdigest()}, expected {sha256}; the download was discarded."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _remove_stale_parts(dest_dir: Path, names: Sequence[str], older_than_s: float) -> None:
    """``.NAME.*.part`` files of a download killed earlier (this module's own temporaries)."""
    now = time.time()
    for name in names:
        for part in dest_dir.glob(f".{name}.*.part"):
            try:
                if part.is_file() and not part.is_symlink() and now - part.stat().st_mtime > older_than_s:
                    part.unlink()
            except OSError:
                pass


def _make_dirs(folder: Path) -> list[Path]:
    """mkdir -p, returning the folders it created (deepest last)."""
    created = []
    for parent in reversed([folder, *folder.parents]):
        if not parent.exists():
            parent.mkdir()
            created.append(parent)
    return created


def fetch_files(
    files: Sequence[RemoteFile],
    base_url: str,
    dest_dir: Path,
    progress: Progress | None = None,
    limits: DownloadLimits | None = None,
) -> None:
    """Download those of ``files`` that are not yet in ``dest_dir``, verifying each SHA-256.

    ``progress(done, total)`` counts bytes over all missing files (total from the table).
    On failure, folders this call created are removed again if they are empty.
    """
    limits = limits or DownloadLimits()
    created = _make_dirs(dest_dir)
    try:
        _remove_stale_parts(dest_dir, [f.name for f in files], limits.deadline_s)
        missing = [f for f in files if not (dest_dir / f.name).is_file()]
        total = sum(f.size for f in missing)
        offset = 0
        for remote in missing:
            url = f"{base_url.rstrip('/')}/{remote.name}"
            _fetch_one(
                url,
                dest_dir / remote.name,
                remote.sha256,
                progress or _no_progress,
                offset,
                total,
                size=remote.size,
                limits=limits,
            )
            offset += remote.size
    except BaseException:
        for folder in reversed(created):
            try:
                folder.rmdir()  # only if empty: a file that arrived stays
            except OSError:
                break
        raise
