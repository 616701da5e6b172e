"""``python -m dpmix_core categories-template``: a categories file to check, from the words a CSV's text columns hold.

It lists, for each text column of the file (its label column aside), the words its records hold, one row per word
(``column,category``), sorted. Unlike ``bounds-template`` it reads the records, because a text column's categories
are its words: the list is for the data's holder to check against what is known without the file (a form's choices,
a codebook), then pass as ``--categories`` (:mod:`dpmix_core.data.categories`). A word that only a few records hold
is not public knowledge: the card publishes the list, so remove such a word (its records are then refused) or merge
it into a public category in the data. Nothing here is released.

Write rule: to standard output, or to ``--out FILE.csv`` written whole (a temporary renamed into place) and never
over an existing file, so a template cannot replace a list someone already checked.
"""

from __future__ import annotations

import argparse

__all__ = ["add_categories_template_arguments", "cli_categories_template"]


def add_categories_template_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``categories-template`` (wire with ``set_defaults(func=cli_categories_template)``)."""
    parser.add_argument("--data-file", required=True, metavar="FILE.csv", help="your CSV (label column + features)")
    parser.add_argument("--label-column", metavar="NAME", help="the CSV's label column (default as train reads it)")
    parser.add_argument("--out", metavar="FILE.csv", help="write here (never over an existing file); default stdout")


def cli_categories_template(args: argparse.Namespace) -> int:
    """List the text columns' words, write the template, say what to check."""
    import sys

    from dpmix_core.data import categories_csv, check_categories, found_categories, read_data_file
    from dpmix_core.resources.files import check_unused_file

    if not args.data_file.lower().endswith(".csv"):
        raise ValueError("categories are the words of a CSV's text columns; an .npz holds numbers only")
    out = None if args.out is None else check_unused_file(args.out, what="--out", holds="your checked categories")
    found = found_categories(read_data_file(args.data_file), args.data_file, args.label_column)
    try:  # what --categories would refuse in this list (an identifier column, a column of one word): said first
        check_categories(args.data_file, found)
    except ValueError as exc:
        print(f"note: {exc}", file=sys.stderr)
    if not found:
        print(f"{args.data_file} has no text columns besides its label column: no categories to give.", file=sys.stderr)
        return 0
    text = categories_csv(found)
    summary = ", ".join(f"{column} ({len(words)})" for column, words in found)
    check = (
        "these are the words your records hold: keep those known without the file (a form's choices, a codebook); "
        "the card publishes the list"
    )
    if out is None:
        sys.stdout.write(text.decode())
        print(f"note: {summary}: {check}.", file=sys.stderr)
        return 0
    from dpmix_core.resources.files import write_files_atomically

    write_files_atomically({out: text})
    print(f"wrote {out}: {summary}. Check it: {check}. Then pass --categories {out}")
    return 0
