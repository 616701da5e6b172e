"""Small CSV files that go with a data file (public bounds per column, public categories): read whole, bounded.

Each has a fixed header (``column,low,high``; ``column,category``), case and spaces aside, then one row per entry;
blank lines are skipped. A path or the bytes of an upload; a file over its size limit is refused before it is read.
Everything else (not UTF-8, another header, a row of another length) is one line naming the file and the line.
"""

from __future__ import annotations

import csv
import io
import os

from dpmix_core.data.base import DatasetError

__all__ = ["read_side_csv"]


def read_side_csv(
    file: str | os.PathLike[str] | bytes, *, what: str, header: tuple[str, ...], max_bytes: int, row: str
) -> tuple[str, list[list[str]]]:
    """(where, rows): how messages name the file (its path, else "the ``what`` file") and its rows below ``header``,
    each of ``len(header)`` cells (one a ``row``: "column", "category"); DatasetError (one line) for anything else."""
    where = f"the {what} file" if isinstance(file, bytes) else os.fspath(file)
    too_big = f"{where}: larger than {max_bytes:,} bytes; a {what} file is one row a {row}."
    if isinstance(file, bytes):
        data = file
    else:
        try:
            if os.path.getsize(where) > max_bytes:  # before reading it
                raise DatasetError(too_big)
            with open(where, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise DatasetError(f"cannot read the {what} file {where}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise DatasetError(too_big)
    spelled = ",".join(header)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError(f"{where}: not UTF-8 text; a {what} file is a CSV of {spelled}.") from None
    lines = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not lines or tuple(cell.strip().lower() for cell in lines[0]) != header:
        found = ",".join(lines[0]) if lines else "nothing"
        raise DatasetError(f"{where}: the first line must be the header {spelled}. Found {found!r}.")
    for number, cells in enumerate(lines[1:], start=2):
        if len(cells) != len(header):
            raise DatasetError(f"{where}, line {number}: expected {spelled}. Found {','.join(cells)!r}.")
    return where, lines[1:]
