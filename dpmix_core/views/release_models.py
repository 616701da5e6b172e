"""The release models a headline can speak for (no heavy imports: the CLI's parser lists them)."""

__all__ = ["RELEASE_MODELS"]

RELEASE_MODELS = {
    "dpmix": "ℓ distinct records per point, features in [0,1]^d, replace-one (DPMix, thesis)",
    "dpcda": "ℓ distinct records per point, features clipped to ‖x‖ ≤ c, replace-one (DP-CDA)",
    "poisson": "Poisson sampling with rate m/n, clipped, add/remove-one (DPFMix)",
}
