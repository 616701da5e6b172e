"""Which dataset the app works on: full MNIST when it is on disk, else the embedded sample; another official dataset
found on disk (Fashion-MNIST, CIFAR-10) when picked; or an upload."""

from __future__ import annotations

from dpmix_core.data.base import Dataset, DatasetError, named_classes
from dpmix_core.data.catalog import (
    DATASET_NAMES,
    DATASET_TITLES,
    OFFICIAL_SPLIT_SIZES,
    default_dataset,
    load_dataset,
    locate_dataset,
)
from dpmix_core.data.categories import Categories
from dpmix_core.data.user import held_out_split, load_user_data

__all__ = [
    "EMBEDDED_DESCRIPTION",
    "app_dataset",
    "available_datasets",
    "default_choice",
    "describe_dataset",
    "needs_feature_range",
]

EMBEDDED_DESCRIPTION = "embedded MNIST sample (4,000 train / 1,000 test; offline, for demos)"


def available_datasets(data_dir: str | None = None) -> dict[str, str]:
    """name -> description of the datasets usable offline: each official one whose files are on this machine (data
    folder, cache or a system folder; located, not read), and always the embedded sample, last."""
    out = {}
    for name in DATASET_NAMES:
        if name == "embedded":
            continue
        try:
            source = locate_dataset(name, data_dir=data_dir)
        except DatasetError:  # a data folder that does not exist: none of its datasets is available
            source = None
        if source is not None:
            n_train, n_test = OFFICIAL_SPLIT_SIZES[name]
            out[name] = f"full {DATASET_TITLES[name]} ({n_train:,} train / {n_test:,} test) from {source}"
    out["embedded"] = EMBEDDED_DESCRIPTION
    return out


def default_choice(available: dict[str, str]) -> str:
    """The dataset a page starts on among ``available``: full MNIST when it is on disk, else the embedded sample (as
    :func:`default_dataset`), never another dataset only because it is on disk."""
    return "mnist" if "mnist" in available else "embedded"


def app_dataset(
    upload: bytes | None = None,
    filename: str | None = None,
    name: str | None = None,
    label_column: str | None = None,
    test_fraction: float | None = None,
    categories: Categories = (),
) -> Dataset:
    """The user's upload if given (a CSV's labels in ``label_column``, else "label", else its first column; its text
    columns read with their public ``categories``; with ``test_fraction``, that share of its records held out as a
    test split: :func:`held_out_split`), else the dataset ``name`` from disk, else ``default_dataset()`` (both honour
    DPMIX_DATA_DIR and never download)."""
    if upload is not None:
        dataset = load_user_data(
            upload, filename=filename or "upload.csv", label_column=label_column, categories=categories
        )
        return dataset if test_fraction is None else held_out_split(dataset, test_fraction)
    if name is not None:
        return load_dataset(name, download=False)
    return default_dataset()


def describe_dataset(dataset: Dataset) -> str:
    shape = "×".join(str(s) for s in dataset.x_train.shape[1:])
    names = dataset.label_names
    listed = f" ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if named_classes(names) else ""
    return (
        f"{dataset.source} — {dataset.n_train:,} training records of shape {shape}, {dataset.num_classes} classes"
        + listed
    )


def needs_feature_range(dataset: Dataset) -> bool:
    """Float features need public bounds for [0,1] scaling (uint8 images are 0..255 by definition)."""
    return dataset.x_train.dtype.kind != "u"
