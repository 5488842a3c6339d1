"""Networks that wrap the attention variants."""

from attnexp.models.language_model import LanguageModel
from attnexp.models.patch_classifier import PatchClassifier

__all__ = ["LanguageModel", "PatchClassifier"]
