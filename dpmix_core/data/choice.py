"""Which dataset the app works on: full MNIST when it is on disk, else the embedded sample, or an upload."""

from __future__ import annotations

from dpmix_core.data import Dataset, default_dataset, load_user_data

__all__ = ["app_dataset", "describe_dataset", "needs_feature_range"]


def app_dataset(upload: bytes | None = None, filename: str | None = None) -> Dataset:
    """The user's upload if given, else ``default_dataset()`` (honours DPMIX_DATA_DIR; never downloads)."""
    if upload is not None:
        return load_user_data(upload, filename=filename or "upload.csv")
    return default_dataset()


def describe_dataset(dataset: Dataset) -> str:
    shape = "×".join(str(s) for s in dataset.x_train.shape[1:])
    return f"{dataset.source} — {dataset.n_train:,} training records of shape {shape}, {dataset.num_classes} classes"


def needs_feature_range(dataset: Dataset) -> bool:
    """Float features need public bounds for [0,1] scaling (uint8 images are 0..255 by definition)."""
    return dataset.x_train.dtype.kind != "u"
