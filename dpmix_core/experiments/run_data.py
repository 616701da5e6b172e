"""The dataset a run reads: a named one (:func:`~dpmix_core.data.load_dataset`), or one's own file split into the
records a release mixes and a held-out test split (:func:`~dpmix_core.data.held_out_split`).

One's own file is read once, its bytes checked against the run's ``data_sha256`` (the run's identity is the data's
bytes, not its path: a file edited after the run was defined is refused, not silently trained on). An upload in the
app is kept in a folder named by its SHA-256 beside the results store (:func:`save_data_upload`), where background runs read it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from dpmix_core.data import (
    OWN_DATA,
    Categories,
    Dataset,
    DatasetError,
    check_class_sizes,
    held_out_split,
    json_categories,
    load_dataset,
    load_user_data,
    one_hot_features,
    read_data_file,
)
from dpmix_core.experiments.config import RunConfig
from dpmix_core.privacy.checks import describe_feature_range, json_feature_range
from dpmix_core.resources.files import write_files_atomically
from dpmix_core.synthesis.pipeline import SynthesisConfig, planned_release
from dpmix_core.training.names import IMAGE_MODELS

__all__ = [
    "OwnData",
    "TRAINED_ON",
    "check_release_on",
    "check_run_on",
    "image_model_problem",
    "held_out_note",
    "load_run_dataset",
    "open_data_file",
    "open_data_upload",
    "own_data_sizes",
    "save_data_upload",
]

DATA_SUFFIXES = (".csv", ".npz")


@dataclass(frozen=True, eq=False)
class OwnData:
    """One's own file as a run reads it: ``options``, the RunConfig fields (dataset "file", the path, its SHA-256, the
    label column and the test fraction), and ``dataset``, the file split into training records and held-out ones."""

    options: dict
    dataset: Dataset

    def __post_init__(self) -> None:
        if self.options.get("dataset") != OWN_DATA or self.dataset.x_test is None:
            raise ValueError("OwnData holds a data file's run options and its split (open_data_file makes both).")

    @property
    def exact_features(self) -> tuple[int, ...]:
        """The one-hot features of the file's public categories (bounds (0, 1), exactly): what private ranges leave
        as they are (``SynthesisConfig.exact_features``)."""
        return one_hot_features(self.dataset.feature_names, self.dataset.categories)


def _own_dataset(
    data: bytes, path: str, label_column: str | None, test_fraction: float, categories: Categories = ()
) -> Dataset:
    """The file's records, split; named (in messages and the data's source) by the file's name, not its folder (an
    upload's is its hash)."""
    dataset = load_user_data(data, filename=Path(path).name, label_column=label_column, categories=categories)
    return held_out_split(dataset, test_fraction)


def open_data_file(
    path: str | os.PathLike,
    *,
    label_column: str | None = None,
    test_fraction: float = 0.2,
    categories: Categories = (),
) -> OwnData:
    """One's own ``.csv`` / ``.npz`` file, read and split (``categories``: its text columns' public categories), with
    the RunConfig fields of a run on it; DatasetError with one line when it does not parse or split."""
    path = str(Path(path).expanduser().absolute())  # a run in a worker elsewhere finds it too
    data = read_data_file(path)
    dataset = _own_dataset(data, path, label_column, test_fraction, categories)
    options: dict[str, object] = {
        "dataset": OWN_DATA,
        "data_file": path,
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "label_column": label_column,
        "test_fraction": test_fraction,
    }
    if categories:
        options["categories"] = categories
    return OwnData(options, dataset)


def save_data_upload(data: bytes, filename: str, folder: str | os.PathLike) -> Path:
    """An uploaded data file kept as ``folder/<sha256>/<its name>`` (letters, digits, ``.``, ``_`` and ``-`` kept; the
    name is what pages, cards and messages show), where background runs can read it: written all-or-nothing, once
    (the same bytes under the same name are not written again; nothing is ever overwritten).
    ValueError (one line) for a file that is not .csv or .npz, or a folder that cannot hold it."""
    suffix = Path(filename).suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise DatasetError(f"{filename}: unsupported file type '{suffix}'; upload a .csv or .npz file.")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(filename).name).strip("._") or "data"
    if not name.lower().endswith(suffix):
        name += suffix
    target = Path(folder) / hashlib.sha256(data).hexdigest() / name
    try:
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_files_atomically({target: data})
    except OSError as exc:
        raise ValueError(f"cannot keep the upload in {str(folder)!r} ({exc.strerror or exc}).") from None
    return target


def open_data_upload(
    data: bytes,
    filename: str,
    folder: str | os.PathLike,
    *,
    label_column: str | None = None,
    test_fraction: float = 0.2,
    categories: Categories = (),
) -> OwnData:
    """An uploaded file kept in ``folder`` (:func:`save_data_upload`, where background runs read it), then read and
    split (:func:`open_data_file`); one line (ValueError / DatasetError) when it cannot be kept, parsed or split."""
    path = save_data_upload(data, filename, folder)
    return open_data_file(path, label_column=label_column, test_fraction=test_fraction, categories=categories)


def own_data_sizes(config: RunConfig) -> tuple[int, int, int]:
    """(training records, held-out records, features a record) of a run on a data file, read once per file and split
    (the runtime estimate's numbers; the run itself reads the file again)."""
    if config.data_file is None:
        raise ValueError("own_data_sizes reads a run's data file; this run has none.")
    return _sizes(config.data_file, config.data_sha256, config.label_column, config.test_fraction, config.categories)


