"""Gather-and-perturb engine shared by the mixing mechanisms (torch; CPU or GPU).

One synthetic point is ``sum(table[batch]) / denom + N(0, sigma^2 I)``. The
sums are done by ``torch.nn.functional.embedding_bag(mode="sum")`` over chunks
of points, so the (T, l, d) gather is never materialised. On the CPU the table
is split into column blocks that fit in cache, which halves the time.

Where the indices are drawn (``index_sampling``): ``"host"`` draws them with the
numpy samplers of :mod:`.sampling` and copies them to the device; ``"device"`` draws
them with the torch samplers of :mod:`.device_sampling` on the device itself (exact
l-subsets, Bernoulli membership for Poisson), so on a GPU the table, the indices,
the sums and the noise never leave it until the finished chunk is copied out.
``"auto"`` (default) is host on the CPU (bit-identical to earlier releases) and
device elsewhere. The device path runs on CPU tensors too, which is how it is tested.

Randomness: one numpy ``SeedSequence`` per call. Host sampling: its child (0,)
drives a PCG64 ``numpy.random.Generator`` for the indices. Device sampling: child
(2, segment, chunk) seeds one ``torch.Generator`` per chunk. Child (1, segment, tile)
seeds one ``torch.Generator`` per tile of ``NOISE_TILE`` rows for the noise. Tiles,
chunk sizes and column blocks do not depend on the thread count, so the same seed
gives bit-identical output on a given device type. The CPU and CUDA generators
differ, so CPU and GPU outputs from one seed are different draws of the same law.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported lazily: importing the package stays cheap
    import torch

__all__ = [
    "NOISE_TILE",
    "INDEX_SAMPLING",
    "Segment",
    "mix_and_perturb",
    "resolve_device",
    "seed_sequence",
    "child_sequence",
    "chunk_rows_for",
    "device_generator",
    "device_table",
]

INDEX_SAMPLING = ("auto", "host", "device")

NOISE_TILE = 256  # rows per noise generator
INDICES_PER_CHUNK = 1 << 22  # ~4M indices (16 MB as int32) per chunk bounds the memory
CPU_COLUMN_BLOCK = 32  # 60000 x 32 float32 = 7.7 MB: stays in the L3 cache while gathered


@dataclass(frozen=True)
class Segment:
    """A run of output rows drawn the same way (all of DPMix; one class in class-centric mixing)."""

    start: int
    count: int
    key: int  # noise stream of this segment
    draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray | None]]
    label_mean: np.ndarray | None = None  # noise-free label when it is constant (class-centric)
    # the same law drawn by torch on the generator's device: (indices (rows, l) or flat, offsets or None)
    draw_device: Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor | None]] | None = None


def resolve_device(device: str) -> torch.device:
    """'cpu', 'cuda', 'cuda:1', 'mps' or 'auto' (cuda when available, else cpu)."""
    import torch

    if not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'cpu', 'cuda' or 'auto'. Found {device!r}.")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"Unknown device {device!r}. Use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'.") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'cpu' or 'auto'.")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r} was requested but MPS is not available; use 'cpu' or 'auto'.")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"Unsupported device {device!r}. Use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'.")
    return dev


def seed_sequence(seed: object) -> np.random.SeedSequence:
    """A SeedSequence from an int, a SeedSequence, a numpy Generator (advanced by one draw) or None (fresh entropy)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence([int(v) for v in seed.integers(0, 2**63, size=4, dtype=np.int64)])
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, a numpy Generator, a SeedSequence or None. Found {seed!r}.")
    return np.random.SeedSequence(int(seed))


