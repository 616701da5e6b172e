"""``python -m dpmix_core best-release``: the best feature-mixing release for a target (epsilon, delta).

The library does the work (:mod:`dpmix_core.experiments.best_release`, loaded only when the command runs);
this module parses, checks the output path before any work, prints, and writes the JSON atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dpmix_core.cli.argtypes import finite_float, positive_float, positive_int
from dpmix_core.cli.own_file import (
    CATEGORIES_HELP,
    FEATURE_BOUNDS_HELP,
    CliError,
    add_private_ranges,
    bounds_pair,
    own_data_file,
    range_epsilon_arg,
)

__all__ = ["add_best_release_arguments", "cli_best_release", "search_from_args"]


def _int_list(text: str) -> tuple[int, ...]:
    return tuple(positive_int(part) for part in text.split(","))


def _float_list(text: str) -> tuple[float, ...]:
    return tuple(positive_float(part) for part in text.split(","))


def add_best_release_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``best-release`` (wire with ``set_defaults(func=cli_best_release)``)."""
    from dpmix_core.data import DATASET_NAMES
    from dpmix_core.training.names import FEATURE_MODELS

    parser.add_argument("--target-epsilon", type=positive_float, required=True, help="the budget's epsilon")
    parser.add_argument("--delta", type=finite_float, default=1e-5)
    parser.add_argument("--dataset", choices=DATASET_NAMES, help="a named dataset (default: mnist)")
    parser.add_argument("--data-dir", help="folder holding the dataset (default: $DPMIX_DATA_DIR, the cache)")
    parser.add_argument(
        "--data-file",
        help="your own CSV (label column + features) or .npz (x, y) instead of a named dataset: its columns are "
        "mixed (no ScatterNet), --test-fraction of its records held out to score the chosen release only",
    )
    parser.add_argument("--label-column", help="--data-file CSV: the column holding the labels")
    parser.add_argument(
        "--test-fraction",
        type=finite_float,
        help="--data-file: share of its records held out as the test split (default 0.2; never released)",
    )
    parser.add_argument("--feature-range", type=bounds_pair, help="--data-file: public LO,HI bounds of its features")
    parser.add_argument("--feature-bounds", metavar="FILE.csv", help=FEATURE_BOUNDS_HELP)
    parser.add_argument("--categories", metavar="FILE.csv", help=CATEGORIES_HELP)
    add_private_ranges(parser)
    parser.add_argument(
        "--m",
        type=_int_list,
        help="expected batch sizes m, e.g. 64,256 (default 64,256 from 60,000 training records up, else 16,64)",
    )
    parser.add_argument(
        "--T",
        type=_int_list,
        help="released points T, e.g. 10000,60000 (the default from 60,000 training records up, else n and 4n)",
    )
    parser.add_argument(
        "--lambda", dest="sigma_ratio", type=_float_list, default=(0.5, 1.0), help="sigma_y / sigma_x, e.g. 0.5,1"
    )
    parser.add_argument("--short-epochs", type=positive_int, default=5, help="first round: every candidate")
    parser.add_argument("--long-epochs", type=positive_int, default=30, help="second round: the finalists")
    parser.add_argument("--finalists", type=positive_int, default=2, help="candidates trained again, longer")
    parser.add_argument(
        "--budget-runs", type=positive_int, default=12, help="most training runs allowed (candidates + finalists)"
    )
    parser.add_argument(
        "--max-minutes", type=positive_float, default=60.0, help="most estimated minutes allowed (refused above)"
    )
    parser.add_argument(
        "--budget-covers",
        choices=("search", "release"),
        default="search",
        help="search (default): the target epsilon bounds what you publish, the chosen release and the choice, "
        "so the candidates share it; release: each candidate at the target (the search's larger epsilon is shown)",
    )
    parser.add_argument(
        "--model",
        choices=FEATURE_MODELS,
        help="classifier every candidate trains: scatter-linear (DPFMix's, default), scatter-cnn (a small CNN on "
        "the same features, Tramer & Boneh 2021), linear, or corrected-lsq (closed-form least squares corrected for "
        "each release's noise: seconds a candidate, no finalist round; the default with --data-file)",
    )
    parser.add_argument(
        "--selection",
        choices=("pooled", "own", "private"),
        help="pooled (default on a named dataset): rank every candidate's model on the union of all releases' "
        "held-out points (one set for all); own: on each release's own held-out points (splits differ between "
        "candidates); private (default with --data-file): the most correct on the even rows of the held-out test "
        "split, chosen by the exponential mechanism at --selection-epsilon (part of the target), the test "
        "accuracy reported on the odd rows",
    )
    parser.add_argument(
        "--selection-epsilon",
        type=positive_float,
        help="--selection private: the choice's epsilon, all its picks together (default: 10%% of the target)",
    )
    parser.add_argument("--val-fraction", type=finite_float, default=0.1, help="share of each release held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-limit", type=positive_int, help="a fixed subset of the training records")
    parser.add_argument("--test-limit", type=positive_int, help="a fixed subset of the test records")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--out", help="FILE.json: every trial, the choice and its test accuracy")
    parser.add_argument(
        "--release-out",
        metavar="FILE.npz|FILE.csv",
        help="write the chosen release (made again from its seed and sigmas: the same points, no further epsilon) "
        "with FILE.card.json, whose search section and first caveat give the epsilon of everything published",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cli_best_release(args: argparse.Namespace) -> int:
    """Run the search from parsed arguments; ValueError (one line) on bad input or a refused budget."""
    from dpmix_core.experiments.best_release import run_search
    from dpmix_core.resources.files import check_new_file, write_files_atomically

    out = None
    if args.out is not None:
        out = Path(args.out)
        if out.suffix.lower() != ".json":
            raise ValueError(f"--out must end in .json. Found {out.name!r}.")
        check_new_file(out, what="--out")  # before any work
    release_out = _release_path(args.release_out)
    search = search_from_args(args)
    say = None if args.json else (lambda line: print(line, file=sys.stderr))
    best = run_search(search, progress=say)
    payload = best.to_dict()
    if release_out is not None:
        from dpmix_core.experiments.best_release import chosen_card, chosen_release
        from dpmix_core.synthesis.export import write_release

        synthesis = chosen_release(best)
        written, card_path = write_release(synthesis, release_out, card=chosen_card(best, synthesis))
        payload["release_file"], payload["release_card"] = str(written), str(card_path)
    if out is not None:
        write_files_atomically({out: (json.dumps(payload, indent=1, allow_nan=False) + "\n").encode()})
    if args.json:
        print(json.dumps(payload, allow_nan=False))
        return 0
    t = best.chosen
    print(f"chosen release: {t.candidate.describe()} (sigma_x={t.sigma_x:.4g}, sigma_y={t.sigma_y:.4g})")
    print(f"  privacy: {best.privacy_note()}")
    print(f"  selection: {best.selection_note()}")
    print(f"  validation accuracy, pooled held-out points of every release: {_percent(t.pooled_accuracy)}")
    print(f"  validation accuracy, the release's own held-out points: {_percent(t.val_accuracy)}")
    if best.test_rows == "odd":
        print(
            f"  test accuracy, odd held-out rows (never read before; the even rows chose): {100 * best.test_accuracy:.2f} %"
        )
    else:
        print(f"  test accuracy (measured after the choice, never used for it): {100 * best.test_accuracy:.2f} %")
    if best.warning:
        print(f"  warning: {best.warning}")
    for line in trial_table(best.trials, best.search.criterion):
        print(f"  {line}")
    print(f"  {len(best.trials)} trainings in {best.seconds:.0f} s" + (f"; written to {out}" if out else ""))
    if release_out is not None:
        print(f"  the chosen release: {payload['release_file']} with {payload['release_card']}")
    return 0


def _release_path(text: str | None) -> Path | None:
    """--release-out checked before any work: FILE.npz or FILE.csv in a folder that exists, its card path too."""
    if text is None:
        return None
    from dpmix_core.resources.files import check_new_file
    from dpmix_core.synthesis.export import card_path_for

    path = Path(text)
    if path.suffix.lower() not in (".npz", ".csv"):
        raise ValueError(f"--release-out must end in .npz or .csv. Found {path.name!r}.")
    check_new_file(path, what="--release-out")
    check_new_file(card_path_for(path), what="--release-out's card")
    return path


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f} %"


