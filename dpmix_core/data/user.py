"""Bring your own data: a labelled ``.csv`` or ``.npz`` file, validated cell by cell.

CSV: a header row, one label column (``label_column``, else the first column
named as :data:`LABEL_COLUMN_NAMES` lists, "label", "class", "target", ...,
else the first column) and numeric feature columns (their headers become
``Dataset.feature_names``). Labels are integers or class names ("cat",
"dog"), one kind throughout. Rows in messages are numbered as in a spreadsheet:
the header is row 1, the first record row 2.
NPZ: arrays ``x`` (n, ...) numeric and ``y`` (n,) integer labels or class-name
strings, read with ``allow_pickle=False``; uint8 images (n, H, W) or
(n, H, W, 3) keep their shape and type, as the built-in datasets do.
Labels are remapped to 0..K-1 in sorted order; ``Dataset.label_names`` keeps
the original values (a release's card lists them, so its label columns can be
read). Other features become float32 (n, d).

An upload has no test split. To score a model trained on a release of it,
:func:`held_out_split` sets aside a stratified share of its records as the
test split (the same rows for every run seed, :data:`SPLIT_SEED`): they are
never mixed nor released, so the release's epsilon covers the other records
and the accuracy read on them is an ordinary, non-private statistic of theirs.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dpmix_core.data.base import Dataset, DatasetError
from dpmix_core.data.categories import Categories, category_feature
from dpmix_core.data.embedded import stratified_split
from dpmix_core.data.formats import read_npz
from dpmix_core.privacy.checks import FeatureRange, feature_range_vectors

__all__ = [
    "BOUNDS_FILL_WARNING",
    "LABEL_COLUMN_NAMES",
    "OWN_DATA",
    "SPLIT_SEED",
    "bounds_fit_note",
    "csv_columns",
    "default_label_column",
    "found_categories",
    "held_out_split",
    "load_user_data",
    "read_data_file",
    "suggested_label_column",
]

OWN_DATA = "file"  # a run's dataset name when it trains on a user's file (RunConfig.data_file)
SPLIT_SEED = 0  # the held-out split's seed: a file's test rows do not change with the run's seed

# below this median share of the bounds' width filled by a feature, bounds_fit_note speaks up: at bounds (-5, 10)
# a 3-class CSV's features (about -3..6) fill 60 % and DP-SGD at eps 8 reads 86.0 % (raw 90.1 %); at (-50, 100) they
# fill 6 % and it reads 33.1 %, the constant predictor
BOUNDS_FILL_WARNING = 0.25
UNITS_SPREAD = 10  # a column filling 10x the median's width: columns in different units, bounds per column help

MAX_BYTES = 200_000_000
MAX_ROWS = 1_000_000
MAX_COLUMNS = 100_000  # a CSV header with more fields is refused before parsing
MAX_CELLS = 50_000_000  # rows x columns (CSV) or records x features (npz): 200 MB as float32
MAX_DECOMPRESSED = 400_000_000  # bytes the arrays of an .npz may declare, checked before reading them
FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_EXACT_LABEL = 2**53  # larger float labels are not distinct integers (1e20 == 1e20 + 1)


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
    """int64 labels from finite numbers that are integers and fit (floats: |v| <= 2**53, where every
    integer is distinct; unsigned: <= int64 max); ``where(i)`` names record i in the error."""
    if values.dtype.kind == "f":
        i = _first_bad(values != np.rint(values))
        if i is not None:
            raise DatasetError(f"{where(i)}: {values[i]:g} is not an integer label.")
        i = _first_bad(np.abs(values) > MAX_EXACT_LABEL)
        if i is not None:
            raise DatasetError(
                f"{where(i)}: label {values[i]:g} is too large to be told apart from its neighbours; "
                f"use integer labels of at most {MAX_EXACT_LABEL:,} in magnitude."
            )
    elif values.dtype.kind == "u":
        i = _first_bad(values > np.iinfo(np.int64).max)
        if i is not None:
            raise DatasetError(f"{where(i)}: label {int(values[i])} does not fit in a 64-bit signed integer.")
    elif values.dtype.kind == "b":
        values = values.astype(np.int64)
    return values.astype(np.int64)


def _check_float32_range(matrix: np.ndarray, where: Callable[[int, int], str]) -> None:
    """Finite values beyond the float32 range would silently become infinite features."""
    if matrix.dtype.kind != "f" or matrix.dtype.itemsize <= 4:
        return
    bad = np.argwhere(np.abs(matrix) > FLOAT32_MAX)
    if len(bad):
        i, j = (int(k) for k in bad[0])
        raise DatasetError(
            f"{where(i, j)}: {matrix[i, j]:g} is beyond the float32 range (|x| <= {FLOAT32_MAX:.3g}); "
            "rescale the features."
        )


def _check_csv_shape(data: bytes, filename: str, max_rows: int) -> None:
    """Bound the columns (counted in the header line) and the cells before pandas parses anything."""
    header = data.split(b"\n", 1)[0]
    columns = header.count(b",") + 1
    if columns > MAX_COLUMNS:
        raise DatasetError(f"{filename}: {columns:,} columns, more than the limit of {MAX_COLUMNS:,}.")
    rows = min(data.count(b"\n"), max_rows + 1)
    if rows * columns > MAX_CELLS:
        raise DatasetError(
            f"{filename}: about {rows:,} rows x {columns:,} columns, more than the limit of "
            f"{MAX_CELLS:,} cells; upload fewer rows or features."
        )


def csv_columns(data: bytes) -> list[str]:
    """The column names of a CSV's header row, read as :func:`load_user_data` reads them (to pick the label column
    from); [] when the header cannot be read (load_user_data then says why)."""
    import pandas as pd

    header = data[: 1 << 20].split(b"\n", 1)[0]
    if header.count(b",") + 1 > MAX_COLUMNS:
        return []
    try:
        frame = pd.read_csv(io.BytesIO(header), nrows=0, skipinitialspace=True, index_col=False)
    except ValueError:  # pandas' EmptyDataError / ParserError, UnicodeDecodeError
        return []
    return [str(c) for c in frame.columns]


def found_categories(data: bytes, filename: str, label_column: str | None = None) -> Categories:
    """The words each text column of a CSV holds, sorted (its label column aside): what its records are, for the
    data's holder to check against what is public before passing the list as categories (never released). A column
    with one word is listed as it is (a categories file refuses it: one category is no feature). Numeric columns are
    told apart by pandas' parser; only the others are read again as words ("NA" a word, not a missing value)."""
    import pandas as pd

    _check_csv_shape(data, filename, MAX_ROWS)
    try:
        frame = pd.read_csv(io.BytesIO(data), skipinitialspace=True, index_col=False, nrows=MAX_ROWS)
    except ValueError as exc:
        raise DatasetError(f"{filename}: cannot parse as CSV ({exc}).") from exc
    columns = [str(c) for c in frame.columns]
    label = label_column if label_column is not None else (default_label_column(columns) or "")
    if label not in columns:
        raise DatasetError(f"{filename}: label column '{label}' not found.")
    texts = [
        j
        for j, (name, column) in enumerate(zip(columns, frame.columns, strict=True))
        if name != label and not pd.api.types.is_numeric_dtype(frame[column])
    ]
    if not texts:
        return ()
    words_of = pd.read_csv(
        io.BytesIO(data), usecols=texts, dtype=str, keep_default_na=False, skipinitialspace=True, nrows=MAX_ROWS
    )
    out = []
    for j, column in zip(texts, words_of.columns, strict=True):
        words = set(words_of[column].str.strip().unique()) - {""}
        if any(not _is_number(w) for w in words):
            out.append((columns[j], tuple(sorted(words))))
    return tuple(out)


