"""Command line: ``python -m dpmix_core {epsilon,calibrate,max-points,synthesize,train,sweep,audit,report,sweep-report,best-release,solve-epsilon,verify} ...``.

Contract (scripts and tests rely on it): ``--json`` prints one JSON object (a
list for ``--accountant all``); infinite epsilon prints "inf"; invalid input
exits with code 2 and one line on stderr, never a traceback -- and so do MemoryError, OSError,
results-store errors and requests over the limits of :mod:`dpmix_core.resources.limits` (``--debug``
anywhere on the line adds the traceback). See docs/RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sqlite3
import statistics
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import dpmix_core
from dpmix_core.cli.argtypes import attach_negative_pairs, finite_float, nonnegative_int, positive_int
from dpmix_core.cli.own_file import (
    CATEGORIES_HELP,
    FEATURE_BOUNDS_HELP,
    CliError,
    add_private_ranges,
    bounds_pair,
    own_data_file,
    range_epsilon_arg,
    read_categories_arg,
    with_feature_bounds,
)
from dpmix_core.privacy.accountant_names import ACCOUNTANT_NAMES
from dpmix_core.privacy.release import PRIVATE_NORMALISATION
from dpmix_core.training.collapse import shift_note

if TYPE_CHECKING:  # the accountants (dp_accounting, scipy) and torch load only in the commands that use them
    from dpmix_core.privacy.accountants import EpsilonResult, MixingSetting

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise CliError(message)


def _range_pair(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not MEAN,STD")
    return finite_float(parts[0]), finite_float(parts[1])


def _milestones(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated epochs like 80,120,160, got {text!r}") from None


def _class_sizes(text: str) -> tuple[int, ...]:
    return tuple(positive_int(part) for part in text.split(","))


def add_setting_arguments(
    parser: argparse.ArgumentParser,
    *,
    with_sigma: bool,
    with_accountant: bool = True,
    with_T: bool = True,
    required: bool = True,
) -> None:
    """The data options shared by every accounting command (``required=False``: the command checks that n, l, T and
    the noise are given, or come from elsewhere)."""
    names = ", ".join([*ACCOUNTANT_NAMES, "all"])
    if with_accountant:
        parser.add_argument("--accountant", default="all", help=f"one of: {names} (default: all)")
    parser.add_argument("--n", type=positive_int, required=required, help="records in the private dataset")
    parser.add_argument("--l", type=positive_int, required=required, help="mix degree l (Poisson: expected batch m)")
    if with_T:
        parser.add_argument("--T", type=positive_int, required=required, help="number of synthetic points released")
    if with_sigma:
        parser.add_argument("--sigma-x", type=finite_float, required=required, help="feature noise std")
        parser.add_argument(
            "--sigma-y", type=finite_float, default=None, help="label noise std (default: --sigma-x, lambda = 1)"
        )
    parser.add_argument("--delta", type=finite_float, default=1e-5, help="default: 1e-5, as the app's")
    parser.add_argument("--dx", type=positive_int, default=784, help="feature dimension ([0,1]^dx bounds)")
    parser.add_argument("--dy", type=positive_int, default=10, help="label dimension ([0,1]^dy bounds)")
    parser.add_argument("--clip", type=finite_float, default=None, help="DP-CDA L2 clip c (default 1)")
    parser.add_argument("--clip-x", type=finite_float, default=1.0, help="DPFMix feature clip Cx")
    parser.add_argument("--clip-y", type=finite_float, default=1.0, help="DPFMix label clip Cy")
    parser.add_argument(
        "--clip-records",
        action="store_true",
        help="uniform mixing of records clipped to ||x|| <= Cx, ||y|| <= Cy instead of [0,1] data (DPFMix App. "
        "E.3's DPMix; synthesize --mechanism dpmix --preprocessing clip): rdp-wor analyses it",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--classes", type=positive_int, help="class-centric mixing over K equal classes")
    group.add_argument("--class-sizes", type=_class_sizes, help="class-centric mixing: sizes N_1,...,N_K")
    parser.add_argument(
        "--features-only",
        action="store_true",
        help="class-centric: DP-CDA's reading (a neighbour swaps a record within its class); labels NOT protected. "
        "Default: replace-one, the record's label protected too",
    )
    parser.add_argument("--label-may-change", action="store_true", help=argparse.SUPPRESS)  # the default since v0.2
    parser.add_argument(
        "--private-normalisation",
        action="store_true",
        help="the release z-scored with statistics of the private data: epsilons are computed for reference "
        "but no accountant covers the release",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _setting(args: argparse.Namespace, sigma_x: float = 1.0, sigma_y: float = 1.0) -> MixingSetting:
    from dpmix_core.privacy.accountants import MixingSetting, equal_class_sizes

    class_sizes = args.class_sizes
    if args.classes is not None:
        class_sizes = equal_class_sizes(args.n, args.classes)
    if class_sizes is not None and args.n != sum(class_sizes):
        raise CliError(f"class sizes sum to {sum(class_sizes)}, not --n {args.n}")
    if class_sizes is None and (args.features_only or args.label_may_change):
        flag = "--features-only" if args.features_only else "--label-may-change"
        raise CliError(f"{flag} applies to class-centric accounting: give --classes K or --class-sizes")
    if args.features_only and args.label_may_change:
        raise CliError("--features-only and --label-may-change contradict each other; pick one")
    if hasattr(args, "sigma_x"):  # epsilon, max-points, report: the user's noise; --sigma-y defaults to lambda = 1
        sigma_x = args.sigma_x
        sigma_y = args.sigma_x if args.sigma_y is None else args.sigma_y
    return MixingSetting(
        n=args.n,
        l=args.l,
        T=getattr(args, "T", 1),  # max-points searches T
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        dx=args.dx,
        dy=args.dy,
        clip=args.clip,
        clip_x=args.clip_x,
        clip_y=args.clip_y,
        class_sizes=class_sizes,
        protect_labels=not args.features_only,
        not_covered=PRIVATE_NORMALISATION if args.private_normalisation else None,
        clip_records=args.clip_records,
    )


def _names(name: str) -> list[str]:
    if name == "all":
        return list(ACCOUNTANT_NAMES)
    if name not in ACCOUNTANT_NAMES:
        raise CliError(f"unknown accountant {name!r}; choose one of: {', '.join([*ACCOUNTANT_NAMES, 'all'])}")
    return [name]


def _format_eps(x: float) -> str:
    """4 decimals; 5 significant digits from 1e6 up (not a 15-digit integer part) and below 1e-3 (not 0.0000)."""
    if math.isinf(x):
        return "inf"
    return f"{x:.4e}" if x >= 1e6 or 0 < x < 1e-3 else f"{x:.4f}"


def _print_text(result: EpsilonResult, extra: str = "") -> None:
    line = (
        f"{result.accountant:12s} eps={_format_eps(result.epsilon):>10s}  delta={result.delta:.3g}  "
        f"[{result.guarantee}]{extra}\n    {result.assumptions}"
    )
    if result.reason:
        line += f"\n    note: {result.reason}"
    print(line)


ALL_HEADER = (
    "every accountant, each on the release its paper analyses (second line: sampling, adjacency, bounds); "
    "compare epsilons only between lines that describe the same release"
)


def _emit(objs: list[dict], as_list: bool) -> None:
    print(json.dumps(objs if as_list else objs[0], indent=None, allow_nan=False))


def cmd_epsilon(args: argparse.Namespace) -> int:
    from dpmix_core.privacy.accountants import epsilon_all, get_accountant

    names = _names(args.accountant)
    setting = _setting(args)
    if args.statement and len(names) > 1:
        raise CliError("--statement speaks for one accountant's release: name it with --accountant (not 'all')")
    if len(names) > 1:
        results = epsilon_all(setting, args.delta)
    else:
        acc = get_accountant(names[0])
        release = acc.release_for(setting)
        results = [acc.epsilon(release, args.delta)]
        if args.statement:
            from dpmix_core.privacy.statement import privacy_statement

            print(privacy_statement(release, results[0]))
            return 0
    if args.json:
        _emit([r.to_json() for r in results], args.accountant == "all")
    else:
        if len(results) > 1:
            print(ALL_HEADER)
        for r in results:
            _print_text(r)
    return 0


def _solve_each(names: list[str], solve: Callable[[str], Any]) -> list[tuple[str, Any]]:
    """(name, answer or the ValueError's message) for each accountant; a single accountant's error is the CLI's."""
    if len(names) == 1:
        return [(names[0], solve(names[0]))]
    answers: list[tuple[str, Any]] = []
    for name in names:
        try:
            answers.append((name, solve(name)))
        except ValueError as exc:  # out of reach for this accountant only: say so on its line
            answers.append((name, str(exc)))
    if all(isinstance(answer, str) for _, answer in answers):
        raise ValueError(f"no accountant has an answer; {answers[0][0]}: {answers[0][1]}")
    return answers


def _emit_solved(answers: list[tuple[str, Any]], args: argparse.Namespace, extra: Callable[[Any], str]) -> None:
    """Print each accountant's answer (an object with .result and .to_json()) or its reason for having none."""
    if args.json:
        objs = [a.to_json() if not isinstance(a, str) else {"accountant": n, "error": a} for n, a in answers]
        _emit(objs, args.accountant == "all")
        return
    if len(answers) > 1:
        print(ALL_HEADER)
    for name, answer in answers:
        if isinstance(answer, str):
            print(f"{name:12s} no answer: {answer}")
        else:
            _print_text(answer.result, extra(answer))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.calibration import calibrate_sigma

    setting = _setting(args)
    answers = _solve_each(
        _names(args.accountant),
        lambda name: calibrate_sigma(
            get_accountant(name),
            setting,
            target_epsilon=args.target_epsilon,
            delta=args.delta,
            sigma_ratio=args.sigma_ratio,
        ),
    )
    _emit_solved(answers, args, lambda c: f"  sigma_x={c.sigma_x:.6g} sigma_y={c.sigma_y:.6g}")
    return 0


def cmd_max_points(args: argparse.Namespace) -> int:
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.calibration import max_points

    setting = _setting(args)
    answers = _solve_each(
        _names(args.accountant),
        lambda name: max_points(get_accountant(name), setting, target_epsilon=args.target_epsilon, delta=args.delta),
    )
    _emit_solved(answers, args, lambda b: f"  T={b.T:,}" + (f"  ({b.note})" if b.note else ""))
    return 0


def _progress(done: int, total: int) -> None:
    if total:
        print(f"\rdownloading: {100 * done / total:5.1f} % of {total / 1e6:.1f} MB", end="", file=sys.stderr)
        if done >= total:
            print(file=sys.stderr)


def stream_progress(T: int, every_s: float = 5.0) -> Callable[[int], None]:
    """A progress line on stderr at most every ``every_s`` seconds while a streamed release is written: the points
    written, their share of ``T`` and the time left at the rate so far (a 10M-point release takes minutes)."""
    import time

    from dpmix_core.resources.limits import format_duration

    start = last = time.monotonic()

    def report(done: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < every_s or done >= T:
            return
        last = now
        left = format_duration((now - start) * (T - done) / max(done, 1))
        print(f"  {done:,} of {T:,} points written ({done / T:.0%}), about {left} left", file=sys.stderr)

    return report


def _synthesize_streaming(args: argparse.Namespace) -> int:
    """--memmap X.npy --labels Y.npy: a release larger than memory, written chunk by chunk to a folder."""
    import numpy as np

    from dpmix_core.resources.limits import check_cost, limits_from_env, streaming_cost
    from dpmix_core.synthesis.epsilon_job import background_epsilons
    from dpmix_core.synthesis.streaming import (
        ELEMENTS_PER_CHUNK,
        STREAM_MECHANISMS,
        stream_release,
        synthesize_streaming,
    )

    if args.mechanism not in STREAM_MECHANISMS:
        raise CliError(f"--memmap streams {', '.join(STREAM_MECHANISMS)} only; got --mechanism {args.mechanism}")
    if args.mechanism == "dpmix" and args.preprocessing != "unit":
        raise CliError(
            "--memmap streams dpmix on [0,1] features only; dpmix on clipped records is in memory (no --memmap)"
        )
    if args.labels is None or args.num_classes is None:
        raise CliError("--memmap needs --labels Y.npy and --num-classes K")
    if args.sigma_x is None:
        raise CliError("streaming needs an explicit --sigma-x (calibrate first with 'calibrate')")
    try:
        source = np.load(args.memmap, mmap_mode="r", allow_pickle=False)
        labels = np.load(args.labels, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot memory-map the source: {exc}") from None
    if args.feature_bounds is not None:
        if source.ndim != 2:
            raise CliError(f"--feature-bounds needs a 2-D --memmap source (n, d). Found shape {source.shape}.")
        with_feature_bounds(args, (), int(source.shape[1]))  # a .npy has no column names: rows name indices
    if source.ndim == 2:
        d = int(source.shape[1])
        check_cost(
            streaming_cost(T=args.T, l=args.l, d=d, k=args.num_classes, chunk_values=ELEMENTS_PER_CHUNK),
            limits_from_env(),
            change="T or l",
            job=True,
        )
    try:  # the card's epsilons are computed in a second process while this one streams
        planned = stream_release(
            mechanism=args.mechanism,
            n=int(source.shape[0]),
            d=int(source.shape[-1]),
            k=args.num_classes,
            l=args.l,
            T=args.T,
            sigma_x=args.sigma_x,
            sigma_y=args.sigma_y,
            clip_x=args.clip_x,
            clip_y=args.clip_y,
            public_n=args.public_n,
        )
    except (ValueError, IndexError):
        planned = None  # synthesize_streaming reports what is wrong
    with background_epsilons(planned, args.delta) as epsilons_for:
        result = synthesize_streaming(
            source,
            labels,
            num_classes=args.num_classes,
            mechanism=args.mechanism,
            l=args.l,
            T=args.T,
            sigma_x=args.sigma_x,
            sigma_y=args.sigma_y,
            seed=args.seed,
            out_path=args.out,
            device=args.device,
            feature_range=args.feature_range,
            clip_x=args.clip_x,
            clip_y=args.clip_y,
            delta=args.delta,
            epsilons_for=epsilons_for,
            public_n=args.public_n,
            on_chunk=None if args.json else stream_progress(args.T),
        )
    if args.json:
        print(json.dumps({"out": str(result.out_dir), **result.card}, allow_nan=False))
    else:
        print(f"wrote {args.T:,} points to {result.out_dir} in {result.seconds:.1f} s ({result.chunks} chunks)")
        for e in result.card["epsilons"]:
            eps = e["epsilon"] if isinstance(e["epsilon"], str) else _format_eps(e["epsilon"])
            print(f"  {e['accountant']:12s} eps={eps}  [{e['guarantee']}]")
    return 0


def cmd_synthesize(args: argparse.Namespace) -> int:
    from dpmix_core.data import load_dataset, load_user_data, read_data_file
    from dpmix_core.privacy.release import MixingRelease
    from dpmix_core.synthesis.epsilon_job import background_epsilons
    from dpmix_core.synthesis.export import (
        check_output_path,
        label_columns_note,
        privacy_card,
        table_columns_note,
        with_table_layout,
        write_release,
    )
    from dpmix_core.synthesis.pipeline import planned_release, synthesize

    if args.memmap is not None:
        if args.test_fraction is not None:
            raise CliError("--test-fraction holds records of a --data-file out, not of --memmap arrays")
        if args.csv_units is not None:
            raise CliError("--csv-units is for a FILE.csv release; --memmap writes a folder of .npy chunks")
        if args.categories is not None:
            raise CliError("--categories names the text columns of a --data-file CSV; --memmap reads numbers")
        if args.private_ranges is not None:
            raise CliError("--private-ranges reads every record before mixing: a release in memory (no --memmap)")
        return _synthesize_streaming(args)
    check_output_path(args.out)
    if args.label_column is not None and (args.data_file is None or not args.data_file.lower().endswith(".csv")):
        raise CliError("--label-column names a column of a --data-file CSV")
    own = None  # --test-fraction: the file's records but a held-out split, which the card names
    if args.test_fraction is not None:
        if args.data_file is None:
            raise CliError("--test-fraction holds records of a --data-file out; the datasets have their own test split")
        own = own_data_file(args)
        dataset = own.dataset
    elif args.data_file is not None:  # every record released
        data = read_data_file(args.data_file)
        dataset = load_user_data(
            data, filename=args.data_file, label_column=args.label_column, categories=read_categories_arg(args)
        )
        with_feature_bounds(args, dataset.feature_names, dataset.feature_dim, dataset.categories)
    else:
        if args.feature_bounds is not None:
            raise CliError("--feature-bounds names the columns of a --data-file (or a --memmap source's by index)")
        if args.categories is not None:
            raise CliError("--categories names the text columns of a --data-file CSV")
        dataset = load_dataset(args.dataset, data_dir=args.data_dir, progress=_progress)
    config = _synthesis_config(args)
    csv_units = _csv_units(args, dataset, config)
    # the card's epsilons need only the release description: a second process computes them
    # (importing the accountants) while this one imports torch and mixes
    planned = None
    if config.mechanism != "label-laplace" and config.target_epsilon is None:
        planned = planned_release(config, dataset)
    with background_epsilons(planned, config.delta) as epsilons_for:
        synthesis = synthesize(config, dataset, job=True)  # your own process: the job time limit, same memory limit
        release = synthesis.data.release
        card = privacy_card(synthesis, epsilons=epsilons_for(release) if isinstance(release, MixingRelease) else None)
    if own is not None:
        from dpmix_core.experiments.release_files import own_held_out, with_held_out

        card = with_held_out(card, own_held_out(own))
    if csv_units == "data":
        card = with_table_layout(card, synthesis)  # the card written beside the CSV, and printed with --json
    data_path, card_path = write_release(synthesis, args.out, card=card, csv_units=csv_units)
    if args.json:
        print(json.dumps({"out": str(data_path), "card": str(card_path), **card}, allow_nan=False))
    else:
        print(f"wrote {data_path} ({synthesis.data.num_points} points) and {card_path}")
        print(f"dataset: {dataset.source}, n={dataset.n_train}")
        if own is not None:
            print(
                f"held out: {own.dataset.n_test:,} records, named in the card; score models on them with "
                f"train --release {data_path} --data-file {args.data_file}"
            )
        if csv_units == "data":
            print(table_columns_note(synthesis))
        elif (note := label_columns_note(synthesis)) is not None:
            print(note)
        for e in card["epsilons"]:
            eps = e["epsilon"] if isinstance(e["epsilon"], str) else _format_eps(e["epsilon"])
            print(f"  {e['accountant']:12s} eps={eps}  [{e['guarantee']}]")
    _say_bounds_note(dataset, args, stream=sys.stderr if args.json else None)
    return 0


def _add_release_arguments(p: argparse.ArgumentParser, *, mechanism_required: bool = True) -> None:
    """Dataset and mechanism options shared by ``synthesize`` and ``train``."""
    from dpmix_core.data import DATASET_NAMES
    from dpmix_core.synthesis.pipeline import MECHANISM_DESCRIPTIONS, MECHANISMS, PREPROCESSING

    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", default="embedded", choices=DATASET_NAMES, help="default: embedded MNIST sample")
    src.add_argument("--data-file", help="your own CSV (label column + numeric features) or .npz (x, y)")
    p.add_argument(
        "--label-column",
        metavar="NAME",
        help="--data-file CSV: the column holding the labels (default: one named label, labels, class, target or y, else the first column)",
    )
    p.add_argument("--data-dir", help="folder with the official dataset files (or set DPMIX_DATA_DIR)")
    p.add_argument(
        "--mechanism",
        required=mechanism_required,
        default="dpmix",
        choices=MECHANISMS,
        help=("" if mechanism_required else "default: dpmix. ")
        + " ".join(f"{name}: {MECHANISM_DESCRIPTIONS[name]}" for name in MECHANISMS),
    )
    p.add_argument("--l", type=positive_int, default=256, help="mix degree (Poisson: expected batch m)")
    p.add_argument("--T", type=positive_int, default=10000, help="number of synthetic points")
    p.add_argument("--sigma-x", type=finite_float)
    p.add_argument("--sigma-y", type=finite_float, help="default: sigma-ratio * sigma-x")
    p.add_argument("--sigma-ratio", type=finite_float, default=1.0)
    p.add_argument("--target-epsilon", type=finite_float, help="calibrate sigma to this epsilon")
    p.add_argument(
        "--accountant",
        help="accountant used for --target-epsilon (default: the tightest rigorous one of the mechanism's sampling, "
        "pld-poisson for poisson, rdp-wor otherwise)",
    )
    p.add_argument("--delta", type=finite_float, default=1e-5)
    p.add_argument(
        "--preprocessing",
        choices=list(PREPROCESSING),
        default="unit",
        help="class-centric features: unit = [0,1] (thesis §4.2, default); zscore = z-score with PUBLIC "
        "constants + L2 clip c (DP-CDA); zscore-private = statistics of the private data (opt-in: "
        "no epsilon is then covered); dpmix: unit (default) or clip = records clipped to ||x|| <= --clip-x, "
        "||y|| <= --clip-y (DPFMix App. E.3's DPMix)",
    )
    p.add_argument("--clip", type=finite_float, default=1.0, help="class-centric L2 clip c")
    p.add_argument(
        "--zscore-constants",
        type=_range_pair,
        help="class-centric zscore: public MEAN,STD for every "
        "feature (default: the built-in dataset's documented constants; uploads must state them)",
    )
    p.add_argument(
        "--zscore-constants-file",
        metavar="FILE.npz",
        help="class-centric zscore: per-feature PUBLIC mean and std from a file (make one from a public split "
        "with the zscore-constants command); the numbers' sha256 goes into the run's identity and the card",
    )
    p.add_argument(
        "--features-only",
        action="store_true",
        help="class-centric: account for DP-CDA's same-class swap; labels NOT protected "
        "(default: replace-one, labels protected)",
    )
    p.add_argument(
        "--public-n",
        type=positive_int,
        help="poisson: the public n that sets the rate m/n (default: the dataset's size, stated as public)",
    )
    p.add_argument("--clip-x", type=finite_float, default=1.0, help="poisson, dpmix clip: feature clip Cx")
    p.add_argument("--clip-y", type=finite_float, default=1.0, help="poisson, dpmix clip: label clip Cy")
    p.add_argument("--hard-labels", action="store_true", help="class-centric: argmax labels (DP-CDA Eq. 1)")
    p.add_argument(
        "--clamp-negative",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set negative released values to 0 (post-processing; [0,1] data: dpmix, local, class-centric unit). "
        "Default: off for synthesize; for train, the model's paper where the release allows it (thesis-cnn: on, "
        "as the thesis's code does)",
    )
    p.add_argument("--label-epsilon", type=finite_float, default=1.0, help="label-laplace epsilon")
    p.add_argument("--label-task", choices=["classification", "regression"], default="classification")
    p.add_argument(
        "--feature-range", type=bounds_pair, help="public LO,HI bounds of float features (for [0,1] scaling)"
    )
    p.add_argument("--feature-bounds", metavar="FILE.csv", help=FEATURE_BOUNDS_HELP)
    p.add_argument("--categories", metavar="FILE.csv", help=CATEGORIES_HELP)
    add_private_ranges(p)
    p.add_argument(
        "--features",
        choices=["pixels", "scattering"],
        default="pixels",
        help="what is mixed: pixels, or scattering = public ScatterNet (J=2, L=8) of pixels/255 with "
        "per-sample GroupNorm (27 groups) before clipping and mixing (DPFMix App. E; "
        "use --mechanism poisson)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def _add_synthesize(sub) -> None:
    p = sub.add_parser("synthesize", help="release a synthetic dataset (.npz/.csv) with its privacy card")
    _add_release_arguments(p)
    p.add_argument(
        "--out",
        required=True,
        help="FILE.npz or FILE.csv (a FILE.card.json is written beside it); with --memmap: an output folder",
    )
    p.add_argument(
        "--test-fraction",
        type=finite_float,
        metavar="F",
        help="--data-file: hold this share of its records out (stratified, never released; the card says which), "
        "so that train --release OUT --data-file FILE can score models on them. Default: release every record",
    )
    p.add_argument(
        "--csv-units",
        choices=["data", "release"],
        help="FILE.csv of a --data-file table: 'data' writes the table's columns in its units (its label column, the "
        "features mapped back with the public bounds, the released label scores); 'release' writes y0.., x0.. in "
        "[0,1]. Default: 'data' where the release maps back (dpmix or class-centric 'unit', local), else 'release'",
    )
    p.add_argument("--memmap", help="X.npy (n, d) read memory-mapped in chunks: releases larger than memory")
    p.add_argument("--labels", help="Y.npy (n,) integer labels for --memmap")
    p.add_argument("--num-classes", type=positive_int, help="K for --memmap")
    p.set_defaults(func=cmd_synthesize)


def _csv_units(args: argparse.Namespace, dataset, config) -> str:
    """--csv-units, checked before any work: "data" (a table's columns in its units) where asked for or, unset, where
    a --data-file table's FILE.csv release maps back; else "release"."""
    from dpmix_core.synthesis.pipeline import table_refusal

    is_csv = args.out.lower().endswith(".csv")
    if args.csv_units is None:
        own_table = args.data_file is not None and is_csv
        return "data" if own_table and table_refusal(config, dataset) is None else "release"
    if args.csv_units == "data":
        if not is_csv:
            raise CliError(f"--csv-units data writes a FILE.csv; --out is {Path(args.out).name!r}")
        if (why := table_refusal(config, dataset)) is not None:
            raise CliError(f"--csv-units data: {why}. Use --csv-units release")
    return args.csv_units


def _synthesis_config(args: argparse.Namespace, clamp_by_default: bool = False):
    """The release the options describe. ``clamp_by_default`` (``train``: the model's paper clamps) sets
    negative released values to 0 where the user left --clamp-negative unset and the release is [0,1]-scaled."""
    from dataclasses import replace

    from dpmix_core.synthesis.pipeline import SynthesisConfig

    if args.accountant is not None and args.accountant not in ACCOUNTANT_NAMES:
        raise CliError(f"unknown accountant {args.accountant!r}; choose one of: {', '.join(ACCOUNTANT_NAMES)}")
    config = SynthesisConfig(
        mechanism=args.mechanism,
        l=args.l,
        T=args.T,
        sigma_x=args.sigma_x,
        sigma_y=args.sigma_y,
        sigma_ratio=args.sigma_ratio,
        target_epsilon=args.target_epsilon,
        accountant=args.accountant,
        delta=args.delta,
        preprocessing=args.preprocessing,
        clip=args.clip,
        zscore_constants=args.zscore_constants,
        zscore_constants_file=args.zscore_constants_file,
        protect_labels=not args.features_only,
        public_n=args.public_n,
        clip_x=args.clip_x,
        clip_y=args.clip_y,
        hard_labels=args.hard_labels,
        clamp_negative=bool(args.clamp_negative),
        label_epsilon=args.label_epsilon,
        label_task=args.label_task,
        feature_range=args.feature_range,
        features=args.features if args.mechanism != "label-laplace" else "pixels",
        range_epsilon=range_epsilon_arg(args),
        exact_features=getattr(args, "exact_features", ()),
        seed=args.seed,
        device=args.device,
    )
    if args.clamp_negative is None and clamp_by_default and config.unit_scaled:
        config = replace(config, clamp_negative=True)
    return config


_RELEASE_FILE_KEEPS = ("data_dir", "seed", "device", "json", "data_file")  # release options --release still uses


def _options_given(
    args: argparse.Namespace, add_arguments: Callable[[argparse.ArgumentParser], None], keep: Sequence[str]
) -> list[str]:
    """The options among those ``add_arguments`` adds (but ``keep``) that the user set to other than their defaults,
    as typed ("--sigma-x"): what a --release FILE, whose card holds them, refuses."""
    defaults = argparse.ArgumentParser(add_help=False)
    add_arguments(defaults)
    return [
        "--" + name.replace("_", "-")
        for name, default in vars(defaults.parse_args([])).items()
        if name not in keep and getattr(args, name) != default
    ]


def _release_file_options(args: argparse.Namespace):
    """--release FILE: the run's dataset, release parameters and file identity, all from the file's card, and with
    --data-file the data it was made from (:class:`~dpmix_core.experiments.run_data.OwnData`, split as the card says
    its records were held out; else None).

    Options that describe a release (--mechanism, --l, --dataset, ...) would contradict the card: refused.
    """
    from dpmix_core.experiments.release_files import (
        check_release_memory,
        held_out_data,
        read_release,
        release_run_options,
    )

    given = _options_given(args, lambda p: _add_release_arguments(p, mechanism_required=False), _RELEASE_FILE_KEEPS)
    if given:
        raise CliError(f"--release takes the release's parameters from its card; drop {', '.join(given)}")
    if args.method != "mixing":
        raise CliError(f"--release trains on a mixing release; drop --method {args.method}")
    if args.test_fraction is not None:
        raise CliError("--release: its card says which records of its data file were held out; drop --test-fraction")
    check_release_memory(args.release)
    release = read_release(args.release)
    own = held_out_data(release, args.data_file) if args.data_file is not None else None
    return release_run_options(release, own), own


def _bounds_note(records, args: argparse.Namespace) -> str | None:
    """What to say when --feature-range / --feature-bounds clip a --data-file's training ``records`` (a Dataset) or
    barely fit them (bounds_fit_note; for the data's holder, never in a release). Said once the command has done
    its work, after any refusal."""
    from dpmix_core.data import bounds_fit_note

    bounds = getattr(args, "feature_range", None)
    if args.data_file is None or bounds is None:
        return None
    return bounds_fit_note(records.x_train, bounds, records.feature_names)


def _say_bounds_note(records, args: argparse.Namespace, *, stream=None) -> None:
    """``note: …`` (:func:`_bounds_note`) on ``stream`` (stdout by default), when there is one."""
    if note := _bounds_note(records, args):
        print(f"note: {note}", file=stream or sys.stdout)


def _label_only(args: argparse.Namespace) -> None:
    """Label-only Laplace is one choice, not two: ``--method label-laplace`` releases with the label-laplace
    mechanism and ``--mechanism label-laplace`` trains with that method (either alone was refused, asking for the
    other). A mixing mechanism named beside ``--method label-laplace`` is a contradiction: CliError."""
    if args.mechanism == "label-laplace" and args.method == "mixing":
        args.method = "label-laplace"
    elif args.method == "label-laplace" and args.mechanism != "label-laplace":
        if args.mechanism != "dpmix":  # dpmix is --mechanism's default: left unset
            raise CliError(
                f"--method label-laplace releases noisy labels, not a {args.mechanism} mixing release: drop "
                "--mechanism (or use --method mixing)."
            )
        args.mechanism = "label-laplace"


def cmd_train(args: argparse.Namespace) -> int:
    from dpmix_core.cli.train import train_repeats
    from dpmix_core.training.protocols import PROTOCOLS

    _label_only(args)
    release_file: dict = {}
    if args.release is not None:  # the data and the release parameters from the card (and --data-file)
        release_file, own = _release_file_options(args)
        own_data: dict = {}
    else:
        own = own_data_file(args)
        own_data = {} if own is None else dict(own.options, feature_range=args.feature_range)
    own_images = own is None or own.dataset.x_train.ndim >= 3
    features = release_file.pop("features", args.features)
    dataset = release_file.pop("dataset", own_data.pop("dataset", args.dataset))
    model = args.model or ("scatter-linear" if features == "scattering" else "thesis-cnn" if own_images else "linear")
    clamps = model in PROTOCOLS and PROTOCOLS[model].clamp_negative
    synthesis = release_file.pop("synthesis", None) or (
        _synthesis_config(args, clamp_by_default=clamps) if args.method in ("mixing", "label-laplace") else None
    )
    protocol = dict(
        lr=args.lr,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        schedule=args.schedule,
        lr_milestones=args.milestones,
        lr_gamma=args.lr_gamma,
        lr_step_epochs=args.lr_step_epochs,
        lr_patience=args.lr_patience,
        early_stopping=args.early_stopping,
        init=args.init,
        precision=args.precision,
        test_inputs=args.test_inputs,
        val_fraction=args.val_fraction,
        input_norm=args.input_norm,
        pca_components=args.pca_components,
        features=features,
        **release_file,
        **own_data,
    )
    summary = train_repeats(
        method=args.method,
        dataset=dataset,
        data_dir=args.data_dir,
        synthesis=synthesis,
        model=model,
        loss=args.loss,
        epochs=args.epochs,
        repeats=args.repeats,
        seed=args.seed,
        device=args.device,
        dpsgd_epsilon=args.target_epsilon,
        dpsgd_delta=args.delta,
        progress=None if args.json else lambda line: print(line, file=sys.stderr),
        checkpoint_dir=args.checkpoint_dir,
        **protocol,
    )
    if args.json:
        if own is not None:
            _say_bounds_note(own.dataset, args, stream=sys.stderr)
        print(json.dumps(summary, allow_nan=False))
    else:
        acc, std = summary["test_accuracy"], summary["test_accuracy_std"]
        print(
            f"test accuracy {100 * acc:.2f} % ± {100 * (std or 0):.2f} over {summary['repeats']} run(s), "
            f"{summary['seconds']:.1f} s"
        )
        if summary.get("data"):
            print(f"note: {summary['data']['note']}")
        for note in summary["notes"]:
            if note.startswith(model):  # what the model's fit chose and its caveats (corrected-lsq's floor)
                print(f"note: {note}")
        if own is not None:
            _say_bounds_note(own.dataset, args)
        _print_other_test_inputs(summary, summary["config"].get("test_inputs", "release"))
        if summary["collapsed"]:
            print(f"WARNING: {summary['collapsed']} of {summary['repeats']} run(s) {summary['collapse_reason']}")
        _print_batchnorm_shift(summary)
        blind = [r["selection_note"] for r in summary["runs"] if r.get("selection_note")]
        if blind:
            print(f"note ({len(blind)} of {summary['repeats']} run(s)): {blind[0]}")
        if synthesis is not None and synthesis.clamp_negative and args.clamp_negative is None and args.release is None:
            print(
                f"note: negative released values set to 0, as {model}'s paper does (post-processing, same epsilon); "
                "--no-clamp-negative keeps them"
            )
        if args.test_inputs == "unclipped":
            print(
                "note: test images z-scored as the release's records but not clipped to ||x|| <= c "
                "(--test-inputs unclipped); the release and its epsilon are unchanged"
            )
        elif args.test_inputs == "release-scale":
            print(
                "note: test images z-scored and clipped as the release's records, then scaled to the released "
                "points' median norm (--test-inputs release-scale); the release and its epsilon are unchanged"
            )
        guarantees = summary.get("guarantee") or {}
        for name, eps in summary["epsilon"].items():
            label = f"  [{guarantees[name]}]" if name in guarantees else ""
            print(f"  {name:12s} eps={eps if isinstance(eps, str) else _format_eps(eps)}{label}")
    return 0


def _print_other_test_inputs(summary: dict, own: str) -> None:
    """One line per other test loader the release has (a clipped class-centric z-score release: with and without
    the clip): the same trained models' mean accuracy through it (training never reads the test split)."""
    readings = [r["test_accuracy_by_inputs"] for r in summary["runs"] if r.get("test_accuracy_by_inputs")]
    for name in readings[0] if readings else ():
        if name != own:
            acc = statistics.fmean(r[name]["accuracy"] for r in readings)
            print(f"  the same model(s) read with --test-inputs {name}: {100 * acc:.2f} % (no retraining)")


def _print_batchnorm_shift(summary: dict) -> None:
    """One line when BatchNorm statistics re-estimated on the test inputs score clearly more (a diagnostic;
    a collapsed run already says it in its collapse reason)."""
    recal = [
        r["test_accuracy_bn_recalibrated"] for r in summary["runs"] if r["test_accuracy_bn_recalibrated"] is not None
    ]
    if recal and not summary["collapsed"]:
        note = shift_note(summary["test_accuracy"], sum(recal) / len(recal), collapsed=False)
        if note is not None:
            print(f"note: {note}")


def _add_train(sub) -> None:
    from dpmix_core.training.names import (
        INITS,
        INPUT_NORMS,
        LOSSES,
        METHODS,
        MODELS,
        OPTIMIZERS,
        PRECISIONS,
        SCHEDULES,
        TEST_INPUTS,
    )

    p = sub.add_parser("train", help="train a model on a release (or a baseline) and evaluate on the real test set")
    _add_release_arguments(p, mechanism_required=False)
    p.add_argument(
        "--release",
        metavar="FILE",
        help="train on a release made earlier by synthesize (FILE.npz, or FILE.csv with FILE.card.json) instead of "
        "making one: dataset, mechanism and noise come from its card, epsilon is the card's",
    )
    p.add_argument(
        "--method",
        choices=METHODS,
        default="mixing",
        help="mixing (train on the release) or a baseline on the same model",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        help="default: thesis-cnn (scatter-linear with --features scattering; linear for a --data-file of features)",
    )
    p.add_argument("--loss", choices=LOSSES, help="default: the model's paper protocol")
    p.add_argument(
        "--epochs", type=positive_int, help="default: 5 (50 for the linear model on a --data-file: its protocol)"
    )
    # training protocol: every option left out takes the model's paper protocol (dpmix_core.training.protocols)
    p.add_argument("--lr", type=finite_float, help="initial learning rate")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--optimizer", choices=OPTIMIZERS)
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="constant, step (x gamma every --lr-step-epochs), multistep (x gamma at --milestones), cosine, "
        "plateau (x gamma after --lr-patience epochs without a lower validation loss: torch's ReduceLROnPlateau)",
    )
    p.add_argument("--milestones", type=_milestones, help="multistep epochs, e.g. 80,120,160 (DPFMix App. E.3)")
    p.add_argument("--lr-gamma", type=finite_float, help="step/multistep/plateau factor (plateau: 0 < gamma < 1)")
    p.add_argument("--lr-step-epochs", type=positive_int, help="step schedule period")
    p.add_argument(
        "--lr-patience",
        type=int,
        metavar="EPOCHS",
        help="plateau schedule: epochs without a lower validation loss before the rate drops (default 10, torch's)",
    )
    p.add_argument(
        "--early-stopping",
        type=int,
        metavar="PATIENCE",
        help="stop after PATIENCE epochs without better validation accuracy, keeping the best weights "
        "(thesis §4.2: 3); 0 = off",
    )
    p.add_argument(
        "--init",
        choices=INITS,
        help="weight initialisation: torch's defaults, or keras (Glorot-uniform, zero biases: TensorFlow's, "
        "which the thesis's CNN started from); default: the model's paper protocol",
    )
    p.add_argument("--val-fraction", type=finite_float, help="share of the release held out for validation (0.1)")
    p.add_argument(
        "--input-norm",
        choices=INPUT_NORMS,
        help="the training inputs' scaling: none; rms (one factor: their root mean square); standardize (each "
        "feature by its mean and sd: post-processing on a release, refused for DP-SGD); private-ranges (DP-SGD on a "
        "--data-file: each feature's range released privately, as --private-ranges finds it for a release, composed "
        "into epsilon; dp-ranges: its first version, 3 rounds over every column). Default: the model's "
        "protocol (standardize for the linear model on a --data-file, private-ranges for DP-SGD there)",
    )
    p.add_argument(
        "--test-inputs",
        choices=TEST_INPUTS,
        help="the real test split through the release's own feature map (release, the default) or, for a "
        "class-centric z-score release, z-scored without its clip (unclipped: DP-CDA's test partition read as "
        "z-scored only) or clipped and scaled to the released points' median norm (release-scale)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="training arithmetic: fp32 (default), or bf16 (bfloat16 autocast: 1.1-2.9x faster on a CPU with "
        "native bfloat16, refused on one without; a different run from fp32)",
    )
    p.add_argument(
        "--pca-components",
        type=positive_int,
        metavar="K",
        help="--method dp-pca: dimensions of the DP projection (default 50; at most the data's features)",
    )
    p.add_argument(
        "--test-fraction",
        type=finite_float,
        metavar="F",
        help="--data-file: the share of its records held out as the test split (default 0.2; stratified, the same "
        "records for every seed, never released)",
    )
    p.add_argument("--repeats", type=positive_int, default=1, help="runs with seeds seed, seed+1, ...")
    p.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="save each run's training state in DIR at most once a minute; the same command run again "
        "continues an interrupted run from its last saved epoch",
    )
    p.set_defaults(func=cmd_train)


def _add_sweep(sub) -> None:
    from dpmix_core.cli.sweep import add_sweep_arguments, cli_sweep
    from dpmix_core.data import DATASET_NAMES

    p = sub.add_parser("sweep", help="run a sweep spec (or preset:NAME) into the results store; resumable")
    add_sweep_arguments(p)
    p.add_argument(
        "--repeats",
        type=positive_int,
        help="seeds per point instead of the spec's (seeds 0..N-1: a later, larger N reuses these runs)",
    )
    p.add_argument(
        "--values",
        type=_axis_number,
        nargs="+",
        metavar="V",
        help="run only these axis values (each must be one of the spec's: the runs are the spec's own)",
    )
    p.add_argument(
        "--series",
        nargs="+",
        metavar="NAME",
        help="run only these series (names as the spec gives them, e.g. 'Poisson / gdp-clt'; the runs are the "
        "spec's own)",
    )
    p.add_argument(
        "--seeds",
        type=nonnegative_int,
        nargs="+",
        metavar="S",
        help="run only these of the sweep's seeds (0..repeats-1 for a preset; with --repeats N, 0..N-1)",
    )
    data = p.add_mutually_exclusive_group()
    data.add_argument(
        "--dataset",
        choices=DATASET_NAMES,
        help="run the protocol on another dataset (its own sweep, NAME@dataset; data from $DPMIX_DATA_DIR, "
        "the cache, or a download)",
    )
    data.add_argument(
        "--data-file",
        metavar="FILE",
        help="run the protocol on your own CSV / .npz (its own sweep, NAME@FILE-<hash>): a stratified share of its "
        "records (--test-fraction, 0.2) is held out as the test split and never released",
    )
    p.add_argument("--label-column", metavar="NAME", help="--data-file CSV: the column holding the labels")
    p.add_argument("--test-fraction", type=finite_float, metavar="F", help="--data-file: records held out (0.2)")
    p.add_argument("--feature-range", type=bounds_pair, help="--data-file: public LO,HI bounds of float features")
    p.add_argument("--feature-bounds", metavar="FILE.csv", help="--data-file: " + FEATURE_BOUNDS_HELP)
    p.add_argument("--categories", metavar="FILE.csv", help=CATEGORIES_HELP)
    p.set_defaults(func=lambda args: cli_sweep(args, expand=lambda text: _expand_sweep(text, args)))


def _expand_sweep(text: str, args: argparse.Namespace):
    """The sweep named on the command line (trade_offs loads pandas and plotly: only when a sweep runs)."""
    from dpmix_core.experiments.trade_offs import expand_cli_spec
    from dpmix_core.training.protocols import own_data_protocol_note

    own = own_data_file(args, also=("feature_range",))
    expanded = expand_cli_spec(
        text,
        repeats=_checked_repeats(args.repeats),
        values=args.values,
        series=args.series,
        seeds=args.seeds,
        dataset=args.dataset,
        own=own,
        feature_range=args.feature_range,
    )
    # said by cli_sweep once every run is checked (a refusal stays one line); a spec file may name a file itself
    notes = (
        None if own is None else _bounds_note(own.dataset, args),
        own_data_protocol_note(c for _, c, _ in expanded[1]),
    )
    args.notes = [note for note in notes if note]
    return expanded


def _checked_repeats(repeats: int | None) -> int | None:
    """--repeats bounded by DPMIX_MAX_RUNS before the run list is built (building it costs time too)."""
    from dpmix_core.resources.limits import check_sweep_cost

    if repeats is not None:
        check_sweep_cost(repeats)
    return repeats


def _axis_number(text: str) -> float:
    """An axis value on the command line: an integer, a float, or inf."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (or inf). Found {text!r}.") from None
    return int(value) if value.is_integer() else value


def _add_audit(sub) -> None:
    from dpmix_core.cli.audit import add_audit_arguments, cli_audit

    p = sub.add_parser("audit", help="empirical epsilon lower bound next to every accountant's epsilon")
    add_audit_arguments(p)
    p.set_defaults(func=cli_audit)


def _add_best_release(sub) -> None:
    from dpmix_core.cli.best_release import add_best_release_arguments, cli_best_release

    p = sub.add_parser(
        "best-release",
        help="search m, T and lambda of the feature-mixing release for a target (epsilon, delta), scored on the "
        "release's own validation split",
    )
    add_best_release_arguments(p)
    p.set_defaults(func=cli_best_release)


def _add_solve_epsilon(sub) -> None:
    from dpmix_core.cli.solve_epsilon import add_solve_epsilon_arguments, cli_solve_epsilon

    p = sub.add_parser("solve-epsilon", help="the epsilon a stored sweep's series needs for X %% test accuracy")
    add_solve_epsilon_arguments(p)
    p.set_defaults(func=cli_solve_epsilon)


def _add_zscore_constants(sub) -> None:
    from dpmix_core.cli.zscore_constants import add_zscore_constants_arguments, cli_zscore_constants

    p = sub.add_parser(
        "zscore-constants", help="per-feature public z-score constants from a dataset's test split (FILE.npz)"
    )
    add_zscore_constants_arguments(p)
    p.set_defaults(func=cli_zscore_constants)


def _add_categories_template(sub) -> None:
    from dpmix_core.cli.categories_template import add_categories_template_arguments, cli_categories_template

    p = sub.add_parser(
        "categories-template",
        help="a categories file (column,category) to check for --categories: the words a CSV's text columns hold",
    )
    add_categories_template_arguments(p)
    p.set_defaults(func=cli_categories_template)


def _add_bounds_template(sub) -> None:
    from dpmix_core.cli.bounds_template import add_bounds_template_arguments, cli_bounds_template

    p = sub.add_parser(
        "bounds-template", help="a bounds file (column,low,high) to fill in for --feature-bounds, from a file's columns"
    )
    add_bounds_template_arguments(p, bounds_pair)
    p.set_defaults(func=cli_bounds_template)


def _add_verify(sub) -> None:
    from dpmix_core.cli.verify import add_verify_arguments, cli_verify

    p = sub.add_parser(
        "verify", help="recompute a release file's epsilons from its privacy card and compare (exit 1 if they differ)"
    )
    add_verify_arguments(p)
    p.set_defaults(func=cli_verify)


def cmd_report(args: argparse.Namespace) -> int:
    from dpmix_core.resources.files import check_new_file, write_files_atomically
    from dpmix_core.views.html_report import accountant_report

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise CliError(f"--out must end in .html. Found {out.name!r}")
    check_new_file(out, what="--out")  # before any work
    dataset, note = "", None
    if args.release is not None:
        setting, delta, model, dataset, note = _release_file_setting(args)
    else:
        missing = [f"--{name.replace('_', '-')}" for name in ("n", "l", "T", "sigma_x") if getattr(args, name) is None]
        if missing:
            raise CliError(f"report needs {', '.join(missing)} (the release's sizes and noise), or --release FILE")
        setting, delta, model = _setting(args), args.delta, args.model
    about = None if args.release is None else {"release_file": str(args.release), "dataset": dataset}
    page = accountant_report(setting, delta, model, about=about, note=note)
    write_files_atomically({out: page.encode("utf-8")})
    print(f"wrote {out} ({len(page) / 1e6:.1f} MB, self-contained: opens offline)")
    if args.release is not None:
        print(f"release model: {model} (from the card of {args.release}), delta = {delta:g}")
    if note is not None:
        print(f"note: {note}")
    return 0


def _release_file_setting(args: argparse.Namespace) -> tuple[MixingSetting, float, str, str, str | None]:
    """The what-if, delta, release model, dataset (in words) and what the card's epsilon leaves to another number
    (a search, private ranges) of ``report --release FILE``; an option that describes the release is refused (it
    would contradict the card), as ``train --release`` does."""
    from dpmix_core.experiments.release_files import read_card
    from dpmix_core.views.release_card import card_setting, search_note

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_setting_arguments(parser, with_sigma=True, with_accountant=False, required=False)
        parser.add_argument("--model", default="dpmix")

    given = _options_given(args, add_arguments, keep=("json",))
    if given:
        raise CliError(f"--release takes the release's parameters from its card; drop {', '.join(given)}")
    card = read_card(args.release)
    try:
        setting, model = card_setting(card)
    except ValueError as exc:
        raise CliError(f"{args.release}: {exc}; report --release covers mixing releases whose card verifies") from None
    dataset = str(card["dataset"].get("source", card["dataset"].get("name", "")))
    return setting, float(card["delta"]), model, dataset, search_note(card)


def _add_report(sub) -> None:
    from dpmix_core.views.release_models import RELEASE_MODELS

    p = sub.add_parser("report", help="a self-contained HTML report of a release's privacy (for a deck or e-mail)")
    add_setting_arguments(p, with_sigma=True, with_accountant=False, required=False)
    p.add_argument(
        "--model",
        choices=list(RELEASE_MODELS),
        default="dpmix",
        help="release model of the headline: " + "; ".join(f"{k}: {v}" for k, v in RELEASE_MODELS.items()),
    )
    p.add_argument(
        "--release",
        metavar="FILE",
        help="a release made by synthesize (FILE.npz, FILE.csv with FILE.card.json beside it, or FILE.card.json): "
        "its sizes, noise, bounds, delta and release model come from its card, which must verify; instead of "
        "--n, --l, --T, --sigma-x and the other options",
    )
    p.add_argument("--out", required=True, help="FILE.html")
    p.set_defaults(func=cmd_report)


def cmd_sweep_report(args: argparse.Namespace) -> int:
    from dpmix_core.resources.files import check_new_file, write_files_atomically
    from dpmix_core.runtime.store import ResultStore
    from dpmix_core.views.sweep_report import sweep_report

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise CliError(f"--out must end in .html. Found {out.name!r}")
    check_new_file(out, what="--out")  # before any work
    if args.beside and args.against != "certified":
        raise CliError("--beside needs --against certified: other sweeps share only the certified-epsilon axis")
    sweep: int | str = int(args.sweep) if args.sweep.isdigit() else args.sweep
    page = sweep_report(
        ResultStore.existing(args.store),
        sweep,
        metric=args.metric,
        epsilon_column=args.epsilon_axis,
        test_rows=args.test_rows,
        test_inputs=args.test_inputs,
        against=args.against,
        beside=[int(b) if b.isdigit() else b for b in args.beside or ()],
    )
    write_files_atomically({out: page.encode("utf-8")})
    print(f"wrote {out} ({len(page) / 1e6:.1f} MB, self-contained: opens offline)")
    return 0


def _add_sweep_report(sub) -> None:
    p = sub.add_parser(
        "sweep-report", help="a self-contained HTML report of a stored sweep's accuracy vs privacy (for a deck)"
    )
    p.add_argument("sweep", help="a sweep in the results store: its name or number")
    p.add_argument("--out", required=True, help="FILE.html")
    p.add_argument("--store", help="results store (default: $DPMIX_STORE or ~/.cache/dpmix/results.sqlite)")
    p.add_argument("--metric", choices=["test_accuracy", "test_mse"], default="test_accuracy")
    p.add_argument("--epsilon-axis", help="an accountant's epsilon on a second axis, e.g. pld-poisson")
    p.add_argument(
        "--against",
        choices=["axis", "certified"],
        default="axis",
        help="draw the accuracy against the sweep's own axis, or against each point's certified epsilon (the "
        "smallest rigorous upper bound its runs recorded)",
    )
    p.add_argument(
        "--beside",
        nargs="+",
        metavar="SWEEP",
        help="with --against certified: other sweeps (names or numbers) drawn on the same certified-epsilon axis",
    )
    from dpmix_core.data import TEST_ROWS
    from dpmix_core.training.names import TEST_INPUTS

    p.add_argument(
        "--test-rows",
        choices=TEST_ROWS,
        help="accuracy on every test row or on one half (default: what the sweep's spec reports; odd when the even "
        "rows gave the release's public constants)",
    )
    p.add_argument(
        "--test-inputs",
        choices=TEST_INPUTS,
        help="read the trained models through this test loader (default: the sweep's; a clipped class-centric "
        "z-score release's runs record each: with the release's clip, without it, and at the release's scale)",
    )
    p.set_defaults(func=cmd_sweep_report)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m dpmix_core",
        description="DPMix Studio core: differentially private data release by random mixing (accounting, "
        "releases with their privacy cards, training, sweeps, audits, reports).",
        epilog="--debug (anywhere): print the traceback of an error too",
    )
    parser.add_argument("--version", action="version", version=f"DPMix Studio {dpmix_core.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("epsilon", help="epsilon of a mixing release under one or all accountants")
    add_setting_arguments(p, with_sigma=True)
    p.add_argument(
        "--statement",
        action="store_true",
        help="print the release and the accountant's guarantee as one paragraph for a paper (one accountant)",
    )
    p.set_defaults(func=cmd_epsilon)
    p = sub.add_parser("calibrate", help="sigma_x (sigma_y = lambda sigma_x) reaching a target epsilon")
    add_setting_arguments(p, with_sigma=False)
    p.add_argument("--target-epsilon", type=finite_float, required=True)
    p.add_argument("--sigma-ratio", type=finite_float, default=1.0, help="lambda = sigma_y / sigma_x")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("max-points", help="the most synthetic points T whose epsilon stays within a target")
    add_setting_arguments(p, with_sigma=True, with_T=False)
    p.add_argument("--target-epsilon", type=finite_float, required=True)
    p.set_defaults(func=cmd_max_points)
    _add_synthesize(sub)
    _add_train(sub)
    _add_sweep(sub)
    _add_audit(sub)
    _add_report(sub)
    _add_sweep_report(sub)
    _add_best_release(sub)
    _add_solve_epsilon(sub)
    _add_verify(sub)
    _add_zscore_constants(sub)
    _add_bounds_template(sub)
    _add_categories_template(sub)
    return parser


def error_line(exc: BaseException) -> str:
    """The one stderr line for an error that ends a command (no traceback, no newline inside)."""
    if isinstance(exc, MemoryError):
        text = (
            "out of memory: the request is larger than this machine can hold; lower T, l, the trials or "
            "the repeats (or DPMIX_MAX_MEMORY to be refused earlier)"
        )
    elif isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        text = f"{exc.strerror}{where}"
    elif isinstance(exc, sqlite3.Error):
        text = f"results store: {exc}"
    else:
        text = str(exc) or type(exc).__name__
    return "error: " + " ".join(text.split())


def exit_without_teardown(code: int) -> NoReturn:
    """End this process with ``code`` after the atexit handlers and a flush, skipping the interpreter's
    teardown (what ``python -m dpmix_core`` does once a command has returned; issue #16).

    Tearing down torch's ~1,000 modules at exit costs ~0.4 s of CPU, more than writing a release:
    ``import torch`` plus a 190 MB array took 1.34-1.45 s user CPU with a normal exit and 0.91-1.01 s
    this way (``/usr/bin/time``, 4 runs each, load 4.7-5.3 on 2 cores). Every command has closed its
    files when it returns (they are written with ``with`` or by :mod:`dpmix_core.resources.files`), the
    atexit handlers still run here, and stdout/stderr are flushed. When another non-daemon thread is
    still alive (the interpreter would join it), or a flush fails (a closed pipe), the normal exit runs.
    """
    import atexit
    import os
    import threading

    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a job scheduler), raised in the main thread as Ctrl-C's KeyboardInterrupt is,
    so that a command's cleanup runs: a release being written leaves no ``.partial`` folder or temporary file."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def stop_on_sigterm() -> None:
    """Make SIGTERM end a command as Ctrl-C does (:class:`Terminated`, exit 143). For ``python -m dpmix_core`` only:
    a library caller keeps its own handlers. (Python's default ends the process at once, skipping every
    ``finally``: a streamed release killed by ``timeout`` left its whole ``.OUT.partial-*`` folder behind.)"""
    signal.signal(signal.SIGTERM, _raise_terminated)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every user error, and MemoryError/OSError/store errors, ends as one stderr
    line and exit code 2 (``--debug``: the traceback too)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = attach_negative_pairs([a for a in argv if a != "--debug"])
    try:
        args = build_parser().parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except (CliError, ValueError, MemoryError, OSError, sqlite3.Error) as exc:
        if debug:
            traceback.print_exc()
        print(error_line(exc), file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("error: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
