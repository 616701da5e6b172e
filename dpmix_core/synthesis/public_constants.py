"""Per-feature public z-score constants in a file: what DP-CDA's per-pixel z-score becomes when it is covered.

DP-CDA (Algorithm 1, steps 1-5) z-scores every pixel with the mean and std of the
private training set. Statistics of the private data make every released point
depend on every record, so that release is not covered (``zscore-private``). The
covered reading takes the same per-feature statistics from *public* data of the
same distribution (a public split, another public sample), fixed before the
private data is touched: a data-independent map, like the one-number constants of
:data:`dpmix_core.data.PUBLIC_ZSCORE_CONSTANTS`, that the accountants cover.

A constants file is an ``.npz`` holding ``mean`` and ``std`` (each shape (d,), in the
units of the raw features: 0..255 for uint8 images) and ``source`` (one line: where
the numbers come from). Its identity is :attr:`ZScoreConstants.sha256`, a hash of the
numbers (float64 little-endian mean, then std, after their shape), not of the file's
bytes: the same constants written twice are the same run, wherever the file lies.

Write rule: :func:`write_zscore_constants` writes a temporary beside the target and
renames it into place (:func:`dpmix_core.resources.files.write_files_atomically`), so
a file is never half-written.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpmix_core.data import Dataset, pick_rows
from dpmix_core.mechanisms.mixing import check_zscore_vectors, column_mean, column_std
from dpmix_core.resources.files import write_files_atomically

__all__ = [
    "ZScoreConstants",
    "read_zscore_constants",
    "stored_zscore_constants",
    "test_split_constants_file",
    "write_zscore_constants",
    "zscore_constants_from_bytes",
    "zscore_constants_from_test_split",
]


@dataclass(frozen=True, eq=False)
class ZScoreConstants:
    """Public per-feature mean and std (units of the raw features; std 0 only centres) and where they come from."""

    mean: np.ndarray
    std: np.ndarray
    source: str

    def __post_init__(self) -> None:
        try:
            mean, std = check_zscore_vectors(self.mean, self.std, np.size(self.mean))
        except ValueError as exc:
            raise ValueError(f"z-score constants: {exc}") from None
        if mean.size == 0:
            raise ValueError("z-score constants: mean and std need at least one feature.")
        if not isinstance(self.source, str) or "\n" in self.source:
            raise ValueError(f"z-score constants: source must be one line of text. Found {self.source!r}.")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    @property
    def dim(self) -> int:
        return int(self.mean.size)

    def fitting(self, d: int, where: str) -> ZScoreConstants:
        """These constants if they have d features, else ValueError: "``where`` has D features; the data has d"."""
        if self.dim != d:
            raise ValueError(f"{where} has {self.dim} features; the data has {d}.")
        return self

    @property
    def sha256(self) -> str:
        """SHA-256 of the numbers (their shape, then float64 little-endian mean and std): the constants' identity."""
        h = hashlib.sha256(f"dpmix-zscore-constants v1 d={self.dim}\n".encode())
        h.update(self.mean.astype("<f8").tobytes())
        h.update(self.std.astype("<f8").tobytes())
        return h.hexdigest()


def read_zscore_constants(path: str | os.PathLike, *, sha256: str | None = None) -> ZScoreConstants:
    """The constants in ``path`` (an .npz with mean, std, source); with ``sha256``, they must be those numbers.

    Raises ValueError with one line: no such file, not an .npz with those arrays, bad values, or
    numbers other than ``sha256`` names (the file changed since the run or release was described).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"z-score constants file {str(path)!r} not found.")
    constants = _parse(path, f"z-score constants file {str(path)!r}", f"file {path.name}")
    if sha256 is not None and constants.sha256 != sha256:
        raise ValueError(
            f"z-score constants file {str(path)!r} holds other numbers than the run or release names "
            f"(sha256 {constants.sha256[:12]}..., expected {sha256[:12]}...): the file changed."
        )
    return constants


def zscore_constants_from_bytes(data: bytes, name: str) -> ZScoreConstants:
    """The constants in an uploaded .npz (``name``: the file's name, for messages and a missing ``source``)."""
    return _parse(io.BytesIO(data), f"z-score constants file {name!r}", f"file {name}")


def _parse(source: Path | io.BytesIO, where: str, default_source: str) -> ZScoreConstants:
    if not zipfile.is_zipfile(source):
        raise ValueError(f"{where} is not a readable .npz (arrays mean and std).")
    if isinstance(source, io.BytesIO):
        source.seek(0)
    try:
        with np.load(source, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in ("mean", "std", "source") if key in npz.files}
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:  # ValueError: an object (pickled) array
        raise ValueError(f"{where} is not a readable .npz ({exc}).") from exc
    missing = [key for key in ("mean", "std") if key not in arrays]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)} (it needs arrays mean and std).")
    text = str(arrays["source"]) if "source" in arrays else default_source
    return ZScoreConstants(arrays["mean"], arrays["std"], text)


def stored_zscore_constants(constants: ZScoreConstants, folder: str | os.PathLike) -> Path:
    """``folder``/<sha256>.npz holding ``constants``, written once (content-addressed: never another file's path)."""
    path = Path(folder) / f"{constants.sha256}.npz"
    if path.is_file():
        try:
            if read_zscore_constants(path).sha256 == constants.sha256:
                return path
        except ValueError:
            pass  # a damaged copy: replaced atomically below
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_zscore_constants(path, constants)


def write_zscore_constants(path: str | os.PathLike, constants: ZScoreConstants) -> Path:
    """Write ``constants`` to ``path`` (.npz), atomically; returns the path."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"a z-score constants file ends in .npz. Found {path.name!r}.")

    def write(fh) -> None:
        np.savez(fh, mean=constants.mean, std=constants.std, source=np.array(constants.source))

    write_files_atomically({path: write})
    return path


def zscore_constants_from_test_split(dataset: Dataset, rows: str = "all") -> ZScoreConstants:
    """Per-feature mean and population std of the dataset's *test* split (public; never the training split).

    ``rows`` "even" / "odd" take rows 0, 2, 4, ... / 1, 3, 5, ...: fix the constants on one half and report
    accuracy on the other (a run's ``test_accuracy_halves``), so the reported number never saw them. The
    statistics are the mechanism's own (:func:`~dpmix_core.mechanisms.mixing.column_mean`,
    :func:`~dpmix_core.mechanisms.mixing.column_std`), as ``zscore-private`` computes them on the training split.
    """
    if dataset.x_test is None:
        raise ValueError(f"{dataset.name} has no test split to take public constants from.")
    x = dataset.x_test.reshape(len(dataset.x_test), -1)
    picked = pick_rows(x, rows)
    if len(picked) < 2:
        raise ValueError(f"{dataset.name}'s test split has {len(x)} rows: too few for per-feature statistics.")
    feats = picked.astype(np.float32)
    mean = column_mean(feats)
    std = column_std(feats, mean)
    what = "all rows" if rows == "all" else f"{rows} rows"
    return ZScoreConstants(mean, std, f"{dataset.name} test split, {what} ({len(picked)} of {len(x)} images)")


def test_split_constants_file(dataset: Dataset, rows: str, folder: str | os.PathLike) -> tuple[Path, ZScoreConstants]:
    """The per-feature constants of ``dataset``'s test split at ``rows`` (:func:`zscore_constants_from_test_split`),
    kept under ``folder`` by their sha256 (:func:`stored_zscore_constants`): the file a run's config names."""
    constants = zscore_constants_from_test_split(dataset, rows)
    return stored_zscore_constants(constants, folder), constants