LABEL_COLUMN_NAMES = ("label", "labels", "class", "target", "y")  # what a labels column is commonly called


def default_label_column(columns: list[str]) -> str | None:
    """The label column :func:`load_user_data` takes when none is named: the first of :data:`LABEL_COLUMN_NAMES`
    among ``columns`` (case aside), else the first column."""
    lowered = {column.strip().lower(): column for column in reversed(columns)}  # the first of equal names wins
    named = next((lowered[name] for name in LABEL_COLUMN_NAMES if name in lowered), None)
    return named if named is not None else (columns[0] if columns else None)


LABEL_SNIFF_ROWS = 2000  # rows suggested_label_column reads: enough to tell a class column from a measurement
MAX_SUGGESTED_CLASSES = 50  # a column with more distinct values is not suggested as the label


def suggested_label_column(data: bytes) -> str | None:
    """The label column a page preselects for a CSV (the user confirms or changes it; nothing is read into a run by
    it): :func:`default_label_column`'s named column where the header has one; else the last column that reads like
    classes in its first :data:`LABEL_SNIFF_ROWS` rows (words or integers, 2 to :data:`MAX_SUGGESTED_CLASSES`
    distinct values); else the first column. None when the header cannot be read."""
    import pandas as pd

    columns = csv_columns(data)
    if not columns:
        return None
    if {c.strip().lower() for c in columns} & set(LABEL_COLUMN_NAMES):
        return default_label_column(columns)
    try:
        with warnings.catch_warnings():  # a ragged row is load_user_data's to report, not this guess's
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            frame = pd.read_csv(io.BytesIO(data), skipinitialspace=True, index_col=False, nrows=LABEL_SNIFF_ROWS)
    except ValueError:  # pandas' EmptyDataError / ParserError, UnicodeDecodeError: load_user_data will say why
        return columns[0]

    def classes(j: int) -> bool:  # by position: a repeated or ragged header must not break the guess
        values = frame.iloc[:, j].dropna()
        return values.dtype.kind in "Oiu" and 2 <= values.nunique() <= MAX_SUGGESTED_CLASSES

    found = [j for j in range(min(len(columns), frame.shape[1])) if classes(j)]
    return columns[found[-1]] if found else columns[0]  # the last: a table's class is usually its last column


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


