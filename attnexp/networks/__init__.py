"""Networks around the token mixers (the ``net`` config group)."""

from attnexp.networks.language_model import LanguageModel
from attnexp.networks.patch_classifier import PatchClassifier
from attnexp.networks.seq2seq import Seq2Seq
from attnexp.networks.sequence_classifier import SequenceClassifier
from attnexp.networks.vit import VisionTransformer

__all__ = ["LanguageModel", "PatchClassifier", "Seq2Seq", "SequenceClassifier", "VisionTransformer"]
