"""Networks that wrap the attention variants."""

from attnexp.models.patch_classifier import PatchClassifier

__all__ = ["PatchClassifier"]
