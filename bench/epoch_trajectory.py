"""Test accuracy after every epoch of one preset run, next to the release's own validation loss (a diagnostic).

    .venv/bin/python bench/epoch_trajectory.py --data-dir ../shared/data --preset dpfmix-table1 --epsilon 1 \
        --series Poisson --epochs 10
    .venv/bin/python bench/epoch_trajectory.py --data-dir ../shared/data --preset dpfmix-table1 --epsilon 1 \
        --series Poisson --epochs 4 --set input_norm='"rms"'
    .venv/bin/python bench/epoch_trajectory.py --data-dir .devdata --dataset fashion-mnist \
        --preset docs/specs/dpcda-table2-public-pixel-zscore-l-lr1e-4.json --value 1 --epsilon 20 --epochs 30 \
        --set early_stopping=null test_inputs='"release-scale"'

The run is the preset's (``--preset``: a preset's name or a spec file, as ``sweep`` takes them; on ``--dataset``
as ``sweep --dataset`` moves it; target epsilon ``--epsilon``, axis value ``--value`` where given, the first
series whose name contains ``--series``, seed ``--seed``) with ``--epochs`` and the fields of ``--set`` changed;
the learning-rate schedule is the preset's, so a shorter run is the first epochs of the full one. Each epoch's
test accuracy is given on all test rows and on the odd rows (the rows a spec that takes public constants from the
even ones reports). The test split is read after each epoch through
``run_config(watch=...)``, which neither trains nor draws random numbers: the run is the one the store would
hold. Nothing may be chosen with these numbers (they are test accuracies); REPRODUCTION.md ("The inputs as
released") used them to show what the release's validation split cannot see. Prints a markdown table; ``--json
FILE`` also writes the rows; ``--progress FILE`` appends each epoch's row as it is read (a long run cut off
still leaves its trajectory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from set_fields import parse_set  # noqa: E402  (bench/ is on sys.path when a script runs)

from dpmix_core.experiments.config import RunConfig  # noqa: E402
from dpmix_core.experiments.runner import run_config  # noqa: E402
from dpmix_core.experiments.spec import SweepSpec, axis_value, is_spec_file  # noqa: E402
from dpmix_core.experiments.trade_offs import cli_spec  # noqa: E402
from dpmix_core.training.train import evaluate  # noqa: E402


def sweep_spec(preset: str, dataset: str | None = None) -> SweepSpec:
    """A preset by name (``preset:`` optional) or a spec file, moved to ``dataset`` as ``sweep --dataset`` does."""
    named = preset.startswith("preset:") or is_spec_file(preset)
    return cli_spec(preset if named else f"preset:{preset}", dataset)


def pick_run(
    preset: str, epsilon: float, series: str, *, value: float | None = None, dataset: str | None = None
) -> RunConfig:
    """The preset's first run of a series named like ``series`` at target ``epsilon`` (and at ``value`` on its own
    axis where given), read as the sweep axis reads it (so DP-SGD and label-only runs, which release no mixture, are
    found too)."""
    spec = sweep_spec(preset, dataset)
    runs = [
        r
        for r in spec.runs()
        if axis_value(r, "target_epsilon") == epsilon
        and series in r.label
        and (value is None or axis_value(r, spec.axis) == value)
    ]
    if not runs:
        at = "" if value is None else f" and {spec.axis} = {value:g}"
        raise SystemExit(f"{preset} has no run of a series named like {series!r} at target epsilon {epsilon}{at}")
    return runs[0]


def trajectory(
    preset: str,
    epsilon: float,
    series: str,
    seed: int,
    epochs: int,
    overrides: dict,
    progress: Path | None = None,
    *,
    value: float | None = None,
    dataset: str | None = None,
) -> list[dict]:
    run = pick_run(preset, epsilon, series, value=value, dataset=dataset)
    config = replace(run, seed=seed, epochs=epochs, **overrides)
    rows: list[dict] = []

    def watch(entry, model, x_test, y_test) -> None:
        metrics = evaluate(model, x_test, y_test)
        rows.append(
            {
                "epoch": entry["epoch"],
                "test_accuracy": metrics["accuracy"],
                "test_accuracy_odd_rows": metrics["accuracy_halves"][1],
                "val_loss": entry["val_loss"],
                "val_accuracy": entry["val_accuracy"],
                "train_loss": entry["loss"],
                "seconds": entry["seconds"],
            }
        )
        if progress is not None:  # one JSON line per epoch, so a run cut off still leaves its trajectory
            with progress.open("a") as f:
                f.write(json.dumps({"run": config.label, "seed": config.seed, **rows[-1]}) + "\n")

    result = run_config(config, watch=watch)
    assert rows and rows[-1]["test_accuracy"] == result["test_accuracy"], "the watched model is the run's model"
    return [{"run": config.label, "input_scale": result.get("input_scale"), **row} for row in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True, help="a preset's name or a spec file (.toml / .json)")
    ap.add_argument("--dataset", help="run the protocol on another dataset, as sweep --dataset")
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--value", type=float, help="the run at this value of the spec's axis (default: the first)")
    ap.add_argument("--series", default="", help="part of the series name (default: the first series)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--set", nargs="*", default=[], metavar="FIELD=JSON", help="RunConfig fields to change")
    ap.add_argument("--data-dir", help="folder with the data (mnist.npz, fashion-mnist/; sets DPMIX_DATA_DIR)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--progress", help="append each epoch's row to this file as a JSON line when it is read")
    args = ap.parse_args()
    if args.data_dir:
        os.environ["DPMIX_DATA_DIR"] = args.data_dir
    rows = trajectory(
        args.preset,
        args.epsilon,
        args.series,
        args.seed,
        args.epochs,
        parse_set(args.set),
        Path(args.progress) if args.progress else None,
        value=args.value,
        dataset=args.dataset,
    )
    print(
        "| epoch | test acc. (%) | odd test rows (%) | release's val. loss | release's val. acc. (%) | train loss | s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['epoch']} | {100 * r['test_accuracy']:.2f} | {100 * r['test_accuracy_odd_rows']:.2f} | "
            f"{r['val_loss']:.4f} | "
            f"{100 * r['val_accuracy']:.2f} | {r['train_loss']:.4f} | {r['seconds']:.0f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