def child_sequence(ss: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child of ``ss`` with spawn key ``key`` (like ``ss.spawn`` but stateless)."""
    return np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + tuple(key), pool_size=ss.pool_size)


def device_generator(seq: np.random.SeedSequence, device: torch.device) -> torch.Generator:
    """A torch.Generator on ``device`` seeded from ``seq`` (64 bits of its state)."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(seq.generate_state(1, np.uint64)[0]))
    return g


def _sample_on_device(index_sampling: str, device: torch.device, segments: list[Segment]) -> bool:
    if index_sampling not in INDEX_SAMPLING:
        raise ValueError(f"index_sampling must be one of {INDEX_SAMPLING}. Found {index_sampling!r}.")
    if index_sampling == "host":
        return False
    has_device_draw = all(seg.draw_device is not None for seg in segments)
    if index_sampling == "device" and not has_device_draw:
        raise ValueError("index_sampling='device' needs a device sampler for every segment.")
    return has_device_draw and (index_sampling == "device" or device.type != "cpu")


def chunk_rows_for(mean_batch: float) -> int:
    """Points per chunk: about INDICES_PER_CHUNK indices, a multiple of NOISE_TILE (fixed per l)."""
    tiles = max(1, int(INDICES_PER_CHUNK // (max(mean_batch, 1.0) * NOISE_TILE)))
    return tiles * NOISE_TILE


def mix_and_perturb(
    *,
    features: np.ndarray,
    labels: np.ndarray | None,
    label_value: float,
    dtype: type,
    dx: int,
    dy: int,
    segments: list[Segment],
    num_points: int,
    denom_x: float,
    denom_y: float,
    sigma_x: float,
    sigma_y: float,
    seed_seq: np.random.SeedSequence,
    chunk_rows: int,
    device: torch.device,
    index_sampling: str = "auto",
    out: tuple[np.ndarray, np.ndarray] | tuple[torch.Tensor, torch.Tensor] | None = None,
    after_chunk: Callable[[int, int], None] | None = None,
) -> tuple[Any, Any]:  # float32 numpy arrays (new, or the caller's), or the caller's device tensors
    """x_t = sum(features[b_t]) / denom_x + N(0, sigma_x^2 I); y_t = sum(label_value * onehot(labels[b_t])) / denom_y
    + N(0, sigma_y^2 I), or the segment's constant ``label_mean`` + noise when ``labels`` is None.

    The table [features | label_value * onehot(labels)] is built in ``dtype``
    column block by column block, never as a whole on the CPU. Returns float32 (T, dx), (T, dy).
    ``index_sampling``: "host", "device" or "auto" (see the module docstring). ``out``: float32
    arrays of shape (T, dx), (T, dy) to fill (e.g. memory-mapped files) instead of new ones, or
    float32 torch tensors on ``device`` (a release that stays on the GPU: no copy to the host);
    ``after_chunk(row0, rows)`` is called once the rows row0..row0+rows-1 are written.
    """
    import torch
    import torch.nn.functional as F

    if chunk_rows % NOISE_TILE:
        raise ValueError("chunk_rows must be a multiple of NOISE_TILE.")
    on_device_draw = _sample_on_device(index_sampling, device, segments)
    labels_in_table = labels is not None
    width = dx + (dy if labels_in_table else 0)
    on_cpu = device.type == "cpu"
    block = CPU_COLUMN_BLOCK if on_cpu else width
    starts = list(range(0, width, block))
    if len(starts) > 1 and width - starts[-1] < block // 2:  # fold a thin last block into its neighbour
        starts.pop()
    bounds = list(zip(starts, starts[1:] + [width]))
    if on_cpu:
        weights = [torch.from_numpy(_table_block(features, labels, label_value, dtype, a, b)) for a, b in bounds]
    else:  # one block, built on the device from the raw features (uint8 MNIST: 4x less to upload)
        weights = [device_table(features, labels, label_value, dtype, dy, device)]

    out_x, out_y, resident = _outputs(out, num_points, dx, dy, device)
    rng = np.random.Generator(np.random.PCG64(child_sequence(seed_seq, 0)))
    noise_seq = child_sequence(seed_seq, 1)
    workers = max(1, torch.get_num_threads()) if on_cpu else 1
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    try:
        for seg in segments:
            label_const = None
            if seg.label_mean is not None:
                label_const = torch.as_tensor(np.asarray(seg.label_mean, dtype=np.float32), device=device)
            for a in range(0, seg.count, chunk_rows):
                c = min(chunk_rows, seg.count - a)
                r0 = seg.start + a
                if on_device_draw:
                    gen = device_generator(child_sequence(seed_seq, 2, seg.key, a // chunk_rows), device)
                    if seg.draw_device is None:
                        raise ValueError("device index sampling needs the segment's draw_device.")
                    idx_t, offsets_t = seg.draw_device(gen, c)
                    off_t = None if offsets_t is None else offsets_t[:-1].to(idx_t.dtype)
                else:
                    idx, offsets = seg.draw(rng, c)
                    idx_t = torch.from_numpy(idx).to(device)
                    off_t = None if offsets is None else torch.from_numpy(offsets[:-1].astype(idx.dtype)).to(device)
                sums = torch.empty((c, width), dtype=weights[0].dtype, device=device)
                for (j0, j1), w in zip(bounds, weights):
                    sums[:, j0:j1] = F.embedding_bag(idx_t, w, off_t, mode="sum")
                if resident:  # the output tensors live on the device: write into them
                    dst_x, dst_y = out_x[r0 : r0 + c], out_y[r0 : r0 + c]
                elif on_cpu:
                    dst_x = torch.from_numpy(out_x[r0 : r0 + c])
                    dst_y = torch.from_numpy(out_y[r0 : r0 + c])
                else:
                    dst_x = torch.empty((c, dx), dtype=torch.float32, device=device)
                    dst_y = torch.empty((c, dy), dtype=torch.float32, device=device)
                _fill_noise(dst_x, dst_y, sigma_x, sigma_y, noise_seq, seg.key, a, device, pool)
                _combine(dst_x, sums[:, :dx], denom_x, sigma_x)
                if labels_in_table:
                    _combine(dst_y, sums[:, dx:], denom_y, sigma_y)
                else:
                    if label_const is None:
                        raise ValueError("labels outside the table need the segment's constant label_mean.")
                    if sigma_y > 0:
                        dst_y.mul_(sigma_y).add_(label_const)
                    else:
                        dst_y.copy_(label_const.expand(c, dy))
                if not (on_cpu or resident):  # one device-to-host copy, straight into the output rows
                    torch.from_numpy(out_x[r0 : r0 + c]).copy_(dst_x)
                    torch.from_numpy(out_y[r0 : r0 + c]).copy_(dst_y)
                if after_chunk is not None:
                    after_chunk(r0, c)
    finally:
        if pool is not None:
            pool.shutdown()
    return out_x, out_y


def _outputs(out, num_points: int, dx: int, dy: int, device: torch.device):
    """(out_x, out_y, resident): new float32 arrays, the caller's arrays, or the caller's device tensors."""
    import torch

    if out is None:
        return np.empty((num_points, dx), dtype=np.float32), np.empty((num_points, dy), dtype=np.float32), False
    out_x, out_y = out
    resident = isinstance(out_x, torch.Tensor)
    if resident:
        ok = (
            isinstance(out_y, torch.Tensor)
            and out_x.dtype == out_y.dtype == torch.float32
            and _on(out_x.device, device)
            and _on(out_y.device, device)
            and out_x.is_contiguous()
            and out_y.is_contiguous()
        )
        where = f"contiguous float32 tensors on {device}"
    else:
        ok = (
            isinstance(out_x, np.ndarray) and isinstance(out_y, np.ndarray) and out_x.dtype == out_y.dtype == np.float32
        )
        where = "float32 arrays"
    if not ok or tuple(out_x.shape) != (num_points, dx) or tuple(out_y.shape) != (num_points, dy):
        raise ValueError(f"out must be {where} of shapes ({num_points}, {dx}) and ({num_points}, {dy}).")
    return out_x, out_y, resident


def _on(where: torch.device, device: torch.device) -> bool:
    """Whether a tensor on ``where`` is on ``device`` ('cuda' means the current GPU, as torch reads it)."""
    import torch

    if where.type != device.type:
        return False
    if device.index is None and device.type == "cuda":
        return where.index == torch.cuda.current_device()
    return device.index is None or where.index == device.index


def device_table(
    features: np.ndarray, labels: np.ndarray | None, label_value: float, dtype: type, dy: int, device: torch.device
) -> torch.Tensor:
    """[features | label_value * onehot(labels, dy)] (or the features alone) as one ``dtype`` tensor on ``device``.

    The features travel in their own dtype (uint8 images: a quarter of float32) and are cast there.
    Equal to the column blocks :func:`_table_block` builds on the host, concatenated.
    """
    import torch

    n, dx = features.shape
    feats = torch.from_numpy(np.ascontiguousarray(features)).to(device)
    tdtype = torch.from_numpy(np.zeros(0, dtype=dtype)).dtype
    if labels is None:
        return feats.to(tdtype)
    lab = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(device)
    table = torch.zeros((n, dx + dy), dtype=tdtype, device=device)
    table[:, :dx] = feats
    table[torch.arange(n, device=device), dx + lab] = float(label_value)
    return table


def _table_block(features, labels, label_value, dtype, a: int, b: int) -> np.ndarray:
    """Columns a..b-1 of [features | label_value * onehot(labels)], contiguous, in ``dtype``."""
    n, dx = features.shape
    block = np.zeros((n, b - a), dtype=dtype)
    if a < dx:
        block[:, : min(b, dx) - a] = features[:, a : min(b, dx)]
    if labels is not None and b > dx:
        lo = max(a, dx)
        hit = (labels >= lo - dx) & (labels < b - dx)
        block[np.flatnonzero(hit), labels[hit] + dx - a] = label_value
    return block


def _fill_noise(dst_x, dst_y, sigma_x, sigma_y, noise_seq, key, row0, device, pool) -> None:
    """Standard normals into dst_x / dst_y, one torch.Generator per NOISE_TILE rows (x first, then y)."""
    import torch

    if sigma_x == 0 and sigma_y == 0:
        return
    first_tile = row0 // NOISE_TILE
    rows = dst_x.shape[0]

    def tile(i: int) -> None:
        seed = int(child_sequence(noise_seq, key, first_tile + i).generate_state(1, np.uint64)[0])
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        sl = slice(i * NOISE_TILE, min(rows, (i + 1) * NOISE_TILE))
        if sigma_x > 0:
            dst_x[sl].normal_(generator=g)
        if sigma_y > 0:
            dst_y[sl].normal_(generator=g)

    n_tiles = -(-rows // NOISE_TILE)
    if pool is None:
        for i in range(n_tiles):
            tile(i)
    else:
        list(pool.map(tile, range(n_tiles)))


def _combine(dst, sums, denom: float, sigma: float) -> None:
    """dst <- sums / denom + sigma * dst (dst holds standard normals when sigma > 0)."""
    if sigma > 0:
        dst.mul_(sigma).add_(sums.div_(denom))
    else:
        dst.copy_(sums).div_(denom)
