"""The one backend factory: a backend by name ("local" processes or "ray"), for the CLI, pages and tests."""

from __future__ import annotations

from typing import Any

from dpmix_core.runtime.jobs import Backend, LocalProcessBackend
from dpmix_core.runtime.store import ResultStore

__all__ = ["BACKEND_NAMES", "make_backend"]

BACKEND_NAMES = ("local", "ray")


def make_backend(
    name: str, store: ResultStore, *, max_parallel: int | None = None, address: str | None = None, **options: Any
) -> Backend:
    """``local`` (worker processes on this machine; ``address`` must be None) or ``ray`` (Ray is optional:
    imported only here, when asked for; a clear ValueError when it is missing)."""
    if name == "local":
        if address:
            raise ValueError("--address needs --backend ray")
        return LocalProcessBackend(store, max_parallel, **options)
    if name == "ray":
        from dpmix_core.runtime.ray_backend import RayBackend

        return RayBackend(store, max_parallel, address=address, **options)
    raise ValueError(f"unknown backend {name!r}; use one of: {', '.join(BACKEND_NAMES)}")
