"""The dataset a run reads: a named one (:func:`~dpmix_core.data.load_dataset`), or one's own file split into the
records a release mixes and a held-out test split (:func:`~dpmix_core.data.held_out_split`).

One's own file is read once, its bytes checked against the run's ``data_sha256`` (the run's identity is the data's
bytes, not its path: a file edited after the run was defined is refused, not silently trained on).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dpmix_core.data import OWN_DATA, Dataset, DatasetError, held_out_split, load_dataset, load_user_data
from dpmix_core.data.user import MAX_BYTES
from dpmix_core.experiments.config import RunConfig

__all__ = ["TRAINED_ON", "held_out_note", "load_run_dataset", "open_data_file"]


def _read(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise DatasetError(f"cannot read the data file {str(path)!r}: {exc.strerror or exc}.") from None
    if len(data) > MAX_BYTES:
        raise DatasetError(f"{path} is larger than the limit of {MAX_BYTES:,} bytes.")
    return data


def _own_dataset(data: bytes, path: str, label_column: str | None, test_fraction: float) -> Dataset:
    return held_out_split(load_user_data(data, filename=path, label_column=label_column), test_fraction)


def open_data_file(
    path: str | os.PathLike, *, label_column: str | None = None, test_fraction: float = 0.2
) -> tuple[dict, Dataset]:
    """(RunConfig fields for a run on one's own ``.csv`` / ``.npz`` file: dataset "file", its path, hash, label
    column and test fraction; the file's dataset, split), DatasetError with one line when it does not parse or split."""
    path = str(Path(path).expanduser())
    data = _read(path)
    dataset = _own_dataset(data, path, label_column, test_fraction)
    options = {
        "dataset": OWN_DATA,
        "data_file": path,
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "label_column": label_column,
        "test_fraction": test_fraction,
    }
    return options, dataset


def load_run_dataset(config: RunConfig) -> Dataset:
    """The run's dataset: ``config.dataset`` from ``config.data_dir``, or its data file, split (DatasetError with one
    line when the file cannot be read, parsed or split, or its bytes are no longer those of ``config.data_sha256``)."""
    if config.data_file is None:
        return load_dataset(config.dataset, data_dir=config.data_dir)
    data = _read(config.data_file)
    if hashlib.sha256(data).hexdigest() != config.data_sha256:
        raise DatasetError(
            f"{config.data_file} has changed since this run was defined (its SHA-256 is no longer "
            f"{str(config.data_sha256)[:12]}...); define the run again on the file as it is now."
        )
    return _own_dataset(data, config.data_file, config.label_column, config.test_fraction)


# what each method does with the records not held out, and what its epsilon covers
TRAINED_ON = {
    "mixing": "the release and its epsilon cover the other {n:,}",
    "label-laplace": "the release (its labels noised) and its epsilon cover the other {n:,}",
    "dp-sgd": "DP-SGD trained on the other {n:,}, which its epsilon covers",
    "dp-pca": "the DP-PCA projection's epsilon covers the other {n:,} (the classifier on it is not private)",
    "non-private": "the model trained on the other {n:,} as they are (no privacy)",
}


def held_out_note(config: RunConfig, dataset: Dataset) -> dict:
    """What a run on one's own file (``dataset``: its split, subsampled as the run reads it) says about its records:
    the file, its hash, how many records the release mixed and how many were held out, and a sentence for a reader
    (the accuracy is read on records that were never released, and is not itself private)."""
    n_test = 0 if dataset.y_test is None else len(dataset.y_test)
    return {
        "file": config.data_file,
        "sha256": config.data_sha256,
        "label_column": config.label_column,
        "test_fraction": config.test_fraction,
        "train_records": dataset.n_train,
        "test_records": n_test,
        "note": (
            f"accuracy on {n_test:,} records of {Path(str(config.data_file)).name} held out before the release "
            f"(test fraction {config.test_fraction:g}, stratified, the same records for every seed); "
            f"{TRAINED_ON[config.method].format(n=dataset.n_train)}. The held-out records were never released, but "
            "the accuracy read on them is not private: publish it as any statistic of those records."
        ),
    }
