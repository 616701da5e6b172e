"""Membership-inference attacks as background jobs: pages submit and poll through here, never build job keys."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from dpmix_core.audit.membership import JOB_KIND
from dpmix_core.data import Categories
from dpmix_core.experiments.run_data import save_data_upload
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.runtime.jobs import JobManager
from dpmix_core.runtime.store import ResultStore, Run, config_key, default_store_path

__all__ = ["attack_data_upload", "submit_membership_attack", "membership_attack"]


def attack_data_upload(
    data: bytes,
    filename: str,
    label_column: str | None,
    feature_range: FeatureRange | None,
    store: ResultStore | None = None,
    categories: Categories = (),
) -> dict[str, Any]:
    """One's own uploaded file for an attack job: kept beside the results store (``<store folder>/data/<sha256>/``,
    written once, :func:`~dpmix_core.experiments.run_data.save_data_upload`) where the background worker reads it;
    the ``job_config`` fields that name it (path, SHA-256, label column, public bounds, public categories)."""
    folder = (store.path if store is not None else default_store_path()).parent / "data"
    return {
        "data_file": str(save_data_upload(data, filename, folder)),
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "label_column": label_column,
        "feature_range": feature_range,
        "categories": categories,
    }


def submit_membership_attack(config: Mapping[str, Any], store: ResultStore | None = None) -> int:
    """Queue the attack (``audit.membership.job_config``) and start it now; an identical config reuses its run."""
    manager = JobManager(store if store is not None else ResultStore())
    return manager.submit(JOB_KIND, dict(config), key=config_key({"kind": JOB_KIND, **config})).id


def membership_attack(run_id: int, store: ResultStore | None = None) -> Run | None:
    """The attack's run after one scheduling step (starts queued work, notices finished or dead workers)."""
    manager = JobManager(store if store is not None else ResultStore())
    manager.pump()
    return manager.get(run_id)