def _parse_csv(
    data: bytes, filename: str, label_column: str | None, max_rows: int, categories: Categories = ()
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
    """Features (n, d) float32, labels (n,) (int64, or str class names when no label is a number), the
    feature columns' names and the label column's. A column of ``categories`` becomes its one-hot features
    (:mod:`dpmix_core.data.categories`), where the column stood."""
    import pandas as pd  # only needed for uploads

    _check_csv_shape(data, filename, max_rows)
    coded = dict(categories)
    try:
        with warnings.catch_warnings():  # pandas only warns when row 2 is longer than the header
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                io.BytesIO(data),
                nrows=max_rows + 1,
                skipinitialspace=True,
                index_col=False,
                dtype=dict.fromkeys(coded, str) or None,
                keep_default_na=not coded,
                na_values=[""] if coded else None,
            )
    except pd.errors.ParserWarning as exc:
        raise DatasetError(f"{filename}: cannot parse as CSV (row 2 has more fields than the header row).") from exc
    except ValueError as exc:  # pandas' ParserError / EmptyDataError, UnicodeDecodeError
        raise DatasetError(f"{filename}: cannot parse as CSV ({exc}).") from exc
    frame.columns = [str(c) for c in frame.columns]
    columns = list(frame.columns)
    if all(_is_number(c) for c in columns):
        raise DatasetError(f"{filename}: the first row looks like data; add a header row naming the columns.")
    label = label_column if label_column is not None else (default_label_column(columns) or "")
    if label not in columns:
        shown = ", ".join(f"'{c}'" for c in columns[:10]) + (", ..." if len(columns) > 10 else "")
        raise DatasetError(f"{filename}: label column '{label}' not found; the columns are {shown}.")
    _check_coded_columns(coded, columns, label, filename)
    if len(columns) < 2:
        raise DatasetError(f"{filename}: no feature columns besides the label column '{label}'.")
    if frame.empty:
        raise DatasetError(f"{filename}: the file has a header but no data rows.")
    if len(frame) > max_rows:
        raise DatasetError(f"{filename}: more than {max_rows:,} rows (max_rows).")
    names = _class_names(frame[label], filename, label)
    if names is not None:
        frame[label] = 0  # class names: the label column takes no part in the numeric checks below
    numeric = [c for c in columns if c not in coded]
    for name in numeric:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            as_numbers = pd.to_numeric(frame[name], errors="coerce")
            i = _first_bad((as_numbers.isna() & frame[name].notna()).to_numpy())
            if i is not None:
                words = as_numbers.isna().all()
                words_hint = (
                    " If it is a feature of words, give its public categories (CLI: --categories FILE.csv, header "
                    f"column,category; categories-template --data-file {Path(filename).name} writes one to check)."
                )
                hint = (  # a column of words read as features: most likely the labels, under another column
                    f" The labels were read from column '{label}'; if '{name}' holds them, choose it as the label "
                    f"column (CLI: --label-column {name}).{words_hint}"
                    if label_column is None and words
                    else words_hint
                    if words
                    else ""
                )
                raise DatasetError(
                    f"{filename}: row {i + 2}, column '{name}': {frame[name].iloc[i]!r} is not a number.{hint}"
                )
            frame[name] = as_numbers
    raw_labels = frame[label].to_numpy()
    values = frame[numeric].to_numpy(dtype=np.float64)
    cell = lambda i, j: f"{filename}: row {i + 2}, column '{numeric[j]}'"  # noqa: E731
    _check_finite(values, cell)
    _check_float32_range(values, cell)
    y = (
        names
        if names is not None
        else _integer_labels(
            raw_labels if raw_labels.dtype.kind in "iu" else values[:, numeric.index(label)],
            lambda i: f"{filename}: row {i + 2}, column '{label}'",
        )
    )
    if not coded:
        x = np.delete(values, numeric.index(label), axis=1).astype(np.float32)
        return x, y, tuple(c for c in columns if c != label), label
    at = {name: j for j, name in enumerate(numeric)}
    blocks: list[np.ndarray] = []
    feature_names: list[str] = []
    for name in columns:
        if name == label:
            continue
        if name in coded:
            blocks.append(_one_hot(frame[name], coded[name], filename, name))
            feature_names += [category_feature(name, c) for c in coded[name]]
        else:
            blocks.append(values[:, at[name], None])
            feature_names.append(name)
    return np.hstack(blocks).astype(np.float32), y, tuple(feature_names), label


