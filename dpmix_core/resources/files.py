"""Writing a user's files safely: output-path checks, unique temporaries, all-or-nothing replaces.

Rules every writer of user-visible files follows (releases, privacy cards, CSV exports, streamed
release folders):

* output paths are checked before any work is done (:func:`check_new_file`), so a bad path costs
  nothing and writes nothing;
* temporaries are created by the tool itself with unique names in the destination folder
  (``tempfile``), and only those are removed on failure: a path the tool did not create is never
  deleted;
* a group of files (a release and its card) is written to temporaries first and renamed into place
  only when every one was written (:func:`write_files_atomically`);
* finished files get the usual ``0666 & ~umask`` mode (``tempfile`` creates them ``0600``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

__all__ = [
    "check_new_file",
    "check_unused_file",
    "check_sha256",
    "file_mode",
    "make_temp_dir",
    "remove_own_temp",
    "write_files_atomically",
]


def _umask() -> int:
    """The process umask (read from /proc when possible, so no global state is touched)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(*, directory: bool = False) -> int:
    """The mode a new file (0666) or folder (0777) gets under the current umask."""
    return (0o777 if directory else 0o666) & ~_umask()


def check_sha256(name: str, value: object) -> str:
    """``value`` if it is a SHA-256 hex digest (64 lower-case hex digits), else ValueError naming ``name``."""
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise ValueError(f"{name} must be 64 lower-case hex digits. Found {value!r}.")
    return value


def check_new_file(path: str | os.PathLike, *, what: str = "output") -> Path:
    """``path`` can be written as a file: its folder exists and it is not a folder itself.

    Raises ValueError with one line naming the path (checked before any work is done)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a folder; give a file name.")
    if not path.parent.is_dir():
        raise ValueError(f"{what} folder {str(path.parent)!r} does not exist.")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ValueError(f"{what} folder {str(path.parent)!r} is not writable.")
    return path


def check_unused_file(path: str | os.PathLike, *, what: str, holds: str) -> Path:
    """``path`` can be written (:func:`check_new_file`) and nothing is there yet: a file someone edits by hand
    (``holds``: what it may hold) is never replaced. ValueError with one line, before any work."""
    path = check_new_file(path, what=what)
    if path.exists() or path.is_symlink():
        raise ValueError(f"{what} {str(path)!r} exists and may hold {holds}: it is never replaced. Give a new name.")
    return path


def write_files_atomically(payloads: Mapping[Path, bytes | Callable[[IO[bytes]], None]]) -> None:
    """Write every ``path: bytes`` (or ``path: writer(fh)``, for large files written as they are produced)
    to a unique temporary beside it, then rename them all into place.

    Nothing is renamed until every temporary is written; on any failure the temporaries (and only
    they) are removed and no destination is touched. Files get ``0666 & ~umask``."""
    for path in payloads:
        check_new_file(path)
    temps: dict[Path, Path] = {}
    try:
        for path, payload in payloads.items():
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps[path] = Path(name)
            with os.fdopen(fd, "wb") as fh:
                if callable(payload):
                    payload(fh)
                else:
                    fh.write(payload)
            os.chmod(name, file_mode())
        for path, tmp in temps.items():
            os.replace(tmp, path)
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)


def make_temp_dir(final: Path) -> Path:
    """A new, uniquely named folder beside ``final`` (``.NAME.partial-XXXX``) owned by this call."""
    return Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.partial-"))


def remove_own_temp(path: Path) -> None:
    """Remove a temporary file or folder this tool created (never follows a symlink)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
