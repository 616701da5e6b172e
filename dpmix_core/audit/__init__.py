"""Privacy auditing: empirical lower bounds on epsilon next to the accountants' upper bounds.

``empirical`` audits the mechanism itself (canary in / out, Clopper-Pearson);
``membership`` attacks models trained on a release (Yeom et al. 2018);
``reidentification`` finds the training records nearest to released points.
"""

from dpmix_core.audit.empirical import (
    MECHANISMS,
    AuditConfig,
    AuditResult,
    audit_dataset,
    audit_mechanism,
    canary_shift,
    clopper_pearson_upper,
    epsilon_lower_bound,
    run_audit,
)

__all__ = [
    "MECHANISMS",
    "AuditConfig",
    "AuditResult",
    "audit_dataset",
    "audit_mechanism",
    "canary_shift",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "run_audit",
]
