"""Every data module holds its splits one way: batch sizes through SplitLoaders, a generated set's sizes and seed
through DealtSplits, each setting checked by its rule and offered by name to the typo hints."""

from __future__ import annotations

import inspect

import pytest
from omegaconf import OmegaConf

import attnexp.data as data
from attnexp.cli.typos import options_of
from attnexp.data.splits import DealtSplits, SplitLoaders
from attnexp.errors import AttnexpError

MODULES = [cls for cls in vars(data).values() if inspect.isclass(cls) and cls.__name__.endswith("DataModule")]
DEALT = ("train_size", "val_size", "test_size", "split_seed")


def options(cls: type) -> list[str]:
    found = options_of(OmegaConf.create({"_target_": f"attnexp.data.{cls.__name__}"}))
    assert found is not None
    return found[2]


GENERATED = [cls for cls in MODULES if "train_size" in options(cls)]  # the diagnostic tasks, dates, captions


def test_every_data_module_takes_its_batch_sizes_from_one_place():
    assert len(MODULES) >= 12
    for cls in MODULES:
        assert issubclass(cls, SplitLoaders), cls
        assert {"batch_size", "eval_batch_size"} <= set(options(cls)), cls
        if inspect.isabstract(cls) or cls.__name__ in ("SyntheticDataModule", "ImageDataModule"):
            continue
        with pytest.raises(AttnexpError, match=r"data\.batch_size=0 is not allowed"):
            cls(batch_size=0)


def test_a_generated_set_refuses_a_bad_split_setting_by_name_and_offers_every_one():
    names = {cls.__name__ for cls in GENERATED}
    assert {"DatesDataModule", "CaptionsDataModule", "MQARDataModule", "ListOpsDataModule", "SeqOpsDataModule"} <= names
    for cls in GENERATED:
        assert issubclass(cls, DealtSplits), cls
        assert set(DEALT) <= set(options(cls)), cls
        with pytest.raises(AttnexpError, match=r"data\.val_size=0 is not allowed"):
            cls(val_size=0)
        with pytest.raises(AttnexpError, match=r"data\.split_seed=-1 is not allowed"):
            cls(split_seed=-1)
        made = cls(train_size=7, val_size=5, test_size=3, split_seed=4)
        assert made.sizes == {"train": 7, "val": 5, "test": 3} and made.split_seed == 4
