"""Every option of every config group composes and instantiates."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import pytorch_lightning as pl
from helpers import CONFIG_DIR, compose_cfg, options
from hydra.utils import instantiate

from attnexp.runs import trackers

CASES = [
    (g, o)
    for g in ("data", "model", "net", "task", "trainer", "logger", "callbacks", "module", "experiment")
    for o in options(g)
]


def test_groups_are_discovered():
    assert {"dot", "euclid", "masked", "se", "mlp"} <= set(options("model"))
    assert {
        "digits",
        "mnist",
        "corpus",
        "text",
        "mqar",
        "recall",
        "selective_copy",
        "seqops",
        "listops",
        "dates",
        "pairs",
        "captions",
    } <= set(options("data"))
    assert {"default", "cpu", "gpu"} <= set(options("trainer"))


def required_overrides(group: str, option: str, tmp_path: Path) -> list[str]:
    """Values an option leaves to the user, filled with small local stand-ins."""
    if (group, option) == ("data", "text"):
        path = tmp_path / "text.txt"
        path.write_text("to be, or not to be, that is the question. " * 20, encoding="utf-8")
        return [f"data.path={path}", "data.context=8"]
    if option == "nanogpt_char":  # the recipe reads Tiny Shakespeare from the data root
        path = tmp_path / "tinyshakespeare" / "input.txt"
        path.parent.mkdir()
        # 400 lines: the recipe's 0.05% validation is 12 characters, a window of 8 and its next token
        path.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 400, encoding="utf-8")
        return [f"paths.data_dir={tmp_path}", "data.context=8", "data.windows=24"]
    if (group, option) == ("net", "lm"):
        return ["data=corpus"]  # the language model is built from text data
    if (group, option) == ("net", "encoder"):
        return ["data=listops"]  # the sequence classifier is built from token sequences with labels
    if (group, option) == ("net", "seq2seq"):
        return ["data=dates"]  # the encoder-decoder is built from sequence pairs
    if option == "captions":  # the data option and the experiment
        return ["data.images=digits"]  # offline
    if (group, option) == ("data", "pairs"):
        path = tmp_path / "pairs.tsv"
        path.write_text("".join(f"hola {i}\thello {i}\n" for i in range(20)), encoding="utf-8")
        return [f"data.path={path}"]
    return []


@pytest.mark.parametrize("group,option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_option_composes_and_instantiates(group, option, tmp_path):
    override = f"+experiment={option}" if group == "experiment" else f"{group}={option}"
    cfg = compose_cfg([override.lstrip("+"), *required_overrides(group, option, tmp_path)], tmp_path)
    datamodule = instantiate(cfg.data)
    net = instantiate(cfg.net, **datamodule.spec)
    module = instantiate(cfg.module, net=net, task=instantiate(cfg.task))
    assert isinstance(module, pl.LightningModule)
    assert module.configure_optimizers() is not None
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    assert all(isinstance(c, pl.Callback) for c in callbacks)
    if group == "trainer" and option == "gpu":
        return  # building a GPU trainer needs a GPU; its config composed above
    loggers = [built_or_bound(node) for node in trackers.nodes(cfg).values()]
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=[lg for lg in loggers if lg is not None])
    assert isinstance(trainer, pl.Trainer)


def built_or_bound(node):
    """A logger of the config built; a tracker's (which makes its store or run when built) has its arguments bound to
    its class's signature instead (the CLI tests build them)."""
    if str(node._target_) in (trackers.MLFLOW, trackers.WANDB):
        from hydra.utils import get_object
        from omegaconf import OmegaConf

        given = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if not k.startswith("_")}
        inspect.signature(get_object(node._target_)).bind(**given)
        return None
    return instantiate(node)


@pytest.mark.parametrize("option", options("module/scheduler"))
def test_scheduler_is_picked_without_plus(option, tmp_path):
    cfg = compose_cfg([f"module/scheduler={option}"], tmp_path)
    module = instantiate(cfg.module, net=instantiate(cfg.net, **instantiate(cfg.data).spec), task=instantiate(cfg.task))
    schedule = module.configure_optimizers()["lr_scheduler"]["scheduler"]  # with its interval, in Lightning's form
    expected = {"cosine": "CosineAnnealingLR", "plateau": "ReduceLROnPlateau", "warmup_cosine": "SequentialLR"}
    assert type(schedule).__name__ == expected[option]


@pytest.mark.parametrize("option", options("trainer"))
def test_the_data_sampler_splits_across_ranks_itself(option, tmp_path):
    """The data's batch sampler already gives each rank its share: Lightning must not split it again."""
    assert compose_cfg([f"trainer={option}"], tmp_path).trainer.use_distributed_sampler is False


@pytest.mark.parametrize(
    "data,net",
    [
        ("digits", "PatchClassifier"),
        ("mnist", "PatchClassifier"),
        ("cifar10", "VisionTransformer"),
        ("corpus", "LanguageModel"),
        ("dates", "Seq2Seq"),
        ("captions", "Seq2Seq"),
        ("pairs", "Seq2Seq"),
    ],
)
def test_data_picks_its_network(data, net, tmp_path):
    assert compose_cfg([f"data={data}"], tmp_path).net._target_.endswith(net)
    assert compose_cfg([f"data={data}", "net=patch"], tmp_path).net._target_.endswith("PatchClassifier")


