"""Export a synthetic release: data (.npz / .csv) plus a JSON privacy card."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import platform
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import dpmix_core
from dpmix_core.accountants import applicable_accountants
from dpmix_core.release import MixingRelease
from dpmix_core.synthesis import Synthesis

__all__ = ["privacy_card", "write_release", "npz_bytes", "csv_bytes", "check_output_path"]

_GENERAL_CAVEATS = (
    "Floating-point Gaussian/Laplace sampling is not hardened against side channels (Mironov 2012): "
    "fine for research and teaching, not a production DP library.",
)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def privacy_card(synthesis: Synthesis) -> dict:
    """Everything needed to read the release's privacy honestly, as JSON-ready data."""
    data, config = synthesis.data, synthesis.config
    release = data.release
    card: dict = {
        "dpmix_studio_version": dpmix_core.__version__,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "dataset": {"name": synthesis.dataset_name, "source": synthesis.dataset_source, "n": synthesis.n},
        "mechanism": config.mechanism,
        "parameters": dataclasses.asdict(config),
        "seed": config.seed,
        "released": {"points": int(data.x.shape[0]), "feature_dim": int(data.x.shape[1]),
                     "label_dim": int(data.y.shape[1])},
        "feature_transform": getattr(release, "feature_transform", "pixels"),  # what was mixed (public map)
        "release_description": release.describe(),
        "delta": config.delta,
        "epsilons": [],
        "caveats": list(data.notes) + list(_GENERAL_CAVEATS),
    }
    if isinstance(release, MixingRelease):
        card["protects"] = release.protects.value
        card["covered"] = release.covered
        card["caveats"] = list(release.caveats()) + card["caveats"]
        for acc in applicable_accountants(release):
            card["epsilons"].append(acc.epsilon(release, config.delta).to_json())
        if any(not e["upper_bound"] for e in card["epsilons"]):
            card["caveats"].append("gdp-clt is a central-limit approximation, not an upper bound; use pld-poisson.")
    else:
        card["epsilons"].append({
            "accountant": type(release).__name__,
            "epsilon": release.epsilon,
            "delta": release.delta,
            "upper_bound": True,
            "guarantee": "rigorous (pure/approximate DP by construction)",
            "assumptions": release.describe(),
        })
    return _clean(card)


def npz_bytes(synthesis: Synthesis, card: dict) -> bytes:
    """x, y and the card (as a JSON string) in one .npz, loadable with allow_pickle=False."""
    buf = io.BytesIO()
    np.savez_compressed(buf, x=synthesis.data.x, y=synthesis.data.y, privacy_card=np.array(json.dumps(card)))
    return buf.getvalue()


def csv_bytes(synthesis: Synthesis) -> bytes:
    """Label columns y0..y{K-1} then feature columns x0..x{d-1}, one row per released point."""
    x, y = synthesis.data.x, synthesis.data.y
    header = ",".join([f"y{j}" for j in range(y.shape[1])] + [f"x{j}" for j in range(x.shape[1])])
    buf = io.StringIO()
    np.savetxt(buf, np.hstack([y, x]), delimiter=",", header=header, comments="", fmt="%.6g")
    return buf.getvalue().encode()


def _atomic_write(path: Path, payload: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output_path(out: str | Path) -> Path:
    """FILE.npz or FILE.csv in an existing folder (checked before any work is done)."""
    out = Path(out)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise ValueError(f"Output must end in .npz or .csv. Found {out.name!r}.")
    if not out.parent.is_dir():
        raise ValueError(f"Output folder {str(out.parent)!r} does not exist.")
    return out


def write_release(synthesis: Synthesis, out: str | Path) -> tuple[Path, Path]:
    """Write FILE.npz or FILE.csv plus FILE.card.json atomically; returns both paths."""
    out = check_output_path(out)
    suffix = out.suffix.lower()
    card = privacy_card(synthesis)
    payload = npz_bytes(synthesis, card) if suffix == ".npz" else csv_bytes(synthesis)
    card_path = out.with_suffix(".card.json")
    _atomic_write(out, payload)
    _atomic_write(card_path, json.dumps(card, indent=2).encode())
    return out, card_path
