"""``python -m dpmix_core bounds-template``: a bounds file to fill in, one row per feature column of a data file.

It names the file's feature columns (an ``.npz``'s by index 0..d-1) and writes ``--feature-range``'s pair (default
0,1) on every row, for you to replace with the bounds each column can take, known without the data (a form's
limits, a codebook). It reads no statistic of the records: a template of their minima and maxima would put the
private data into bounds the guarantee treats as public. The filled-in file is what ``--feature-bounds`` reads
(:mod:`dpmix_core.data.feature_bounds`).

Write rule: to standard output, or to ``--out FILE.csv`` written whole (a temporary renamed into place) and
never over an existing file, so a template cannot replace bounds someone already filled in.
"""

from __future__ import annotations

import argparse

__all__ = ["add_bounds_template_arguments", "cli_bounds_template"]


def add_bounds_template_arguments(parser: argparse.ArgumentParser, range_type) -> None:
    """Arguments of ``bounds-template`` (wire with ``set_defaults(func=cli_bounds_template)``)."""
    parser.add_argument("--data-file", required=True, metavar="FILE", help="your CSV (label column + features) or .npz")
    parser.add_argument("--label-column", metavar="NAME", help="the CSV's label column (default as train reads it)")
    parser.add_argument(
        "--feature-range", type=range_type, default=(0.0, 1.0), help="LO,HI written on every row (default 0,1)"
    )
    parser.add_argument(
        "--categories",
        metavar="FILE.csv",
        help="the public categories of its text columns (column,category): their one-hot features are (0, 1), left out",
    )
    parser.add_argument("--out", metavar="FILE.csv", help="write here (never over an existing file); default stdout")


def cli_bounds_template(args: argparse.Namespace) -> int:
    """Name the feature columns, write the template, say what to do with it."""
    import sys

    from dpmix_core.data import bounds_csv, load_user_data, read_categories, read_data_file
    from dpmix_core.data.categories import one_hot_features
    from dpmix_core.resources.files import check_unused_file, write_files_atomically

    if args.label_column is not None and not args.data_file.lower().endswith(".csv"):
        raise ValueError("--label-column names a column of a --data-file CSV")
    out = None if args.out is None else check_unused_file(args.out, what="--out", holds="bounds you filled in")
    categories = () if args.categories is None else read_categories(args.categories)
    dataset = load_user_data(
        read_data_file(args.data_file), filename=args.data_file, label_column=args.label_column, categories=categories
    )
    d = dataset.feature_dim - len(one_hot_features(dataset.feature_names, categories))  # rows to fill in
    text = bounds_csv(
        args.feature_range, feature_names=dataset.feature_names, d=dataset.feature_dim, categories=categories
    )
    if out is None:
        sys.stdout.write(text.decode())
        return 0
    write_files_atomically({out: text})
    print(f"wrote {out}: {d} feature columns at ({args.feature_range[0]:g}, {args.feature_range[1]:g}); put each "
          f"column's public bounds in, then pass --feature-bounds {out}")  # fmt: skip
    return 0
