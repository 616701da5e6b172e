"""Bring your own data: a labelled ``.csv`` or ``.npz`` file, validated cell by cell.

CSV: a header row, one label column (``label_column``, else the column named
"label", else the first column) and numeric feature columns. Rows in messages
are numbered as in a spreadsheet: the header is row 1, the first record row 2.
NPZ: arrays ``x`` (n, ...) numeric and ``y`` (n,) integer labels, read with
``allow_pickle=False``. Labels are remapped to 0..K-1; ``Dataset.label_names``
keeps the original values. Features become float32 (n, d).
"""

from __future__ import annotations

import io
import os
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dpmix_core.data.base import Dataset, DatasetError

__all__ = ["load_user_data"]

MAX_BYTES = 200_000_000
MAX_ROWS = 1_000_000


def _read_limited(file_or_bytes: bytes | BinaryIO | os.PathLike[str], filename: str, max_bytes: int) -> bytes:
    if isinstance(file_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(file_or_bytes)
    elif isinstance(file_or_bytes, os.PathLike):
        with open(file_or_bytes, "rb") as handle:
            data = handle.read(max_bytes + 1)
    else:
        data = file_or_bytes.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise DatasetError(f"{filename} is larger than the limit of {max_bytes:,} bytes.")
    return data


def _first_bad(mask: np.ndarray) -> int | None:
    """Index of the first True in a 1-D mask, or None."""
    return int(np.argmax(mask)) if mask.any() else None


def _integer_labels(values: np.ndarray, where: Callable[[int], str]) -> np.ndarray:
    """int64 labels from finite numbers; ``where(i)`` names record i in the error."""
    if values.dtype.kind == "f":
        i = _first_bad(values != np.rint(values))
        if i is not None:
            raise DatasetError(f"{where(i)}: {values[i]:g} is not an integer label.")
    return values.astype(np.int64)


def _check_finite(matrix: np.ndarray, where: Callable[[int, int], str]) -> None:
    bad = np.argwhere(~np.isfinite(matrix))
    if len(bad):
        i, j = (int(k) for k in bad[0])
        problem = "missing value (empty or NaN)" if np.isnan(matrix[i, j]) else f"{matrix[i, j]} is not a finite number"
        raise DatasetError(f"{where(i, j)}: {problem}.")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_csv(data: bytes, filename: str, label_column: str | None, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd  # only needed for uploads

    try:
        with warnings.catch_warnings():  # pandas only warns when row 2 is longer than the header
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(io.BytesIO(data), nrows=max_rows + 1, skipinitialspace=True, index_col=False)
    except pd.errors.ParserWarning as exc:
        raise DatasetError(f"{filename}: cannot parse as CSV (row 2 has more fields than the header row).") from exc
    except ValueError as exc:  # pandas' ParserError / EmptyDataError, UnicodeDecodeError
        raise DatasetError(f"{filename}: cannot parse as CSV ({exc}).") from exc
    frame.columns = [str(c) for c in frame.columns]
    columns = list(frame.columns)
    if all(_is_number(c) for c in columns):
        raise DatasetError(f"{filename}: the first row looks like data; add a header row naming the columns.")
    label = label_column if label_column is not None else ("label" if "label" in columns else columns[0])
    if label not in columns:
        shown = ", ".join(f"'{c}'" for c in columns[:10]) + (", ..." if len(columns) > 10 else "")
        raise DatasetError(f"{filename}: label column '{label}' not found; the columns are {shown}.")
    if len(columns) < 2:
        raise DatasetError(f"{filename}: no feature columns besides the label column '{label}'.")
    if frame.empty:
        raise DatasetError(f"{filename}: the file has a header but no data rows.")
    if len(frame) > max_rows:
        raise DatasetError(f"{filename}: more than {max_rows:,} rows (max_rows).")
    for name in columns:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            numeric = pd.to_numeric(frame[name], errors="coerce")
            i = _first_bad((numeric.isna() & frame[name].notna()).to_numpy())
            if i is not None:
                kind = "an integer label" if name == label else "a number"
                raise DatasetError(f"{filename}: row {i + 2}, column '{name}': {frame[name].iloc[i]!r} is not {kind}.")
            frame[name] = numeric
    values = frame.to_numpy(dtype=np.float64)
    _check_finite(values, lambda i, j: f"{filename}: row {i + 2}, column '{columns[j]}'")
    y = _integer_labels(values[:, columns.index(label)], lambda i: f"{filename}: row {i + 2}, column '{label}'")
    x = np.delete(values, columns.index(label), axis=1).astype(np.float32)
    return x, y


def _npz_arrays(data: bytes, filename: str) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                return {key: loaded[key] for key in loaded.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:  # ValueError: e.g. pickled object arrays
        raise DatasetError(f"{filename}: not a readable .npz archive ({exc}).") from exc
    raise DatasetError(f"{filename}: holds a single .npy array; save x and y with numpy.savez.")


def _parse_npz(data: bytes, filename: str, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    arrays = _npz_arrays(data, filename)
    if "x" not in arrays or "y" not in arrays:
        raise DatasetError(f"{filename}: needs arrays 'x' and 'y'; found {', '.join(arrays) or 'none'}.")
    x, y = arrays["x"], arrays["y"]
    for key, array in (("x", x), ("y", y)):
        if array.dtype.kind not in "biuf":
            raise DatasetError(f"{filename}: array '{key}' has dtype {array.dtype}; expected numbers.")
    if x.ndim < 2 or y.ndim != 1 or len(x) != len(y):
        raise DatasetError(f"{filename}: need x of shape (n, d...) and y of shape (n,); found {x.shape}, {y.shape}.")
    if len(y) == 0:
        raise DatasetError(f"{filename}: the arrays hold no records.")
    if len(y) > max_rows:
        raise DatasetError(f"{filename}: {len(y):,} records, more than {max_rows:,} (max_rows).")
    features = x.reshape(len(x), -1)
    _check_finite(features, lambda i, j: f"{filename}: x row {i}, column {j}")
    _check_finite(y[:, None], lambda i, j: f"{filename}: y[{i}]")
    return features.astype(np.float32), _integer_labels(y, lambda i: f"{filename}: y[{i}]")


def load_user_data(
    file_or_bytes: bytes | BinaryIO | os.PathLike[str],
    filename: str,
    *,
    label_column: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_rows: int = MAX_ROWS,
) -> Dataset:
    """Parse and validate an uploaded ``.csv`` or ``.npz`` (chosen by ``filename``'s suffix).

    Raises :class:`DatasetError` (a ValueError) naming the offending row/column.
    """
    data = _read_limited(file_or_bytes, filename, max_bytes)
    if not data or data.isspace():
        raise DatasetError(f"{filename}: the file is empty.")
    suffix = Path(filename).suffix.lower()
    if suffix == ".csv":
        x, y = _parse_csv(data, filename, label_column, max_rows)
    elif suffix == ".npz":
        x, y = _parse_npz(data, filename, max_rows)
    else:
        raise DatasetError(f"{filename}: unsupported file type '{suffix}'; upload a .csv or .npz file.")
    originals, codes = np.unique(y, return_inverse=True)
    if len(originals) < 2:
        raise DatasetError(f"{filename}: every record has label {originals[0]}; at least 2 classes are needed.")
    return Dataset(
        name=Path(filename).stem,
        x_train=x,
        y_train=codes.astype(np.int64),
        x_test=None,
        y_test=None,
        num_classes=len(originals),
        source=f"uploaded file {filename} ({len(y):,} records, {x.shape[1]:,} features)",
        label_names=tuple(str(v) for v in originals),
    )