@functools.lru_cache(maxsize=8)
def _sizes(
    path: str, sha256: str | None, label_column: str | None, test_fraction: float, categories: Categories
) -> tuple[int, int, int]:
    del sha256  # part of the cache key: an edited file is read again
    dataset = _own_dataset(read_data_file(path), path, label_column, test_fraction, categories)
    return dataset.n_train, 0 if dataset.y_test is None else len(dataset.y_test), dataset.feature_dim


def load_run_dataset(config: RunConfig) -> Dataset:
    """The run's dataset: ``config.dataset`` from ``config.data_dir``, or its data file, split (DatasetError with one
    line when the file cannot be read, parsed or split, or its bytes are no longer those of ``config.data_sha256``)."""
    if config.data_file is None:
        return load_dataset(config.dataset, data_dir=config.data_dir)
    data = read_data_file(config.data_file, config.data_sha256)
    return _own_dataset(data, config.data_file, config.label_column, config.test_fraction, config.categories)


def check_release_on(synthesis: SynthesisConfig, dataset: Dataset) -> None:
    """ValueError (one line) unless ``synthesis``'s release can be made on ``dataset``: ℓ within its records (or its
    smallest class, class-centric, named), public bounds where it scales features that are not uint8 pixels to
    [0,1]. σ is not calibrated (a target ε is checked at a σ of 1: the data's limits do not depend on it)."""
    if synthesis.mechanism == "class-centric":  # names the class (the mechanism's own check numbers it)
        check_class_sizes(dataset, synthesis.l)
    planned_release(replace(synthesis, target_epsilon=None, accountant=None, sigma_x=synthesis.sigma_x or 1.0), dataset)


def image_model_problem(run: RunConfig, dataset: Dataset) -> str | None:
    """Why ``run``'s model cannot train on ``dataset`` (an image model on records that are not images), or None;
    the caller says what to do instead (``train --model``, a page's model box, a spec's "model")."""
    if run.model in IMAGE_MODELS and run.features == "pixels" and dataset.x_train.ndim < 3:
        return (
            f"model {run.model!r} takes images (n, H, W); {dataset.name} has {dataset.feature_dim:,} features a record"
        )
    return None


def check_run_on(run: RunConfig, dataset: Dataset) -> None:
    """ValueError (one line) unless ``run`` can train on ``dataset`` (as the run reads it): an image model needs
    images, DP-PCA at most the data's features, a mixing release one the data can make (:func:`check_release_on`).
    ``train`` checks it before its first progress line, ``sweep`` and the page before any run is queued."""
    if (problem := image_model_problem(run, dataset)) is not None:
        raise ValueError(f"{problem}: use the linear model (or corrected-lsq).")
    if run.method == "dp-pca" and run.pca_components > dataset.feature_dim:
        raise ValueError(
            f"DP-PCA projects to {run.pca_components} dimensions, more than the {dataset.feature_dim:,} features of "
            f"{dataset.name}: give --pca-components {dataset.feature_dim} or fewer."
        )
    if run.method == "mixing" and run.synthesis is not None and run.release_file is None:
        check_release_on(run.synthesis, dataset)


# what each method does with the records not held out, and what its epsilon covers
TRAINED_ON = {
    "mixing": "the release and its epsilon cover the other {n:,}",
    "label-laplace": "the release (its labels noised) and its epsilon cover the other {n:,}",
    "dp-sgd": "DP-SGD trained on the other {n:,}, which its epsilon covers",
    "dp-pca": "the DP-PCA projection's epsilon covers the other {n:,} (the classifier on it is not private)",
    "non-private": "the model trained on the other {n:,} (no privacy)",
}


# a release made earlier (synthesize --test-fraction) of the records not held out
RELEASE_FILE_TRAINED_ON = "the release file was made from the other {n:,}, which its card's epsilon covers"


def held_out_note(config: RunConfig, dataset: Dataset) -> dict:
    """What a run on one's own file (``dataset``: its split, subsampled as the run reads it) says about its records:
    the file, its hash, how many records the release mixed and how many were held out, and a sentence for a reader
    (the accuracy is read on records that were never released, and is not itself private)."""
    n_test = 0 if dataset.y_test is None else len(dataset.y_test)
    trained_on = RELEASE_FILE_TRAINED_ON if config.release_file is not None else TRAINED_ON[config.method]
    bounds = config.feature_range
    scaled = (
        ""
        if bounds is None
        else f" Every method saw the features min-max scaled with the public bounds {describe_feature_range(bounds)}."
    )
    if bounds is not None and config.synthesis is not None and config.synthesis.range_epsilon is not None:
        scaled = (
            f" The release scaled the features with ranges it released privately inside the public bounds "
            f"{describe_feature_range(bounds)} (its epsilon covers them), and the model reads the held-out records "
            "through the same ranges."
        )
    return {
        "file": config.data_file,
        "sha256": config.data_sha256,
        "label_column": config.label_column,
        "test_fraction": config.test_fraction,
        "feature_range": None if bounds is None else json_feature_range(bounds),
        **({"categories": json_categories(config.categories)} if config.categories else {}),
        "train_records": dataset.n_train,
        "test_records": n_test,
        "note": (
            f"accuracy on {n_test:,} records of {Path(str(config.data_file)).name} held out before anything was "
            "trained or released "
            f"(test fraction {config.test_fraction:g}, stratified, the same records for every seed); "
            f"{trained_on.format(n=dataset.n_train)}. The held-out records were never released, but "
            f"the accuracy read on them is not private: publish it as any statistic of those records.{scaled}"
        ),
    }
