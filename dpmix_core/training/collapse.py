"""Did a trained model learn? A run at the constant predictor, or no better than it, is ``collapsed``, never a result.

No torch import: the runner passes plain numbers (the per-epoch history, the
majority-class rate of the validation labels, the largest share of one
predicted class on the test split, and the test accuracy with the test split's
majority-class rate and size). :func:`selection_note` says when early stopping
kept an epoch chosen on a validation split at chance. :func:`shift_note` says when a BatchNorm model
scores clearly more with its statistics re-estimated on the test inputs
(:mod:`dpmix_core.training.batchnorm`): the release's statistics, not the
learning, are then what fails on clean inputs.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "CHANCE_SDS",
    "chance_line",
    "majority_rate",
    "ONE_CLASS_SHARE",
    "VAL_MARGIN",
    "LOSS_DROP",
    "MOSTLY_ONE_CLASS",
    "COLLAPSE_CAUSE",
    "SHIFT_NOTE_GAP",
    "collapse_reason",
    "selection_note",
    "shift_note",
]

CHANCE_SDS = 3.0  # test accuracy within this many binomial standard deviations of the majority-class rate: chance
ONE_CLASS_SHARE = 0.98  # predicting one class for at least this share of the test rows is the constant predictor
VAL_MARGIN = 0.01  # best validation accuracy within this of the majority-class rate: nothing learned ...
LOSS_DROP = 0.02  # ... when the training loss also fell by less than this fraction of its first-epoch value
MOSTLY_ONE_CLASS = 0.5  # ... and one class takes at least this share of the predictions (noisy validation labels
# alone can keep validation accuracy near chance while the model learns; its predictions then stay varied)
COLLAPSE_CAUSE = (
    "likely cause: learning rate too high or too low for this model, or noise too large for this "
    "release; try the model's paper defaults (no --lr override), more points (T) or less noise"
)


def chance_line(majority: float, rows: int) -> float:
    """The highest accuracy still read as chance on a split of ``rows`` labels whose most frequent class has share
    ``majority``: majority + CHANCE_SDS binomial standard deviations, sqrt(majority (1 - majority) / rows)."""
    return majority + CHANCE_SDS * math.sqrt(majority * (1 - majority) / rows)


def majority_rate(y: np.ndarray) -> float | None:
    """Share of the most frequent class: integer labels (n,), or one-hot/soft rows (n, K) by their argmax, a tie
    between k classes (label-only Laplace's labels clamped to [0, 1]) shared among them, 1/k each; None when empty
    or not class labels (one column). Of predicted classes, the share of the most predicted one."""
    y = np.asarray(y)
    if len(y) == 0 or (y.ndim == 2 and y.shape[1] < 2) or y.ndim > 2:
        return None
    if y.ndim == 2:  # training.losses.tied_label_shares in numpy (this module loads no torch)
        tied = y == y.max(axis=1, keepdims=True)
        return float((tied / tied.sum(axis=1, keepdims=True)).sum(axis=0).max()) / len(y)
    return float(np.bincount(y.astype(np.int64)).max()) / len(y)


def collapse_reason(
    history: list[dict],
    *,
    val_majority: float | None,
    prediction_share: float | None,
    cause: str = COLLAPSE_CAUSE,
    test_accuracy: float | None = None,
    test_majority: float | None = None,
    test_rows: int | None = None,
    predicted_on: str = "the test rows",
) -> str | None:
    """None when the model learned; else one plain sentence saying why the run counts as collapsed.

    ``predicted_on``: the rows ``prediction_share`` was read on, as the sentence names them.

    Collapsed: the model predicts one class for >= ONE_CLASS_SHARE of the test
    rows; or its test accuracy is at most the test split's majority-class rate p plus CHANCE_SDS binomial
    standard deviations, sqrt(p (1 - p) / test_rows) (no better than always answering the most frequent
    class: spread-out predictions at chance, or below it); or its best validation accuracy stays within
    VAL_MARGIN of the majority-class rate while the training loss stays at its first-epoch value
    and one class takes at least MOSTLY_ONE_CLASS of the predictions. ``cause`` ends the sentence (default
    COLLAPSE_CAUSE; the runner passes :func:`shift_note`'s when the BatchNorm diagnostic explains the collapse).
    """
    if prediction_share is not None and prediction_share >= ONE_CLASS_SHARE:
        return (
            f"collapsed: the model predicts one class for {100 * prediction_share:.0f} % of {predicted_on} "
            f"(the constant predictor); {cause}."
        )
    if test_accuracy is not None and test_majority is not None and test_rows:
        if test_accuracy <= (line := chance_line(test_majority, test_rows)):
            return (
                f"collapsed: test accuracy {100 * test_accuracy:.2f} % is no better than always predicting the most "
                f"frequent class ({100 * test_majority:.2f} % of the {test_rows} test rows; on that many rows up to "
                f"{100 * line:.2f} % is within {CHANCE_SDS:g} binomial standard deviations of it); {cause}."
            )
    vals = [float(h["val_accuracy"]) for h in history if h.get("val_accuracy") is not None]
    losses = [float(h["loss"]) for h in history if h.get("loss") is not None]
    if val_majority is None or not vals or len(losses) < 2 or (prediction_share or 0.0) < MOSTLY_ONE_CLASS:
        return None
    loss_flat = losses[-1] >= (1 - LOSS_DROP) * losses[0]
    if max(vals) <= val_majority + VAL_MARGIN and loss_flat:
        return (
            f"collapsed: validation accuracy never exceeded the majority-class rate ({100 * val_majority:.1f} %) "
            f"and the training loss stayed at its initial value; {cause}."
        )
    return None


def selection_note(
    history: list[dict],
    *,
    best_epoch: int | None,
    val_majority: float | None,
    val_rows: int,
    label_agreement: float | None = None,
) -> str | None:
    """None unless early stopping kept epoch ``best_epoch`` on a validation split at chance; else a note saying so.

    At chance: the best validation accuracy is at most :func:`chance_line` of the split (its majority-class rate
    plus CHANCE_SDS binomial standard deviations), the line :func:`collapse_reason` reads the test split with. The epoch
    kept is then an arbitrary one, whatever the test split says of it. ``label_agreement`` (the share of the
    release's labels that are the true class, e.g. hard labels under noise) is quoted when given and below 0.9.
    """
    vals = [float(h["val_accuracy"]) for h in history if h.get("val_accuracy") is not None]
    if best_epoch is None or val_majority is None or val_rows < 1 or not vals:
        return None
    if max(vals) > chance_line(val_majority, val_rows):
        return None
    labels = ""
    if label_agreement is not None and label_agreement < 0.9:
        labels = (
            f"; only about {100 * label_agreement:.0f} % of the release's labels are the true class (the argmax of "
            "a one-hot label under its noise): about what a perfect model would score on that split"
        )
    return (
        f"early stopping had no signal: the release's validation accuracy never rose clearly above chance (best "
        f"{100 * max(vals):.1f} % against the majority-class rate {100 * val_majority:.1f} % of its {val_rows} points), "
        f"so epoch {best_epoch}, the one kept, is as good a pick as any{labels}. A fixed number of epochs, more "
        "points (T) or less noise gives the choice something to read"
    )


SHIFT_NOTE_GAP = 0.05  # recalibrated accuracy this much above the protocol's: say so in the run's notes


def shift_note(accuracy: float | None, recalibrated: float | None, *, collapsed: bool) -> str | None:
    """None unless ``recalibrated`` is at least SHIFT_NOTE_GAP above ``accuracy``; else, for a collapsed run, the
    likely cause (for :func:`collapse_reason`), and for any other run a note on the gap."""
    if accuracy is None or recalibrated is None or recalibrated < accuracy + SHIFT_NOTE_GAP:
        return None
    measured = (
        "with its BatchNorm statistics re-estimated on the unlabelled test inputs (AdaBN; a diagnostic outside the "
        f"protocol, not this run's result) the model scores {100 * recalibrated:.2f} % instead of {100 * accuracy:.2f} %"
    )
    if collapsed:
        return (
            "likely cause: the BatchNorm statistics learned on the noisy release do not fit clean inputs, not a "
            f"failure to learn ({measured}); a normalisation without running statistics avoids it (GroupNorm: "
            "dpcda-cnn-gn for the DP-CDA CNN, e.g. at Adam --lr 1e-4)"
        )
    return f"{measured}: part of the gap to a clean-data model is the release's BatchNorm statistics not fitting clean inputs"