def trial_table(trials, selection: str) -> list[str]:
    """Every trial as a text row: candidate, epochs, certified epsilon, pooled and own validation accuracy.

    The column that ranks the choice (``selection``: "pooled" or "own") is marked with a star; a "private" choice
    ranks on neither (its scores are private).
    """
    pooled, own = {"pooled": ("pooled val.*", "own val."), "own": ("pooled val.", "own val.*")}.get(
        selection, ("pooled val.", "own val.")
    )
    rows = [f"{'candidate':<28} {'epochs':>6} {'eps':>7} {pooled:>13} {own:>13}"]
    for t in trials:
        eps = "-" if t.certified_epsilon is None else f"{t.certified_epsilon:.4g}"
        rows.append(
            f"{t.candidate.describe():<28} {t.epochs:>6} {eps:>7} {_percent(t.pooled_accuracy):>13} "
            f"{_percent(t.val_accuracy):>13}" + (f"  ({t.error})" if t.error else "")
        )
    return rows


def search_from_args(args: argparse.Namespace):
    """The :class:`~dpmix_core.experiments.best_release.BestReleaseSearch` the parsed arguments describe."""
    from dpmix_core.experiments.best_release import BestReleaseSearch, SearchSpace, dataset_space, default_space

    if args.data_file is not None and args.dataset is not None:
        raise CliError("--dataset and --data-file: give one (the search releases one dataset)")
    if args.data_file is None and args.feature_range is not None:
        raise CliError("--feature-range: only with --data-file (the datasets have their own scaling)")
    # its split; --feature-bounds, --categories read into args.feature_range
    own = own_data_file(args, also=("private_ranges",))
    file_options: dict = {}
    if own is None:
        grid = dataset_space(args.dataset or "mnist", args.train_limit)
    else:
        grid = default_space(own.dataset.n_train)
        file_options = dict(own.options, feature_range=args.feature_range, exact_features=args.exact_features)
    space = SearchSpace(args.m or grid.mix_degrees, args.T or grid.num_points, args.sigma_ratio)
    return BestReleaseSearch(
        target_epsilon=args.target_epsilon,
        delta=args.delta,
        dataset=file_options.pop("dataset", args.dataset or "mnist"),
        space=space,
        short_epochs=args.short_epochs,
        long_epochs=args.long_epochs,
        finalists=args.finalists,
        max_runs=args.budget_runs,
        max_seconds=60.0 * args.max_minutes,
        val_fraction=args.val_fraction,
        seed=args.seed,
        train_limit=args.train_limit,
        test_limit=args.test_limit,
        range_epsilon=range_epsilon_arg(args),
        data_dir=args.data_dir,
        device=args.device,
        budget_covers=args.budget_covers,
        selection=args.selection,
        selection_epsilon=args.selection_epsilon,
        model=args.model,
        **file_options,
    )
