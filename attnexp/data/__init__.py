"""Lightning data modules; every one exposes ``spec``, the shape facts a network is built from."""

from attnexp.data.batch_augment import BatchAugment
from attnexp.data.captions import CaptionsDataModule
from attnexp.data.cifar10 import CIFAR10DataModule
from attnexp.data.corpus import CorpusDataModule
from attnexp.data.dates import DatesDataModule
from attnexp.data.digits import DigitsDataModule
from attnexp.data.image_datamodule import ImageDataModule, patchify
from attnexp.data.listops import ListOpsDataModule
from attnexp.data.mnist import FashionMNISTDataModule, MNISTDataModule
from attnexp.data.mqar import MQARDataModule
from attnexp.data.pairs import PairsDataModule
from attnexp.data.recall import RecallDataModule
from attnexp.data.selective_copy import SelectiveCopyDataModule
from attnexp.data.seqops import SeqOpsDataModule
from attnexp.data.text import TextDataModule
from attnexp.data.vocabulary import Vocabulary

__all__ = [
    "BatchAugment",
    "CIFAR10DataModule",
    "CaptionsDataModule",
    "CorpusDataModule",
    "DatesDataModule",
    "DigitsDataModule",
    "FashionMNISTDataModule",
    "ImageDataModule",
    "ListOpsDataModule",
    "MNISTDataModule",
    "MQARDataModule",
    "PairsDataModule",
    "RecallDataModule",
    "SelectiveCopyDataModule",
    "SeqOpsDataModule",
    "TextDataModule",
    "Vocabulary",
    "patchify",
]