def _check_coded_columns(coded: dict[str, tuple[str, ...]], columns: list[str], label: str, filename: str) -> None:
    """Every column with public categories is a feature column of the file."""
    for name in coded:
        if name == label:
            raise DatasetError(f"{filename}: '{name}' is the label column; its classes need no categories.")
        if name not in columns:
            shown = ", ".join(f"'{c}'" for c in columns[:10]) + (", ..." if len(columns) > 10 else "")
            raise DatasetError(
                f"{filename}: categories are given for '{name}', which it lacks; its columns are {shown}."
            )


def _one_hot(column, categories: tuple[str, ...], filename: str, name: str) -> np.ndarray:
    """(n, len(categories)) 0/1: each record's word in ``column`` as a one-hot row; a missing word or one not in
    ``categories`` is refused in one line."""
    words = column.to_numpy(dtype=object)
    i = _first_bad(np.array([not isinstance(w, str) or not w.strip() for w in words], dtype=bool))
    if i is not None:
        raise DatasetError(f"{filename}: row {i + 2}, column '{name}': missing category (empty).")
    index = {c: k for k, c in enumerate(categories)}
    codes = np.array([index.get(w.strip(), -1) for w in words], dtype=np.int64)
    i = _first_bad(codes < 0)
    if i is not None:
        shown = ", ".join(categories[:8]) + (", ..." if len(categories) > 8 else "")
        raise DatasetError(
            f"{filename}: row {i + 2}, column '{name}': {words[i].strip()!r} is not one of its public categories "
            f"({shown}); add it to the categories if it is public, or merge it into one that is."
        )
    out = np.zeros((len(words), len(categories)), dtype=np.float32)
    out[np.arange(len(words)), codes] = 1.0
    return out


