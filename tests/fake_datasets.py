"""Tiny synthetic copies of the official dataset files (IDX .gz, the CIFAR-10 binary tar), for tests that need a
dataset "on disk" without the real one."""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
from pathlib import Path

import numpy as np

from dpmix_core.data.formats import CIFAR_BATCHES, IDX_FILES

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def tiny_arrays(seed: int, shape=(28, 28), n_train: int = 20, n_test: int = 10) -> Arrays:
    """(x_train, y_train, x_test, y_test): random uint8 images, labels cycling through 0..9."""
    rng = np.random.default_rng(seed)
    x_train = rng.integers(0, 256, (n_train, *shape), dtype=np.uint8)
    x_test = rng.integers(0, 256, (n_test, *shape), dtype=np.uint8)
    return x_train, (np.arange(n_train) % 10).astype(np.uint8), x_test, (np.arange(n_test) % 10).astype(np.uint8)


def idx_bytes(array: np.ndarray) -> bytes:
    """One array in the IDX format (unsigned bytes), uncompressed."""
    return bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_idx_folder(folder: Path, arrays: Arrays) -> None:
    """The four IDX .gz files of an MNIST-like dataset in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in zip(IDX_FILES, arrays):
        (folder / name).write_bytes(gzip.compress(idx_bytes(array)))


def _cifar_records(x: np.ndarray, y: np.ndarray) -> bytes:
    return np.concatenate([y[:, None], x.transpose(0, 3, 1, 2).reshape(len(x), -1)], axis=1).tobytes()


def cifar_batches(arrays: Arrays) -> dict[str, bytes]:
    """The training records in five equal batches and a test batch, named as in the binary release."""
    x_train, y_train, x_test, y_test = arrays
    batches = {
        name: _cifar_records(x, y)
        for name, x, y in zip(CIFAR_BATCHES[:5], np.array_split(x_train, 5), np.array_split(y_train, 5))
    }
    batches["test_batch.bin"] = _cifar_records(x_test, y_test)
    return batches


def write_cifar_tar(path: Path, arrays: Arrays) -> None:
    """CIFAR-10's binary release (``cifar-10-binary.tar.gz``) holding ``arrays`` (images of shape (32, 32, 3))."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, raw in cifar_batches(arrays).items():
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
