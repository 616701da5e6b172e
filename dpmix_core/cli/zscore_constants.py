"""``python -m dpmix_core zscore-constants``: per-feature public z-score constants from a dataset's test split.

Writes the .npz that ``--zscore-constants-file`` (and a spec's ``synthesis.zscore_constants_file``) reads, and
prints the numbers' sha256 (the run's identity). Only the *test* split is offered: it is public, while the
training split is the private data the release protects (its statistics are ``zscore-private``, never covered).
"""

from __future__ import annotations

import argparse

__all__ = ["add_zscore_constants_arguments", "cli_zscore_constants"]


def add_zscore_constants_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``zscore-constants`` (wire with ``set_defaults(func=cli_zscore_constants)``)."""
    from dpmix_core.data import DATASET_NAMES, TEST_ROWS

    parser.add_argument("--dataset", choices=DATASET_NAMES, default="mnist")
    parser.add_argument("--data-dir", help="folder holding the dataset (default: $DPMIX_DATA_DIR, the cache)")
    parser.add_argument(
        "--rows",
        choices=TEST_ROWS,
        default="all",
        help="rows of the test split: all, or even / odd (fix the constants on one half, report accuracy on the "
        "other: a run's test_accuracy_halves)",
    )
    parser.add_argument("--out", required=True, help="FILE.npz")
    parser.add_argument("--json", action="store_true", help="print the file, source and sha256 as one JSON object")


def cli_zscore_constants(args: argparse.Namespace) -> int:
    """Compute, write atomically, and print where the constants come from and their sha256."""
    import json
    from pathlib import Path

    from dpmix_core.data import load_dataset
    from dpmix_core.resources.files import check_new_file
    from dpmix_core.synthesis.public_constants import write_zscore_constants, zscore_constants_from_test_split

    out = Path(args.out)
    if out.suffix != ".npz":
        raise ValueError(f"--out must end in .npz. Found {out.name!r}.")
    check_new_file(out, what="--out")  # before the dataset is read
    constants = zscore_constants_from_test_split(load_dataset(args.dataset, data_dir=args.data_dir), args.rows)
    write_zscore_constants(out, constants)
    if args.json:
        print(json.dumps({"file": str(out), "source": constants.source, "sha256": constants.sha256}))
    else:
        print(f"wrote {out}: {constants.dim} features; {constants.source}")
        print(f"sha256 {constants.sha256}")
    return 0