@pytest.mark.parametrize(
    "data,task,monitor,mode",
    [
        ("digits", "ImageClassification", "val/acc", "max"),
        ("corpus", "NextToken", "val/loss", "min"),
        ("dates", "Seq2SeqTask", "val/exact", "max"),
        ("pairs", "Seq2SeqTask", "val/bleu", "max"),
    ],
)
def test_data_picks_its_task_and_the_task_picks_the_checkpoint_metric(data, task, monitor, mode, tmp_path):
    cfg = compose_cfg([f"data={data}"], tmp_path)
    assert cfg.task._target_.endswith(task)
    assert (cfg.callbacks.checkpoint.monitor, cfg.callbacks.checkpoint.mode) == (monitor, mode)
    import torch

    callback = instantiate(cfg.callbacks.checkpoint)
    path = Path(
        callback.format_checkpoint_name({"epoch": 3, monitor: torch.tensor(0.25)})
    )  # Lightning's index of the 4th
    assert path.parent == Path(callback.dirpath) and path.name == "epoch004-best0.2500.ckpt"  # no sub-folder from '/'


@pytest.mark.parametrize("top_k", [1, 3])
def test_the_earliest_of_equally_good_epochs_is_the_best_checkpoint_named_from_epoch_one(tmp_path, top_k):
    """Lightning's rule, whatever save_top_k: a later epoch that ties the best does not replace it."""
    import pytorch_lightning as pl
    import torch

    from attnexp.training.callbacks.checkpoints import BestCheckpoint

    class Constant(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            return (self.w - batch[0]).pow(2).sum()

        def validation_step(self, batch, batch_idx):
            self.log("val/x", 0.5)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4, 1)), batch_size=2)
    callback = BestCheckpoint(
        dirpath=tmp_path,
        filename="epoch{epoch:03d}",
        auto_insert_metric_name=False,
        monitor="val/x",
        mode="max",
        save_top_k=top_k,
    )
    trainer = pl.Trainer(
        max_epochs=3, callbacks=[callback], logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    trainer.fit(Constant(), data, data)
    assert callback.best_model_path == str(tmp_path / "epoch001.ckpt")


SPLIT = [o for o in options("data") if "split_seed" in (Path(CONFIG_DIR) / "data" / f"{o}.yaml").read_text()]


@pytest.mark.parametrize("data", SPLIT)
def test_a_split_seed_is_held_to_the_rule_of_the_seed(data, tmp_path):
    """``data.split_seed=-3`` ran while ``seed=-1`` was refused: both seed generators, one rule."""
    from attnexp.cli.values import RANGES
    from attnexp.errors import AttnexpError, root_cause

    cfg = compose_cfg([f"data={data}", *required_overrides("data", data, tmp_path)], tmp_path)
    for bad in (-3, 2**32):
        with pytest.raises(Exception) as raised:
            instantiate(cfg.data, split_seed=bad)
        assert isinstance(root_cause(raised.value), AttnexpError)
        assert f"data.split_seed={bad} is not allowed: data.split_seed must be {RANGES['seed'].allowed}" in str(
            root_cause(raised.value)
        )
    assert instantiate(cfg.data, split_seed=2**32 - 1).split_seed == 2**32 - 1


def test_every_option_of_every_group_is_in_the_configuration_reference():
    """docs/configuration.md's table names each option a group's folder holds (``module/scheduler=warmup_cosine`` was
    in --help and in no document)."""
    from helpers import REPO

    rows = [line for line in (REPO / "docs" / "configuration.md").read_text().splitlines() if line.startswith("| `")]
    missing = []
    for file in sorted(Path(CONFIG_DIR).glob("*/**/*.yaml")):
        group, option = file.parent.relative_to(CONFIG_DIR).as_posix(), file.stem
        top = group.split("/")[0]
        row = " ".join(r for r in rows if r.startswith((f"| `{group}`", f"| `{top}`")))
        if f"`{option}`" not in row and f"{group}={option}" not in row:
            missing.append(f"{group}={option}")
    assert not missing, missing


def test_every_checked_number_has_its_limits_in_the_configuration_reference():
    """docs/configuration.md's limits name each numeric key the pre-flight stage or a constructor of ours checks
    (``module.divergence_check_every=0`` ran, while the page called it the steps between checks)."""
    from helpers import REPO

    from attnexp.cli.values import RANGES
    from attnexp.rules import RULES

    text = (REPO / "docs" / "configuration.md").read_text()
    limits = text.split("## Limits of the numeric keys")[1].split("\n## ")[0]
    numeric = [k for k, rule in RANGES.items() if rule.kind in (int, float)] + ["threads"]
    missing = [k for k in numeric if f"`{k}`" not in limits]
    named = [n for n, rule in RULES.items() if rule.kind in (int, float)]
    missing += [n for n in named if f".{n}`" not in limits and f"`{n}`" not in limits]
    assert not missing, missing
