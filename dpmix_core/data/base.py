"""The :class:`Dataset` record and the errors raised by ``dpmix_core.data``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DatasetError",
    "DatasetUnavailableError",
    "ChecksumMismatchError",
    "Dataset",
    "TEST_ROWS",
    "check_class_sizes",
    "named_classes",
    "pick_rows",
]

# Rows of a test split: every row, or one half (rows 0, 2, 4, ... or 1, 3, 5, ...). Public constants fixed on one
# half are scored on the other, which never touched them (a run's test_accuracy_halves: [even rows, odd rows]).
TEST_ROWS = ("all", "even", "odd")


def named_classes(label_names: tuple[str, ...] | list[str]) -> bool:
    """Whether classes have names other than their numbers 0..K-1 (an upload's 'cat' / 'dog' or labels 3 / 7 / 9,
    Fashion-MNIST's; MNIST's digits are their own names): worth saying which class is which."""
    return bool(label_names) and tuple(label_names) != tuple(str(k) for k in range(len(label_names)))


def pick_rows(x, rows: str):
    """``x`` (anything sliceable along its first axis) at ``rows`` (:data:`TEST_ROWS`); ValueError otherwise."""
    if rows not in TEST_ROWS:
        raise ValueError(f"rows must be one of {', '.join(TEST_ROWS)}. Found {rows!r}.")
    return x if rows == "all" else x[TEST_ROWS.index(rows) - 1 :: 2]


class DatasetError(ValueError):
    """A data file or upload is malformed, or a dataset cannot be provided."""


class DatasetUnavailableError(DatasetError):
    """The dataset is in none of the searched folders and could not be downloaded."""


class ChecksumMismatchError(DatasetError):
    """A downloaded file does not have the SHA-256 listed in the mirror table."""


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view, so a shared (cached) Dataset cannot be changed in place."""
    view = array.view()
    view.flags.writeable = False
    return view


def _checked_labels(y: np.ndarray, x: np.ndarray, split: str, num_classes: int) -> np.ndarray:
    if y.ndim != 1 or len(y) != len(x):
        raise DatasetError(f"y_{split} must be 1-D with one label per row of x_{split} ({len(x)}). Found {y.shape}.")
    if y.dtype.kind not in "iu":
        raise DatasetError(f"y_{split} must hold integer labels. Found dtype {y.dtype}.")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise DatasetError(f"y_{split} must lie in 0..{num_classes - 1}. Found {y.min()}..{y.max()}.")
    return y.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled dataset with an optional test split.

    ``x_train`` is uint8 images, shape (n, H, W) or (n, H, W, 3), for the
    built-in datasets and uploads of such images, and float32 (n, d) for other
    uploads. Labels are int64 in
    ``0..num_classes-1``; ``label_names[k]`` is the display name of class k
    (for uploads: the original label value). ``feature_names`` names the
    flattened features (a CSV upload's column headers; empty: x0, x1, ...);
    ``label_column`` is the header of a CSV upload's label column (empty: none);
    ``categories`` the public categories of its text columns, each read as one-hot features named
    "column=category" (:mod:`dpmix_core.data.categories`).
    ``source`` says where the data came from, in words. Arrays are stored as
    read-only views.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    num_classes: int
    source: str
    label_names: tuple[str, ...] = ()
    feature_names: tuple[str, ...] = ()
    label_column: str = ""
    categories: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.num_classes < 2:
            raise DatasetError(f"A dataset needs at least 2 classes. Found num_classes={self.num_classes}.")
        if (self.x_test is None) != (self.y_test is None):
            raise DatasetError("x_test and y_test must both be given or both be None.")
        names = self.label_names or tuple(str(k) for k in range(self.num_classes))
        if len(names) != self.num_classes:
            raise DatasetError(f"label_names must name {self.num_classes} classes. Found {len(names)}.")
        if self.feature_names and len(self.feature_names) != self.feature_dim:
            raise DatasetError(f"feature_names must name {self.feature_dim} features. Found {len(self.feature_names)}.")
        fields = {
            "label_names": names,
            "x_train": _read_only(self.x_train),
            "y_train": _read_only(_checked_labels(self.y_train, self.x_train, "train", self.num_classes)),
        }
        if self.x_test is not None:
            if self.y_test is None:
                raise DatasetError("x_test needs y_test (one label per test row).")
            fields["x_test"] = _read_only(self.x_test)
            fields["y_test"] = _read_only(_checked_labels(self.y_test, self.x_test, "test", self.num_classes))
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    @property
    def n_train(self) -> int:
        """Number of training records."""
        return len(self.x_train)

    @property
    def n_test(self) -> int:
        """Records in the test split (0 without one)."""
        return 0 if self.x_test is None else len(self.x_test)

    @property
    def feature_dim(self) -> int:
        """Length of one flattened record (784 for MNIST, 3072 for CIFAR-10)."""
        return int(np.prod(self.x_train.shape[1:]))

    def class_counts(self) -> np.ndarray:
        """Training records per class, shape (num_classes,)."""
        return np.bincount(self.y_train, minlength=self.num_classes)


def check_class_sizes(dataset: Dataset, l: int) -> None:  # noqa: E741 (l is the paper's mix degree)
    """Raise if some class has fewer than ``l`` training records (class-centric mixing needs l per class)."""
    if l < 1:
        raise ValueError(f"l must be a positive integer. Found {l}.")
    counts = dataset.class_counts()
    smallest = int(np.argmin(counts))
    if counts[smallest] < l:
        raise DatasetError(f"class '{dataset.label_names[smallest]}' has {counts[smallest]} records, fewer than l={l}")
