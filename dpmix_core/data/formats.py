"""Readers for the official dataset files: IDX ``.gz``, keras ``.npz``, CIFAR-10 binary.

Pure numpy and the standard library. Nothing here unpickles: ``.npz`` files
are opened with ``allow_pickle=False`` and only the *binary* CIFAR-10 release
is read (the python release is a pickle).
"""

from __future__ import annotations

import gzip
import io
import math
import struct
import tarfile
import zipfile
import zlib
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
    "read_npz",
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
_NPY_HEADER_MAX = 65_536  # an .npy header is at most this long (numpy refuses longer ones by default)
MAX_OFFICIAL_NPZ_BYTES = 4_000_000_000  # a keras-style dataset .npz (CIFAR-10: 184 MB decompressed)
MAX_OFFICIAL_FILE_BYTES = 1_000_000_000  # one decompressed IDX file or CIFAR-10 batch (the largest: 47 MB)


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
        with gzip.open(path, "rb") as fh:
            raw = fh.read(MAX_OFFICIAL_FILE_BYTES + 1)  # a gzip bomb stops at the bound
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: not a valid gzip file ({exc}).") from exc
    if len(raw) > MAX_OFFICIAL_FILE_BYTES:
        raise DatasetError(
            f"{path}: decompresses to more than {MAX_OFFICIAL_FILE_BYTES:,} bytes; not an official IDX file."
        )
    return parse_idx(raw, ndim, str(path))


def _pair(images: np.ndarray, labels: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    if len(images) != len(labels):
        raise DatasetError(f"{what}: {len(images)} images but {len(labels)} labels.")
    return images, labels


def read_idx_folder(folder: Path) -> Splits:
    """Read the four official IDX ``.gz`` files (:data:`IDX_FILES`) from ``folder``."""
    x_tr, y_tr, x_te, y_te = (_read_idx_gz(folder / name, 1 if "labels" in name else 3) for name in IDX_FILES)
    return Splits(*_pair(x_tr, y_tr, f"{folder} (train)"), *_pair(x_te, y_te, f"{folder} (t10k)"))


def _member_header(zf: zipfile.ZipFile, member: str, what: str) -> tuple[tuple[int, ...], np.dtype]:
    """The declared (shape, dtype) of one ``.npy`` member, read from its header only."""
    key = member[:-4]
    try:
        with zf.open(member) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f".npy format version {version} is not supported")
    except (
        ValueError,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        SyntaxError,
        NotImplementedError,
        RuntimeError,
        zlib.error,
    ) as exc:
        raise DatasetError(
            f"{what}: array '{key}' is not a plain numpy array (a pickle or a damaged file?); "
            "save numeric arrays with numpy.savez."
        ) from exc
    if dtype.hasobject:
        raise DatasetError(
            f"{what}: not a readable .npz archive (array '{key}' holds Python objects, which are "
            "never unpickled); save numeric arrays."
        )
    return tuple(int(s) for s in shape), dtype


def read_npz(
    source: bytes | Path,
    what: str,
    wanted: tuple[str, ...],
    *,
    max_decompressed: int,
    what_to_do: str = "use smaller arrays",
) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """``(arrays, member names)``: the ``wanted`` arrays of an .npz (bytes or a path), after checking
    every wanted member's declared shape and dtype from its ``.npy`` header and bounding their total
    decompressed size by ``max_decompressed`` bytes; nothing is read beyond that and nothing is
    unpickled. When a wanted array is missing, ``arrays`` is empty (the caller names what is missing).
    Raises :class:`DatasetError` with one line naming ``what``."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        head = bytes(source[:6]) if isinstance(source, (bytes, bytearray)) else b""
        if head == b"\x93NUMPY":
            raise DatasetError(f"{what}: holds a single .npy array; save x and y with numpy.savez.") from None
        raise DatasetError(f"{what}: not a readable .npz archive ({exc}).") from None
    with zf:
        members = {name[:-4]: name for name in zf.namelist() if name.endswith(".npy")}
        if any(key not in members for key in wanted):
            return {}, tuple(members)
        declared = {key: _member_header(zf, members[key], what) for key in wanted}
        total = sum(math.prod(shape) * dtype.itemsize for shape, dtype in declared.values())
        if total > max_decompressed:
            raise DatasetError(
                f"{what}: its arrays hold {total:,} bytes once decompressed, more than the limit "
                f"of {max_decompressed:,}; {what_to_do}."
            )
        arrays = {}
        for key in wanted:
            shape, dtype = declared[key]
            try:
                with zf.open(members[key]) as fh:
                    raw = fh.read(math.prod(shape) * dtype.itemsize + _NPY_HEADER_MAX)  # never more than declared
                arrays[key] = np.load(io.BytesIO(raw), allow_pickle=False)
            except (
                OSError,
                ValueError,
                EOFError,
                zipfile.BadZipFile,
                NotImplementedError,
                RuntimeError,
                zlib.error,
            ) as exc:
                raise DatasetError(f"{what}: not a readable .npz archive (array '{key}': {exc}).") from None
    return arrays, tuple(members)


def read_keras_npz(path: Path) -> Splits:
    """Read a keras-style ``.npz`` with x_train, y_train, x_test, y_test (bounded, never unpickles)."""
    try:
        arrays, found = read_npz(path, str(path), Splits._fields, max_decompressed=MAX_OFFICIAL_NPZ_BYTES)
    except DatasetError as exc:
        raise DatasetError(f"{path}: cannot read as .npz ({str(exc).removeprefix(f'{path}: ')})") from None
    if not arrays:
        missing = [key for key in Splits._fields if key not in found]
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
                    if member.size > MAX_OFFICIAL_FILE_BYTES:
                        raise DatasetError(
                            f"{path}: {member.name} declares {member.size:,} bytes; not an official CIFAR-10 batch."
                        )
                    fh = tar.extractfile(member)
                    if fh is None:
                        raise DatasetError(f"{path}: {member.name} is not a regular file in the archive.")
                    raw[wanted[member.name]] = fh.read(member.size)
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise DatasetError(f"{path}: cannot read as .tar.gz ({exc}).") from exc
    missing = [name for name in CIFAR_BATCHES if name not in raw]
    if missing:
        raise DatasetError(f"{path}: the archive has no {CIFAR_BIN_DIR}/{missing[0]}.")
    return _cifar_splits([parse_cifar_batch(raw[name], f"{path}:{name}") for name in CIFAR_BATCHES])
