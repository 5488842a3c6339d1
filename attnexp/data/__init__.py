"""Lightning data modules; every one exposes ``spec``, the shape facts a network is built from."""

from attnexp.data.batch_augment import BatchAugment
from attnexp.data.cifar10 import CIFAR10DataModule
from attnexp.data.digits import DigitsDataModule
from attnexp.data.image_datamodule import ImageDataModule, patchify
from attnexp.data.mnist import MNISTDataModule

__all__ = ["BatchAugment", "CIFAR10DataModule", "DigitsDataModule", "ImageDataModule", "MNISTDataModule", "patchify"]
