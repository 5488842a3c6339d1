"""Lightning data modules; every one exposes ``spec``, the shape facts a network is built from."""

from attnexp.data.digits import DigitsDataModule
from attnexp.data.image_datamodule import ImageDataModule, patchify
from attnexp.data.mnist import MNISTDataModule

__all__ = ["DigitsDataModule", "ImageDataModule", "MNISTDataModule", "patchify"]
