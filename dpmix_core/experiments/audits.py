"""Membership-inference attacks as background jobs: pages submit and poll through here, never build job keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpmix_core.audit.membership import JOB_KIND
from dpmix_core.runtime.jobs import JobManager
from dpmix_core.runtime.store import ResultStore, Run, config_key

__all__ = ["submit_membership_attack", "membership_attack"]


def submit_membership_attack(config: Mapping[str, Any], store: ResultStore | None = None) -> int:
    """Queue the attack (``audit.membership.job_config``) and start it now; an identical config reuses its run."""
    manager = JobManager(store if store is not None else ResultStore())
    return manager.submit(JOB_KIND, dict(config), key=config_key({"kind": JOB_KIND, **config})).id


def membership_attack(run_id: int, store: ResultStore | None = None) -> Run | None:
    """The attack's run after one scheduling step (starts queued work, notices finished or dead workers)."""
    manager = JobManager(store if store is not None else ResultStore())
    manager.pump()
    return manager.get(run_id)