def _class_names(column, filename: str, label: str) -> np.ndarray | None:
    """The label column's class names (str array) when no label in it is a number; None when every label is one
    (integer labels, checked by the caller). A column mixing the two, a missing label, or a different name for every
    record (an identifier column, not a label) are refused."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(column):
        return None
    text = (pd.to_numeric(column, errors="coerce").isna() & column.notna()).to_numpy()
    if not text.any():
        return None
    where = lambda i: f"{filename}: row {i + 2}, column '{label}'"  # noqa: E731
    i = _first_bad(column.isna().to_numpy())
    if i is not None:
        raise DatasetError(f"{where(i)}: missing label (empty).")
    j = _first_bad(~text)
    if j is not None:
        k = int(np.argmax(text))
        raise DatasetError(
            f"{where(k)}: {column.iloc[k]!r} is not an integer label, but row {j + 2} holds the number "
            f"{column.iloc[j]!r}; use class names or integer labels throughout."
        )
    names = np.array([str(v).strip() for v in column], dtype=str)
    if len(names) > 2 and len(np.unique(names)) == len(names):
        raise DatasetError(
            f"{filename}: column '{label}' holds a different name in each of its {len(names):,} records: an "
            "identifier, not a class label; name the column that holds the labels (--label-column, or the "
            "Label column picker)."
        )
    return names


def _npz_arrays(data: bytes, filename: str, max_decompressed: int = MAX_DECOMPRESSED) -> dict[str, np.ndarray]:
    """Arrays ``x`` and ``y`` of an uploaded .npz (only the member names when one is missing: the
    caller names it), read through :func:`~dpmix_core.data.formats.read_npz` (bounded, never unpickled)."""
    arrays, members = read_npz(
        data, filename, ("x", "y"), max_decompressed=max_decompressed, what_to_do="upload fewer records or features"
    )
    return arrays if len(arrays) == 2 else {key: np.empty(0) for key in members}


def _parse_npz(data: bytes, filename: str, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    arrays = _npz_arrays(data, filename)
    if "x" not in arrays or "y" not in arrays:
        raise DatasetError(f"{filename}: needs arrays 'x' and 'y'; found {', '.join(arrays) or 'none'}.")
    x, y = arrays["x"], arrays["y"]
    if x.dtype.kind not in "biuf":
        raise DatasetError(f"{filename}: array 'x' has dtype {x.dtype}; expected numbers.")
    if y.dtype.kind not in "biufU":
        raise DatasetError(f"{filename}: array 'y' has dtype {y.dtype}; expected integer labels or class-name strings.")
    if x.ndim >= 1 and len(x) and math.prod(x.shape) > MAX_CELLS:
        raise DatasetError(f"{filename}: x holds {math.prod(x.shape):,} values, more than the limit of {MAX_CELLS:,}.")
    if x.ndim < 2 or y.ndim != 1 or len(x) != len(y):
        raise DatasetError(f"{filename}: need x of shape (n, d...) and y of shape (n,); found {x.shape}, {y.shape}.")
    if len(y) == 0:
        raise DatasetError(f"{filename}: the arrays hold no records.")
    if len(y) > max_rows:
        raise DatasetError(f"{filename}: {len(y):,} records, more than {max_rows:,} (max_rows).")
    features = x.reshape(len(x), -1)
    _check_finite(features, lambda i, j: f"{filename}: x row {i}, column {j}")
    _check_float32_range(features, lambda i, j: f"{filename}: x row {i}, column {j}")
    records = x if _is_uint8_image(x) else features.astype(np.float32)
    if y.dtype.kind == "U":  # class names
        i = _first_bad(np.char.strip(y) == "")
        if i is not None:
            raise DatasetError(f"{filename}: y[{i}]: empty class name.")
        return records, y
    _check_finite(y[:, None], lambda i, j: f"{filename}: y[{i}]")
    return records, _integer_labels(y, lambda i: f"{filename}: y[{i}]")


def _is_uint8_image(x: np.ndarray) -> bool:
    """uint8 records of shape (n, H, W) or (n, H, W, 3): images, kept as the built-in datasets keep theirs (pixels
    0..255 by their type, so no bounds to state; previewed as images)."""
    return x.dtype == np.uint8 and (x.ndim == 3 or (x.ndim == 4 and x.shape[-1] == 3))


def read_data_file(path: str | os.PathLike[str], sha256: str | None = None) -> bytes:
    """A data file's bytes for a run or a background job that chose it earlier; DatasetError with one line when it
    cannot be read, is over :data:`MAX_BYTES`, or (``sha256`` given) its bytes are no longer those it was chosen
    with (a run on edited data would not be the run that was defined)."""
    try:
        data = _read_limited(Path(path), str(path), MAX_BYTES)
    except OSError as exc:
        raise DatasetError(f"cannot read the data file {str(path)!r}: {exc.strerror or exc}.") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise DatasetError(
            f"{path} has changed since this run was defined (its SHA-256 is no longer {sha256[:12]}...); "
            "define the run again on the file as it is now."
        )
    return data


def load_user_data(
    file_or_bytes: bytes | BinaryIO | os.PathLike[str],
    filename: str,
    *,
    label_column: str | None = None,
    categories: Categories = (),
    max_bytes: int = MAX_BYTES,
    max_rows: int = MAX_ROWS,
) -> Dataset:
    """Parse and validate an uploaded ``.csv`` or ``.npz`` (chosen by ``filename``'s suffix).

    ``categories``: the public categories of a CSV's text columns (:mod:`dpmix_core.data.categories`), each such
    column read as its one-hot features. Raises :class:`DatasetError` (a ValueError) naming the offending row/column.
    """
    data = _read_limited(file_or_bytes, filename, max_bytes)
    if not data or data.isspace():
        raise DatasetError(f"{filename}: the file is empty.")
    suffix = Path(filename).suffix.lower()
    feature_names: tuple[str, ...] = ()
    label = ""
    if suffix == ".csv":
        x, y, feature_names, label = _parse_csv(data, filename, label_column, max_rows, categories)
    elif suffix == ".npz":
        if categories:
            raise DatasetError(f"{filename}: categories name the text columns of a CSV; an .npz holds numbers only.")
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
        source=f"uploaded file {filename} ({len(y):,} records, {_shape_words(x)})",
        label_names=tuple(str(v) for v in originals),
        feature_names=feature_names,
        label_column=label,
        categories=categories,
    )


def _shape_words(x: np.ndarray) -> str:
    if _is_uint8_image(x):
        return "×".join(str(s) for s in x.shape[1:]) + " uint8 images"
    return f"{x.shape[1]:,} features"


def held_out_split(dataset: Dataset, test_fraction: float, *, seed: int = SPLIT_SEED) -> Dataset:
    """``dataset`` (an upload: no test split) with round(test_fraction x size) records of each class held out as its
    test split, chosen with ``seed``; the rest stay the training split a release mixes.

    Raises :class:`DatasetError` (one line) for a fraction outside (0, 1), a dataset that has a test split already,
    a split that holds out no record, or one that leaves fewer than 2 classes to train on.
    """
    if not (isinstance(test_fraction, (int, float)) and 0 < test_fraction < 1):
        raise DatasetError(f"the test fraction must be between 0 and 1 (e.g. 0.2). Found {test_fraction!r}.")
    if dataset.x_test is not None:
        raise DatasetError(f"{dataset.name} has a test split already; only an upload is split.")
    train, test = stratified_split(dataset.y_train, float(test_fraction), seed)
    if len(test) == 0:
        raise DatasetError(
            f"a test fraction of {test_fraction:g} holds out no record of {dataset.name} ({dataset.n_train:,} records, "
            f"{dataset.num_classes} classes): raise it."
        )
    if len(np.unique(dataset.y_train[train])) < 2:
        raise DatasetError(
            f"a test fraction of {test_fraction:g} leaves fewer than 2 classes of {dataset.name} to train on: lower it."
        )
    return Dataset(
        name=dataset.name,
        x_train=dataset.x_train[train],
        y_train=dataset.y_train[train],
        x_test=dataset.x_train[test],
        y_test=dataset.y_train[test],
        num_classes=dataset.num_classes,
        source=(
            f"{dataset.source}; stratified {len(train):,} train / {len(test):,} held-out test records "
            f"(test fraction {test_fraction:g}, seed {seed}; the test records are never released)"
        ),
        label_names=dataset.label_names,
        feature_names=dataset.feature_names,
        label_column=dataset.label_column,
        categories=dataset.categories,
    )


def bounds_fit_note(x: np.ndarray, feature_range: FeatureRange, feature_names: tuple[str, ...] = ()) -> str | None:
    """A sentence for the data holder when public bounds fit their float features badly, else None.

    It reads the private records, so it is for whoever holds them (a page or the CLI beside the bounds they typed),
    never part of a release or its card. It speaks when values lie outside the bounds (clipped to them) or when the
    median feature fills less than :data:`BOUNDS_FILL_WARNING` of the bounds' width: every private method is
    calibrated to the whole width (a record may lie anywhere in it), so features in a sliver of it carry little
    signal through the noise (DP-SGD, which may read no statistic of its records, most of all). With bounds per
    feature it names the feature clipped most and the one that fills least (``feature_names``, else its index).
    """
    records = np.asarray(x)
    if records.size == 0:
        return None
    flat = records.reshape(len(records), -1)
    try:
        lo, hi = feature_range_vectors(feature_range, flat.shape[1])
    except ValueError:
        return None  # bounds that do not fit the data are refused, one line, by whatever uses them
    per_feature = not (np.all(lo == lo[0]) and np.all(hi == hi[0]))
    where = "their bounds" if per_feature else f"the bounds ({lo[0]:g}, {hi[0]:g})"
    width = "their bounds' width" if per_feature else f"the bounds' width ({lo[0]:g}, {hi[0]:g})"

    def name(j: int) -> str:
        return repr(feature_names[j]) if len(feature_names) == flat.shape[1] else f"feature {j}"

    clipped = np.count_nonzero((flat < lo) | (flat > hi), axis=0)
    outside = int(clipped.sum())
    low = np.minimum(np.maximum(flat.min(axis=0), lo), hi)
    high = np.maximum(np.minimum(flat.max(axis=0), hi), lo)
    fills = (high - low) / (hi - lo)
    fill = float(np.median(fills))
    notes = []
    if outside:
        most = int(np.argmax(clipped))
        worst = f" ({name(most)} most: {int(clipped[most]):,})" if per_feature else ""
        notes.append(
            f"{outside:,} of your {flat.size:,} feature values ({outside / flat.size:.1%}) lie outside {where} "
            f"and are clipped to them{worst}"
        )
    if fill < BOUNDS_FILL_WARNING:
        least = int(np.argmin(fills))
        worst = f"; {name(least)} fills {fills[least]:.1%}" if per_feature else ""
        notes.append(
            f"your features fill a median {fill:.1%} of {width}{worst}: every private method "
            "is calibrated to the whole width, so its noise swamps features that use a sliver of it (DP-SGD, and a "
            "release with private ranges, first narrow each feature's range with a share of the epsilon, which wins "
            "back much of it, not all)"
        )
        if not per_feature and fills.max() > UNITS_SPREAD * max(fill, 1e-12):
            notes.append(
                f"your columns span very different widths ({name(int(np.argmax(fills)))} fills {fills.max():.1%}): "
                "give each column its own public bounds (--feature-bounds FILE.csv, or Bounds per column on the pages)"
            )
    if not notes:
        return None
    said = "; ".join(notes)
    return (
        f"{said[0].upper()}{said[1:]}. Public bounds that hold the values your features can take and no more (known "
        "without this file) keep the most accuracy. This reads your file: it is shown to you, never released."
    )
