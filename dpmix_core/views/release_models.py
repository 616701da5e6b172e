"""The release models a headline can speak for (no heavy imports: the CLI's parser lists them)."""

__all__ = ["RELEASE_MODELS", "RELEASE_MODEL_NAMES"]

RELEASE_MODELS = {
    "dpmix": "ℓ distinct records per point, features in [0,1]^d, replace-one (DPMix, thesis)",
    "dpcda": "ℓ distinct records per point, features clipped to ‖x‖ ≤ c, replace-one (DP-CDA)",
    "poisson": "Poisson sampling with rate m/n, clipped, add/remove-one (DPFMix)",
    "dpmix-clip": "ℓ distinct records per point, ‖x‖ ≤ Cx and ‖y‖ ≤ Cy, replace-one (DPFMix App. E.3's DPMix)",
}

# The same models in a table cell's width (the Privacy accountant's "release analysed" column).
RELEASE_MODEL_NAMES = {
    "dpmix": "DPMix: [0,1] data, ℓ of n",
    "dpcda": "DP-CDA: clipped, ℓ of n",
    "poisson": "DPFMix: Poisson, clipped",
    "dpmix-clip": "DPMix: clipped x, y, ℓ of n",
}
