"""Resumable training: the training state in one file, so a long run survives the worker that ran it.

A 200-epoch protocol (DPFMix App. E.3) takes about 100 minutes on two CPU cores. A worker that is
killed, a machine that reboots or a session that ends would otherwise lose all of it. ``fit`` saves the
whole training state at epoch ends, and a re-queued run continues from the last one.

What a checkpoint holds (a ``torch.save`` dict, loaded with ``weights_only=True``):

* ``epoch``: epochs finished; ``history``, ``samples``, ``seconds``: the :class:`FitResult` so far;
* ``model`` and ``optimizer``: their ``state_dict`` (Adam's moments, SGD's momentum);
* ``generator``: the batch-order generator; ``torch_rng`` / ``cuda_rng``: torch's global RNGs (dropout);
* ``stopper``: the early stopper's best accuracy, epoch, weights and patience counter;
* the identity it belongs to: ``run_key``, ``settings`` (the optimiser and schedule), ``data`` (a
  SHA-256 of the training tensors) and ``model_spec`` (the model's layer list and parameter shapes).

Rules:

* saved at an epoch end only, never mid-epoch, and at most once every ``every_s`` seconds (0: every
  epoch), so a run loses at most one epoch plus ``every_s`` of work;
* written atomically (:func:`dpmix_core.resources.files.write_files_atomically`): a kill during the
  write leaves the previous checkpoint whole;
* a checkpoint is used only when its identity matches in full. One from another run, another release,
  another schedule or another model, or one that cannot be read, is ignored with the reason, and
  training starts at epoch 0. A stale file can cost time, never correctness;
* the owner of the file deletes it: the results store, when the run is done or deleted
  (:meth:`dpmix_core.runtime.store.ResultStore.checkpoint_path`).

Continuing from a checkpoint gives the same weights, bit for bit, as a run that was never stopped,
on the same machine and thread count (tested). The release is rebuilt from the run's seeds, so the
data fingerprint matches.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dpmix_core.resources.files import write_files_atomically

__all__ = ["CHECKPOINT_FORMAT", "DEFAULT_EVERY_S", "Checkpointer", "data_fingerprint", "model_spec"]

CHECKPOINT_FORMAT = 1
DEFAULT_EVERY_S = 60.0  # at most one save a minute, unless the run's owner says otherwise ($DPMIX_CHECKPOINT_S)


def data_fingerprint(*tensors: torch.Tensor) -> str:
    """SHA-256 of the tensors' shapes, dtypes and bytes: the same release and split give the same value."""
    digest = hashlib.sha256()
    for t in tensors:
        a = t.detach().cpu().contiguous()
        digest.update(f"{tuple(a.shape)}:{a.dtype};".encode())
        digest.update(a.numpy().data)  # the buffer itself: no copy of a large release
    return digest.hexdigest()


def model_spec(model: nn.Module) -> str:
    """The model's layer list and its parameter and buffer shapes, as one string."""
    shapes = ";".join(f"{k}:{tuple(v.shape)}" for k, v in model.state_dict().items())
    return f"{model!r}|{shapes}"


@dataclass(frozen=True)
class Checkpointer:
    """Where one run keeps its training state, and how often it is saved (see the module docstring).

    ``path``: the file (its folder is created on the first save). ``run_key``: the identity of the
    run (the store's key); a file that names another key is ignored. ``every_s``: the least number of
    seconds between two saves (0: every epoch).
    """

    path: Path
    run_key: str
    every_s: float = DEFAULT_EVERY_S

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            object.__setattr__(self, "path", Path(self.path))
        if not self.run_key:
            raise ValueError("a checkpoint needs the run key it belongs to.")
        if not self.every_s >= 0:
            raise ValueError(f"every_s must be >= 0 seconds. Found {self.every_s}.")

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` (plus the format and run key) atomically. Raises OSError when it cannot."""
        payload = {**state, "format": CHECKPOINT_FORMAT, "run_key": self.run_key}
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_files_atomically({self.path: buffer.getvalue()})

    def load(self, identity: dict[str, Any]) -> tuple[dict | None, str | None]:
        """(state, None) when the file exists and matches ``identity`` and the run key, else (None, why not).

        No file gives (None, None): nothing to resume, nothing to say. ``identity`` holds the entries
        the file must match exactly (settings, data fingerprint, model spec). Tensors load on the CPU:
        the RNG states must be CPU tensors, and ``load_state_dict`` copies weights and optimiser state
        to the device of the model they are loaded into.
        """
        if not self.path.is_file():
            return None, None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as exc:  # any unreadable file (truncated, not torch, newer pickle) is only ignored
            return (
                None,
                f"checkpoint {self.path.name} could not be read ({type(exc).__name__}: {exc}); trained from epoch 0",
            )
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            return None, f"checkpoint {self.path.name} has another format; trained from epoch 0"
        if state.get("run_key") != self.run_key:
            return None, f"checkpoint {self.path.name} belongs to another run; trained from epoch 0"
        for name, expected in identity.items():
            if state.get(name) != expected:
                return None, f"checkpoint {self.path.name} was made with another {name}; trained from epoch 0"
        return state, None
