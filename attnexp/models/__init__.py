"""Networks that wrap the attention variants."""

from attnexp.models.language_model import LanguageModel
from attnexp.models.patch_classifier import PatchClassifier
from attnexp.models.vit import VisionTransformer

__all__ = ["LanguageModel", "PatchClassifier", "VisionTransformer"]
