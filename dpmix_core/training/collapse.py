"""Is a trained model the constant predictor? A run that never left it is marked ``collapsed``, never a result.

No torch import: the runner passes plain numbers (the per-epoch history, the
majority-class rate of the validation labels and the largest share of one
predicted class on the test split).
"""

from __future__ import annotations

__all__ = ["ONE_CLASS_SHARE", "VAL_MARGIN", "LOSS_DROP", "MOSTLY_ONE_CLASS", "COLLAPSE_CAUSE", "collapse_reason"]

ONE_CLASS_SHARE = 0.98  # predicting one class for at least this share of the test rows is the constant predictor
VAL_MARGIN = 0.01  # best validation accuracy within this of the majority-class rate: nothing learned ...
LOSS_DROP = 0.02  # ... when the training loss also fell by less than this fraction of its first-epoch value
MOSTLY_ONE_CLASS = 0.5  # ... and one class takes at least this share of the predictions (noisy validation labels
# alone can keep validation accuracy near chance while the model learns; its predictions then stay varied)
COLLAPSE_CAUSE = (
    "likely cause: learning rate too high or too low for this model, or noise too large for this "
    "release; try the model's paper defaults (no --lr override), more points (T) or less noise"
)


def collapse_reason(history: list[dict], *, val_majority: float | None, prediction_share: float | None) -> str | None:
    """None when the model learned; else one plain sentence saying why the run counts as collapsed.

    Collapsed: the model predicts one class for >= ONE_CLASS_SHARE of the test
    rows, or its best validation accuracy stays within VAL_MARGIN of the
    majority-class rate while the training loss stays at its first-epoch value
    and one class takes at least MOSTLY_ONE_CLASS of the predictions.
    """
    if prediction_share is not None and prediction_share >= ONE_CLASS_SHARE:
        return (
            f"collapsed: the model predicts one class for {100 * prediction_share:.0f} % of the test rows "
            f"(the constant predictor); {COLLAPSE_CAUSE}."
        )
    vals = [float(h["val_accuracy"]) for h in history if h.get("val_accuracy") is not None]
    losses = [float(h["loss"]) for h in history if h.get("loss") is not None]
    if val_majority is None or not vals or len(losses) < 2 or (prediction_share or 0.0) < MOSTLY_ONE_CLASS:
        return None
    loss_flat = losses[-1] >= (1 - LOSS_DROP) * losses[0]
    if max(vals) <= val_majority + VAL_MARGIN and loss_flat:
        return (
            f"collapsed: validation accuracy never exceeded the majority-class rate ({100 * val_majority:.1f} %) "
            f"and the training loss stayed at its initial value; {COLLAPSE_CAUSE}."
        )
    return None
