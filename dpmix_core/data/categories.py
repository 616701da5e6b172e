"""Public categories of a table's text columns: one-hot features a release can mix.

A column of words (a region, a blood group) becomes features once each record's word is a one-hot vector over the
column's categories: "region" with north, south, east becomes region=north, region=south, region=east, each 0 or 1.
These lie in [0,1] (their bounds are (0, 1), whatever the other columns' are), so every record stays in the box the
accountants assume and the guarantee is unchanged; in a mixture, region=north is the share of its records from the
north, plus noise.

The categories must be public (a form's choices, a codebook): the card publishes them, and a list read from the
private file would reveal a category that only one record has. A categories file is a CSV with the header
``column,category`` and one row per category, in the order the features take. A record whose word is not in its
column's list, a missing word, a column the data lacks and the label column are refused in one line.
:func:`found_categories` lists the words a file's text columns hold, for the data's holder to check against what is
public; it is never released.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence

from dpmix_core.data.base import DatasetError
from dpmix_core.data.side_files import read_side_csv

__all__ = [
    "CATEGORIES_FILE_HEADER",
    "MAX_CATEGORIES",
    "MAX_CATEGORIES_FILE_BYTES",
    "Categories",
    "categories_csv",
    "categories_rows",
    "category_feature",
    "check_categories",
    "describe_categories",
    "json_categories",
    "one_hot_features",
    "read_categories",
    "rows_categories",
]

Categories = tuple[tuple[str, tuple[str, ...]], ...]  # ((column, (category, ...)), ...), in the data's column order
CATEGORIES_FILE_HEADER = ("column", "category")
MAX_CATEGORIES = 1000  # one-hot features a text column may add: more is an identifier or free text, not categories
MAX_CATEGORIES_FILE_BYTES = 4_000_000


def category_feature(column: str, category: str) -> str:
    """The name of the one-hot feature of ``category`` in ``column``: "region=north"."""
    return f"{column}={category}"


def check_categories(name: str, value: object) -> Categories:
    """``value`` (pairs ``(column, categories)``, or a mapping column -> categories; JSON lists too) as
    :data:`Categories`: names stripped, each column once with at least 2 distinct, non-empty categories."""
    items = value.items() if isinstance(value, Mapping) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ValueError(f"{name} must be pairs (column, [categories]). Found {value!r}.")
    out: list[tuple[str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError(f"{name}: each entry is (column, [categories]). Found {item!r}.")
        column, cats = item
        if not isinstance(column, str) or not column.strip():
            raise ValueError(f"{name}: a column must be a non-empty name. Found {column!r}.")
        column = column.strip()
        if column in seen:
            raise ValueError(f"{name}: column {column!r} is listed twice.")
        seen.add(column)
        if isinstance(cats, (str, bytes)) or not isinstance(cats, Iterable):
            raise ValueError(f"{name}: the categories of {column!r} must be a list of words. Found {cats!r}.")
        words = [c.strip() if isinstance(c, str) else c for c in cats]
        if any(not isinstance(w, str) or not w for w in words):
            raise ValueError(f"{name}: the categories of {column!r} must be non-empty words. Found {list(cats)!r}.")
        if len(set(words)) != len(words):
            twice = next(w for w in words if words.count(w) > 1)
            raise ValueError(f"{name}: category {twice!r} of {column!r} is listed twice.")
        if len(words) < 2:
            raise ValueError(f"{name}: {column!r} needs at least 2 categories (one is the same for every record).")
        if len(words) > MAX_CATEGORIES:
            raise ValueError(_too_many_words(column, len(words), where=name))
        out.append((column, tuple(words)))
    return tuple(out)


def _too_many_words(column: str, words: int, *, where: str = "categories") -> str:
    """The one line for a text column with more than :data:`MAX_CATEGORIES` words."""
    return (
        f"{where}: {column!r} has {words:,} different words, more than {MAX_CATEGORIES:,} categories: an identifier or "
        "free text, not categories. Remove the column from the file (or merge its words into fewer categories)."
    )


def json_categories(categories: Categories) -> list[list]:
    """``categories`` as JSON: ``[[column, [category, ...]], ...]``."""
    return [[column, list(cats)] for column, cats in categories]


def describe_categories(categories: Categories, shown: int = 4) -> str:
    """'region: north, south, east; blood: A, B, AB, O' (the first ``shown`` categories of each column)."""

    def listed(cats: tuple[str, ...]) -> str:
        return ", ".join(cats[:shown]) + (f", … ({len(cats)})" if len(cats) > shown else "")

    return "; ".join(f"{column}: {listed(cats)}" for column, cats in categories)


def one_hot_features(feature_names: Sequence[str], categories: Categories) -> tuple[int, ...]:
    """The indices of ``feature_names`` that are one-hot features of ``categories`` (bounds (0, 1))."""
    names = {category_feature(column, c) for column, cats in categories for c in cats}
    return tuple(j for j, name in enumerate(feature_names) if name in names)


def categories_rows(categories: Categories) -> list[dict]:
    """One row ``{"column", "category"}`` per category (a page's table, a categories file's lines)."""
    return [{"column": column, "category": c} for column, cats in categories for c in cats]


def categories_csv(categories: Categories) -> bytes:
    """``categories`` as a categories file (UTF-8 CSV, header ``column,category``): what :func:`read_categories`
    reads."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CATEGORIES_FILE_HEADER)
    for row in categories_rows(categories):
        writer.writerow([row["column"], row["category"]])
    return buffer.getvalue().encode()


def rows_categories(rows: Iterable[tuple[object, object]], where: str = "categories") -> Categories:
    """``(column, category)`` rows, a column's rows in its categories' order, as :data:`Categories`. A page's table
    passes its cells as they are: an empty cell (None, NaN, "") is empty, and a row of two empty cells is skipped."""
    grouped: dict[str, list[str]] = {}
    for column, category in rows:
        cells = [
            "" if c is None or (isinstance(c, float) and math.isnan(c)) else str(c).strip() for c in (column, category)
        ]
        if any(cells):
            grouped.setdefault(cells[0], []).append(cells[1])
    try:
        return check_categories(where, list(grouped.items()))
    except ValueError as exc:
        raise DatasetError(str(exc)) from None


def read_categories(file: str | os.PathLike[str] | bytes) -> Categories:
    """A categories CSV (``column,category``; a path or its bytes) as :data:`Categories`; DatasetError (one line)."""
    where, rows = read_side_csv(
        file, what="categories", header=CATEGORIES_FILE_HEADER, max_bytes=MAX_CATEGORIES_FILE_BYTES, row="category"
    )
    for number, row in enumerate(rows, start=2):
        if not row[0].strip() or not row[1].strip():
            raise DatasetError(f"{where}, line {number}: expected column,category. Found {','.join(row)!r}.")
    if not rows:
        raise DatasetError(f"{where}: no categories below the header.")
    return rows_categories(((row[0], row[1]) for row in rows), where)
