"""The ``attnexp-predict`` entrypoint: next-token predictions and a continuation from a trained text run, or the
output of an encoder-decoder run (translation, captioning) with its beam-search alternatives."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig, OmegaConf

from attnexp.cli import command, entrypoint
from attnexp.cli.build import network as build_net
from attnexp.cli.prediction import predict_next, predict_sequence
from attnexp.cli.preflight import jobs_of
from attnexp.cli.search_path import add_import_folders
from attnexp.cli.train import CONFIG_DIR
from attnexp.cli.typos import quote_path
from attnexp.errors import EXIT_CODES, AttnexpError, explain
from attnexp.runs import metrics_file
from attnexp.runs.folders import checkpoints_of
from attnexp.runs.identity import other_schema

if TYPE_CHECKING:  # torch is imported once a prediction is asked for: --help answers at once
    from torch import nn


MISMATCH = (  # a checkpoint that does not fit the network the run's record describes
    "The network built from the run's metrics.json does not take these weights: give a checkpoint this run wrote "
    "(checkpoint=best or last), or the folder of the run that wrote this one; a mixer of your own must have the "
    "parameters it had when the run trained"
)


def find_checkpoint(run: Path, checkpoint: str, record: dict[str, Any]) -> Path:
    """``best`` (the checkpoint the run's record names as its best by the task's metric, the one its test loaded; else
    ``last``), ``last``, or a path to a ``.ckpt`` file. A mid-epoch ``interrupted.ckpt`` is used only when named."""
    folder = checkpoints_of(run, record)  # the run's checkpoint callback's folder
    named = {"best": record.get("best_checkpoint") or "last.ckpt", "last": "last.ckpt"}.get(checkpoint)
    path = folder / Path(named).name if named else Path(checkpoint)
    if not os.path.isfile(path):  # False, not an OSError, for a name too long for the file system
        interrupted = folder / "interrupted.ckpt"
        raise AttnexpError(
            f"No checkpoint {checkpoint!r} for run={run}: {path} does not exist. Pass the folder of a training run "
            "(it holds metrics.json and checkpoints/), and checkpoint=best, last or a path to a .ckpt file."
            + (
                f" The run was interrupted before an epoch ended: checkpoint={interrupted} loads its mid-epoch state."
                if interrupted.is_file()
                else ""
            )
        )
    return path


def load_run(run: str, checkpoint: str = "best") -> tuple[nn.Module, dict[str, Any]]:
    """The trained network (eval mode, CPU) of a run folder, built from its record's config, and its data's state
    from the checkpoint (a vocabulary, or for an encoder-decoder the vocabularies, shapes and image normalisation)."""
    import torch

    from attnexp.training.callbacks.checkpoints import check_fits

    folder = Path(run).expanduser()
    record = metrics_file.read(folder)
    if not isinstance(record.get("config"), dict):
        raise AttnexpError(
            f"run={run} is not a run folder of this attnexp: {metrics_file.path(folder)} is missing or holds no "
            "config. Pass the folder a training run wrote, e.g. run=outputs/runs/dot_corpus_3f2a9c01/seed=0."
        )
    other = other_schema(record)
    if other:
        raise AttnexpError(
            f"run={run} cannot be read: {metrics_file.path(folder)} is {other[0]}. To predict from it, {other[1]}."
        )
    state = read_intact(find_checkpoint(folder, checkpoint, record), fall_back=checkpoint == "best")
    data_state = next((v for v in state.values() if isinstance(v, dict) and ("vocab" in v or "tgt_vocab" in v)), None)
    if data_state is None:
        raise AttnexpError(
            f"run={run} was not trained on text or sequence pairs (its checkpoint holds no vocabulary). "
            "attnexp-predict works on runs of data=corpus, text, dates, pairs and captions."
        )
    spec = data_state.get("spec") or {"vocab_size": len(data_state["vocab"]), "context": data_state["context"]}
    add_import_folders([], record.get("cwd"))  # a mixer of the user's: importable from where the run started, as then
    net = build_net(OmegaConf.create(record["config"]).net, spec)
    weights = {k: v for k, v in state["state_dict"].items() if k.startswith("net.")}
    check_fits(weights, torch.nn.ModuleDict({"net": net}), f"checkpoint={checkpoint} of run={run}", MISMATCH)
    net.load_state_dict({k.removeprefix("net."): v for k, v in weights.items()})
    return net.eval(), data_state


def read_intact(path: Path, fall_back: bool) -> dict[str, Any]:
    """The checkpoint at ``path``; a damaged one gives way to the run's newest intact one with ``fall_back``
    (``checkpoint=best``, the default), with a warning; else it is an error naming the intact ones."""
    from attnexp.training.callbacks.checkpoints import DamagedCheckpoint, intact_instead, read_checkpoint

    try:
        return read_checkpoint(path)
    except DamagedCheckpoint as err:
        intact = intact_instead(err, path, fall_back)
        print(f"warning: {err} Predicting with {intact} instead.", file=sys.stderr)
        return read_checkpoint(intact)


def predict(cfg: DictConfig) -> str:
    """The report ``attnexp-predict`` prints: for a text run the top-k next tokens and a continuation; for an
    encoder-decoder the output of a source text or image and the best alternatives of a beam search."""
    from attnexp.data.vocabulary import Vocabulary

    if cfg.top_k < 1 or cfg.tokens < 0 or not cfg.temperature > 0 or cfg.beam < 1:
        raise AttnexpError(
            "top_k must be >= 1, tokens >= 0, temperature > 0 and "
            f"beam >= 1; got top_k={cfg.top_k}, tokens={cfg.tokens}, "
            f"temperature={cfg.temperature}, beam={cfg.beam}. E.g. top_k=5 tokens=10 temperature=0.8 beam=4."
        )
    net, state = load_run(cfg.run, cfg.checkpoint)
    given = {key: cfg.get(key) for key in ("prompt", "source", "image") if cfg.get(key) is not None}
    wanted = "prompt" if "vocab" in state else "source" if "src_vocab" in state else "image"
    if list(given) != [wanted]:
        kind, example = {
            "prompt": ("a next-token run", "'prompt=\"[bos] el perro\"'"),
            "source": ("a translation run", "'source=\"3 de marzo de 2021\"'"),
            "image": ("a captioning run", "image=digits.png"),
        }[wanted]
        raise AttnexpError(
            f"run={cfg.run} is {kind}: give {wanted}= and nothing else of prompt=, source=, image= "
            f"(got {', '.join(given) or 'none'}), e.g. {example}."
        )
    if wanted == "prompt":
        return predict_next(cfg, net, Vocabulary.from_state(state))
    return predict_sequence(cfg, net, state)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="predict")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-predict`` (:func:`cli`); a bad run folder, prompt or setting gets one
    paragraph and exit status 2."""
    try:
        predicted = predict(cfg)
    except AttnexpError as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        command.refuse(f"attnexp-predict: {explain(err)}")
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    command.note_result(predicted)
    print(predicted)


def cli() -> None:
    """Console script ``attnexp-predict``: what Hydra cannot read or compose is one paragraph, then :func:`main`."""
    sys.argv[1:] = [quote_path(a, ("run",)) for a in sys.argv[1:]]
    entrypoint.run("attnexp-predict", lambda: jobs_of(sys.argv[1:], CONFIG_DIR, "predict"), main)


if __name__ == "__main__":
    cli()
