"""Readers for the official dataset files: IDX ``.gz``, keras ``.npz``, CIFAR-10 binary.

Pure numpy and the standard library. Nothing here unpickles: ``.npz`` files
are opened with ``allow_pickle=False`` and only the *binary* CIFAR-10 release
is read (the python release is a pickle).
"""

from __future__ import annotations

import gzip
import math
import struct
import tarfile
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dpmix_core.data.base import DatasetError

__all__ = [
    "Splits",
    "IDX_FILES",
    "CIFAR_BIN_DIR",
    "CIFAR_BATCHES",
    "parse_idx",
    "read_idx_folder",
    "read_keras_npz",
    "parse_cifar_batch",
    "read_cifar_folder",
    "read_cifar_tar",
]

# Official IDX file names (MNIST and Fashion-MNIST use the same ones).
IDX_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
CIFAR_BIN_DIR = "cifar-10-batches-bin"
CIFAR_BATCHES = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",)
_CIFAR_SHAPE = (3, 32, 32)  # stored channel-first: 1024 red, 1024 green, 1024 blue bytes
_CIFAR_RECORD = 1 + math.prod(_CIFAR_SHAPE)
_IDX_UBYTE = 0x08


class Splits(NamedTuple):
    """Official train/test arrays as read from disk (labels still in their file dtype)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def parse_idx(raw: bytes, ndim: int, what: str) -> np.ndarray:
    """Decode an uncompressed IDX file of unsigned bytes with ``ndim`` dimensions.

    The magic number is 0x00000800 + ndim (2049 for labels, 2051 for images).
    """
    magic = bytes([0, 0, _IDX_UBYTE, ndim])
    if raw[:4] != magic:
        raise DatasetError(f"{what}: IDX magic number 0x{raw[:4].hex()} is not 0x{magic.hex()} ({ndim}-D uint8).")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(f"{what}: truncated IDX header ({len(raw)} bytes).")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    if len(raw) - header != math.prod(dims):
        raise DatasetError(f"{what}: IDX header says shape {dims}, but the file holds {len(raw) - header} data bytes.")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_idx_gz(path: Path, ndim: int) -> np.ndarray:
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path}: not a valid gzip file ({exc}).") from exc
    return parse_idx(raw, ndim, str(path))


def _pair(images: np.ndarray, labels: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if len(images) != len(labels):
        raise DatasetError(f"{what}: {len(images)} images but {len(labels)} labels.")
    return images, labels


def read_idx_folder(folder: Path) -> Splits:
    """Read the four official IDX ``.gz`` files (:data:`IDX_FILES`) from ``folder``."""
    x_tr, y_tr, x_te, y_te = (_read_idx_gz(folder / name, 1 if "labels" in name else 3) for name in IDX_FILES)
    return Splits(*_pair(x_tr, y_tr, f"{folder} (train)"), *_pair(x_te, y_te, f"{folder} (t10k)"))


def read_keras_npz(path: Path) -> Splits:
    """Read a keras-style ``.npz`` with x_train, y_train, x_test, y_test (never unpickles)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files if key in Splits._fields}
            found = npz.files
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"{path}: cannot read as .npz ({exc}).") from exc
    missing = [key for key in Splits._fields if key not in arrays]
    if missing:
        raise DatasetError(f"{path}: missing array(s) {', '.join(missing)}; found {', '.join(found) or 'none'}.")
    for key in ("x_train", "x_test"):
        if arrays[key].dtype != np.uint8:
            raise DatasetError(f"{path}: {key} has dtype {arrays[key].dtype}, expected uint8 images.")
    return Splits(
        *_pair(arrays["x_train"], arrays["y_train"], f"{path} (train)"),
        *_pair(arrays["x_test"], arrays["y_test"], f"{path} (test)"),
    )


def parse_cifar_batch(raw: bytes, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Decode one CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes.

    Returns images (n, 32, 32, 3) uint8 (channel-last) and labels (n,) uint8.
    """
    if not raw or len(raw) % _CIFAR_RECORD:
        raise DatasetError(f"{what}: {len(raw)} bytes is not a whole number of {_CIFAR_RECORD}-byte CIFAR-10 records.")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _CIFAR_RECORD)
    images = records[:, 1:].reshape(-1, *_CIFAR_SHAPE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), records[:, 0].copy()


def _cifar_splits(batches: list[tuple[np.ndarray, np.ndarray]]) -> Splits:
    *train, (x_test, y_test) = batches
    return Splits(np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train]), x_test, y_test)


def read_cifar_folder(folder: Path) -> Splits:
    """Read the extracted binary release: ``folder/cifar-10-batches-bin/*.bin``."""
    paths = [folder / CIFAR_BIN_DIR / name for name in CIFAR_BATCHES]
    return _cifar_splits([parse_cifar_batch(path.read_bytes(), str(path)) for path in paths])


def read_cifar_tar(path: Path) -> Splits:
    """Read the batches straight out of ``cifar-10-binary.tar.gz`` in one pass (nothing is extracted to disk)."""
    wanted = {f"{CIFAR_BIN_DIR}/{name}": name for name in CIFAR_BATCHES}
    raw: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r|gz") as tar:
            for member in tar:
                if member.name in wanted and member.isfile():
                    raw[wanted[member.name]] = tar.extractfile(member).read()
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise DatasetError(f"{path}: cannot read as .tar.gz ({exc}).") from exc
    missing = [name for name in CIFAR_BATCHES if name not in raw]
    if missing:
        raise DatasetError(f"{path}: the archive has no {CIFAR_BIN_DIR}/{missing[0]}.")
    return _cifar_splits([parse_cifar_batch(raw[name], f"{path}:{name}") for name in CIFAR_BATCHES])
