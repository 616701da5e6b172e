"""Label-only Laplace (the MNIST label-DP project): features released as they are, labels + Laplace noise."""

from __future__ import annotations

import numpy as np

from dpmix_core.mechanisms._checks import check_epsilon, check_features, check_labels, check_positive_int
from dpmix_core.mechanisms.descriptions import LABEL_TASKS, LaplaceLabelRelease
from dpmix_core.mechanisms.outputs import SyntheticData

__all__ = ["label_sensitivity", "laplace_label_release"]


def label_sensitivity(task: str, num_classes: int) -> float:
    """L1 sensitivity of one person's label: 2 for one-hot vectors, K-1 for the label as a number 0..K-1.

    One-hot: a -> b turns one 1 into 0 and one 0 into 1, so ||e_a - e_b||_1 = 2 whatever a, b.
    A number: |a - b| <= K - 1 (9 for digits).
    """
    if task not in LABEL_TASKS:
        raise ValueError(f"task must be one of {LABEL_TASKS}. Found {task!r}.")
    k = check_positive_int("num_classes (K)", num_classes)
    if task == "classification":
        return 2.0
    if k < 2:
        raise ValueError(f"regression labels need num_classes >= 2 (labels 0..K-1). Found num_classes={k}.")
    return float(k - 1)


def laplace_label_release(
    X: np.ndarray,
    y: np.ndarray,
    *,
    num_classes: int,
    epsilon: float,
    task: str = "classification",
    postprocess: bool = False,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> SyntheticData:
    """Laplace mechanism on labels (Dwork et al. 2006): y~ = y + Lap(Delta_f/eps), Delta_f = 2 (one-hot) or K-1 (regression labels 0..K-1).

    ``task="classification"``: the released labels are one-hot (n, K) plus noise; ``postprocess`` clamps to [0, 1].
    ``task="regression"``: the released label is the class as a number (n, 1) plus noise; ``postprocess``
    clamps to [0, K-1] and rounds. Post-processing does not change epsilon.
    Features are released unchanged (as float32): they are *not* private.

    Args:
        X: (n, d) features, integers or floats (released as they are, cast to float32).
        y: (n,) integer class labels in 0..K-1 (whole-number floats accepted), not one-hot.
        num_classes: K (at least 2 for ``task="regression"``).
        epsilon: the labels' pure-DP epsilon; positive and finite. The Laplace scale is Delta_f / epsilon.
        task: "classification" (one-hot labels, Delta_f = 2) or "regression" (labels as numbers,
            Delta_f = K - 1).
        postprocess: clamp (and, for regression, round) the noisy labels; privacy unchanged.
        seed: anything ``numpy.random.default_rng`` accepts.

    Returns:
        :class:`SyntheticData`: x = X as float32 (n, d), y float32 (n, K) for classification or (n, 1) for
        regression, a :class:`LaplaceLabelRelease` (epsilon for the labels only) and notes.

    Raises:
        ValueError: X not a finite (n, d) numeric array; y not (n,) integer labels in 0..K-1; epsilon not
            positive and finite; an unknown task; a non-bool ``postprocess``; regression with K < 2.
    """
    X = check_features(X)
    k = check_positive_int("num_classes (K)", num_classes)
    y = check_labels(y, n=X.shape[0], num_classes=k)
    epsilon = check_epsilon(epsilon)
    if task not in LABEL_TASKS:
        raise ValueError(f"task must be one of {LABEL_TASKS}. Found {task!r}.")
    if not isinstance(postprocess, bool):
        raise ValueError(f"postprocess must be True or False. Found {postprocess!r}.")
    if task == "regression" and k < 2:
        raise ValueError(f"regression labels need num_classes >= 2 (labels 0..K-1). Found num_classes={k}.")
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    sensitivity = label_sensitivity(task, k)
    release = LaplaceLabelRelease(epsilon=epsilon, sensitivity=sensitivity, n=n, task=task)
    if task == "classification":
        labels = np.eye(k, dtype=np.float64)[y]
        what = (
            f"one-hot labels (L1 distance of two one-hot vectors: Delta_f=2), Laplace scale 2/eps={release.scale:.4g}"
        )
    else:
        labels = y.astype(np.float64)[:, None]
        what = f"labels 0..{k - 1} as numbers (Delta_f={k - 1}), Laplace scale {k - 1}/eps={release.scale:.4g}"
    noisy = labels + rng.laplace(0.0, release.scale, size=labels.shape)
    notes = [
        f"label-only Laplace: {what}; pure {epsilon:g}-DP for the labels (neighbours differ in one label)",
        "features are NOT private: released unchanged",
    ]
    if postprocess:
        if task == "classification":
            np.clip(noisy, 0.0, 1.0, out=noisy)
            notes.append("labels clamped to [0, 1] (post-processing; privacy unchanged)")
        else:
            noisy = np.round(np.clip(noisy, 0.0, k - 1.0))
            notes.append(f"labels clamped to [0, {k - 1}] and rounded (post-processing; privacy unchanged)")
    return SyntheticData(X.astype(np.float32), noisy.astype(np.float32), release, tuple(notes))
