"""The options that read one's own file, shared by the commands that take ``--data-file``: its split
(:func:`own_data_file`), its text columns' public categories (:func:`read_categories_arg`) and its public bounds
(:func:`with_feature_bounds`), with :class:`CliError`, the one-line user error every command ends with (exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dpmix_core.cli.argtypes import finite_float

__all__ = [
    "add_private_ranges",
    "range_epsilon_arg",
    "CATEGORIES_HELP",
    "FEATURE_BOUNDS_HELP",
    "CliError",
    "bounds_pair",
    "own_data_file",
    "read_categories_arg",
    "with_feature_bounds",
]


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


FEATURE_BOUNDS_HELP = (
    "public bounds per feature column: a CSV with the header column,low,high, one row per feature column "
    "(columns in different units: an age, an income); columns it leaves out take --feature-range. Known without "
    "the data, never its own minima and maxima"
)


CATEGORIES_HELP = (
    "public categories of a --data-file CSV's text columns: a CSV with the header column,category, one row per "
    "category (a form's choices, a codebook; categories-template lists the words a file holds, to check). Each such "
    "column becomes one-hot features column=category, bounds (0, 1)"
)


def bounds_pair(text: str) -> tuple[float, float]:
    """'LO,HI' -> (lo, hi), finite, lo < hi: public bounds of features (--feature-range)."""
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not LO,HI")
    lo, hi = (finite_float(p) for p in parts)
    if not lo < hi:
        raise argparse.ArgumentTypeError(f"{text!r}: LO must be below HI")
    return lo, hi


def own_data_file(args: argparse.Namespace, *, also: tuple[str, ...] = ()):
    """--data-file FILE (--label-column, --test-fraction, --feature-bounds): the file read and split
    (:class:`~dpmix_core.experiments.run_data.OwnData`), its bounds file read into ``args.feature_range``; None
    without it, when the options that describe a data file (and ``also``) have nothing to act on: refused."""
    from dpmix_core.experiments.run_data import open_data_file

    if args.data_file is None:
        names = ("label_column", "test_fraction", "feature_bounds", "categories", *also)
        given = ["--" + name.replace("_", "-") for name in names if getattr(args, name, None) is not None]
        if given:
            raise CliError(f"{', '.join(given)}: only with --data-file (the datasets have their own test split)")
        return None
    if args.label_column is not None and not args.data_file.lower().endswith(".csv"):
        raise CliError("--label-column names a column of a --data-file CSV")
    fraction = 0.2 if args.test_fraction is None else args.test_fraction
    own = open_data_file(
        args.data_file, label_column=args.label_column, test_fraction=fraction, categories=read_categories_arg(args)
    )
    with_feature_bounds(args, own.dataset.feature_names, own.dataset.feature_dim, own.dataset.categories)
    return own


def read_categories_arg(args: argparse.Namespace):
    """--categories FILE.csv read (:func:`~dpmix_core.data.read_categories`); () without it."""
    if getattr(args, "categories", None) is None:
        return ()
    from dpmix_core.data import read_categories

    if not args.data_file.lower().endswith(".csv"):
        raise CliError("--categories names the text columns of a --data-file CSV")
    return read_categories(args.categories)


def with_feature_bounds(args: argparse.Namespace, feature_names: Sequence[str], d: int, categories: tuple = ()) -> None:
    """--feature-bounds FILE.csv read against the data's ``d`` features (named ``feature_names``) into
    ``args.feature_range``, with --feature-range as the bounds of the columns it leaves out; the one-hot features
    of ``categories`` (the file's text columns) take (0, 1), exactly: ``args.exact_features`` lists them, which
    private ranges leave there."""
    from dpmix_core.data import one_hot_features, read_feature_bounds, with_category_bounds

    if args.feature_bounds is not None:
        args.feature_range = read_feature_bounds(
            args.feature_bounds,
            feature_names=feature_names,
            d=d,
            default=args.feature_range,
            label_column=getattr(args, "label_column", None),
            categories=categories,
        )
    if categories:
        args.feature_range = with_category_bounds(
            args.feature_range, feature_names=feature_names, categories=categories
        )
    args.exact_features = one_hot_features(feature_names, categories) if args.feature_range is not None else ()


def _private_ranges(text: str) -> float | str:
    """--private-ranges [EPS]: "share" (the option alone) or a positive epsilon."""
    if text == "share":
        return text
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the ranges' epsilon must be positive")
    return value


def add_private_ranges(parser: argparse.ArgumentParser) -> None:
    """--private-ranges [EPS]: narrow a --data-file's public bounds privately (synthesis.private_ranges)."""
    parser.add_argument(
        "--private-ranges",
        nargs="?",
        const="share",
        type=_private_ranges,
        metavar="EPS",
        help="narrow the public bounds to where the records lie, by noisy histograms released with the points at "
        "epsilon EPS alone (default: 10%% of --target-epsilon); the release scales with those ranges, and its "
        "epsilon covers both (the target holds for both together)",
    )


def range_epsilon_arg(args: argparse.Namespace) -> float | None:
    """The private ranges' epsilon the options ask for: --private-ranges EPS, or its share of --target-epsilon."""
    from dpmix_core.synthesis.private_ranges import RANGES_SHARE

    value = getattr(args, "private_ranges", None)
    if value is None or isinstance(value, float):
        return value
    if args.target_epsilon is None:
        raise CliError("--private-ranges without a value takes 10% of --target-epsilon: give one, or the ranges' EPS")
    return RANGES_SHARE * args.target_epsilon
