"""The ``attnexp-predict`` entrypoint: next-token predictions and a continuation from a trained text run, or the
output of an encoder-decoder run (translation, captioning) with its beam-search alternatives."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig, OmegaConf

from attnexp.cli.search_path import add_import_folders
from attnexp.cli.train import CONFIG_DIR, build_net
from attnexp.cli.validate import quote_path
from attnexp.errors import EXIT_CODES, AttnexpError, explain
from attnexp.runs.folders import saved_hydra

if TYPE_CHECKING:  # torch is imported once a prediction is asked for: --help answers at once
    from torch import Tensor, nn

    from attnexp.data.vocabulary import Vocabulary


def find_checkpoint(run: Path, checkpoint: str) -> Path:
    """``best`` (the run's best checkpoint by its task's metric, else ``last``), ``last``, or a path to a ``.ckpt``
    file.
    A mid-epoch ``interrupted.ckpt`` is used only when named as a path."""
    folder = run / "checkpoints"
    if checkpoint == "best":
        best = (p for p in folder.glob("*.ckpt") if p.name not in ("last.ckpt", "interrupted.ckpt"))
        found = sorted(best, key=lambda p: p.stat().st_mtime) or sorted(folder.glob("last.ckpt"))
    else:
        path = folder / "last.ckpt" if checkpoint == "last" else Path(checkpoint)
        found = [path] if path.is_file() else []
    if not found:
        raise AttnexpError(
            f"No checkpoint {checkpoint!r} for run={run}: looked in {folder}. Pass the folder of a finished "
            "training run (it holds .hydra/ and checkpoints/), and checkpoint=best, last or a path to a .ckpt file."
            + (
                f" The run was interrupted before an epoch ended: checkpoint={folder / 'interrupted.ckpt'} loads "
                "its mid-epoch state."
                if (folder / "interrupted.ckpt").is_file()
                else ""
            )
        )
    return found[-1]


def load_run(run: str, checkpoint: str = "best") -> tuple[nn.Module, dict[str, Any]]:
    """The trained network (eval mode, CPU) of a run folder, and its data's state from the checkpoint (a
    vocabulary, or for an encoder-decoder the vocabularies, shapes and image normalisation)."""
    folder = Path(run).expanduser()
    config = folder / ".hydra" / "config.yaml"
    if not config.is_file():
        raise AttnexpError(
            f"run={run} is not a run folder: {config} is missing. Pass the folder a training run wrote, "
            "e.g. run=outputs/runs/2026-01-01/12-00-00_dot_corpus."
        )
    state = read_intact(find_checkpoint(folder, checkpoint), fall_back=checkpoint == "best")
    data_state = next((v for v in state.values() if isinstance(v, dict) and ("vocab" in v or "tgt_vocab" in v)), None)
    if data_state is None:
        raise AttnexpError(
            f"run={run} was not trained on text or sequence pairs "
            "(its checkpoint holds no vocabulary). attnexp-predict "
            "works on runs of data=corpus, text, dates, pairs and captions."
        )
    spec = data_state.get("spec") or {"vocab_size": len(data_state["vocab"]), "context": data_state["context"]}
    hydra_cfg = saved_hydra(folder)
    if hydra_cfg is not None:  # a mixer of the user's: importable from the folder the run was started in, as then
        add_import_folders(list(hydra_cfg.searchpath), str(hydra_cfg.runtime.cwd))
    net = build_net(OmegaConf.load(config).net, spec)
    net.load_state_dict({k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")})
    return net.eval(), data_state


def read_intact(path: Path, fall_back: bool) -> dict[str, Any]:
    """The checkpoint at ``path``; when it is damaged, with ``fall_back`` (``checkpoint=best``, the default) the run's
    newest intact one with a warning, else an error naming the intact ones."""
    from attnexp.callbacks.checkpoints import DamagedCheckpoint, intact_checkpoints, read_checkpoint

    try:
        return read_checkpoint(path)
    except DamagedCheckpoint as err:
        intact = intact_checkpoints(path.parent, besides=path)
        if fall_back and intact:
            print(f"warning: {err} Predicting with {intact[0]} instead.", file=sys.stderr)
            return read_checkpoint(intact[0])
        named = (
            f" Intact: {', '.join(f'checkpoint={p}' for p in intact)}."
            if intact
            else " The run has no intact checkpoint."
        )
        raise DamagedCheckpoint(f"{err}{named}") from err


def encode_prompt(prompt: str, vocab: Vocabulary, what: str = "prompt") -> Tensor:
    """Prompt (or source) ids; unknown tokens become ``[unk]`` with a warning, only unknown ones are an error.  #
    (L,)"""
    from attnexp.data.vocabulary import tokenize
    from attnexp.tokens import UNK

    tokens = tokenize(prompt, vocab.level)
    ids, unknown = vocab.encode(tokens)
    if not tokens or len(unknown) == len(tokens):
        known = ", ".join([repr(t) if vocab.level == "char" else t for t in vocab.tokens if not t.startswith("[")][:20])
        raise AttnexpError(
            f"The {what} {prompt!r} has no token the model knows ({vocab.level} level, {len(vocab)} tokens), so there "
            f"is nothing to predict from. Use {'words' if vocab.level == 'word' else 'characters'} "
            f"of the training text, e.g. {known}."
        )
    if unknown:
        print(f"warning: not in the vocabulary, read as {UNK}: {', '.join(map(repr, unknown))}", file=sys.stderr)
    return ids


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


def predict_next(cfg: DictConfig, net: nn.Module, vocab: Vocabulary) -> str:
    """The top-k next tokens after the prompt and a continuation."""
    from attnexp.data.vocabulary import detokenize
    from attnexp.networks.language_model import continue_ids, next_token_probs

    ids = encode_prompt(str(cfg.prompt), vocab)
    top = next_token_probs(net, ids).topk(min(cfg.top_k, len(vocab)))
    prompt = detokenize(vocab.decode(ids.tolist()), vocab.level)
    lines = [f"prompt: {prompt!r}", f"next token (top {len(top.indices)}):"]
    lines += [f"  {p:.4f}  {vocab.tokens[i]!r}" for p, i in zip(top.values.tolist(), top.indices.tolist())]
    if cfg.tokens:
        out = continue_ids(net, ids, cfg.tokens, cfg.sample, cfg.temperature, cfg.seed)
        how = f"sampled at temperature {cfg.temperature}, seed {cfg.seed}" if cfg.sample else "greedy"
        lines += [f"continuation ({how}, {cfg.tokens} tokens):", detokenize(vocab.decode(out.tolist()), vocab.level)]
    return "\n".join(lines)


def predict_sequence(cfg: DictConfig, net: nn.Module, state: dict[str, Any]) -> str:
    """The best output of a beam search for ``source=`` or ``image=``, and the top alternatives with their
    probabilities."""
    from attnexp.data.vocabulary import Vocabulary
    from attnexp.networks.decoding import beam_search

    if "src_vocab" in state:
        src_vocab = Vocabulary.from_state(state["src_vocab"])
        src, shown = encode_source(str(cfg.source), src_vocab, state["spec"]["src_len"]), repr(str(cfg.source))
    else:
        from attnexp.data.captions import canvas_from_file

        spec = state["spec"]
        src, shown = (
            canvas_from_file(str(cfg.image), spec["image_height"], spec["image_width"], state["image"]),
            str(cfg.image),
        )
    vocab = Vocabulary.from_state(state["tgt_vocab"])
    ids, scores = beam_search(net, src.unsqueeze(0), cfg.beam)
    outputs = [vocab.text(row) for row in ids[0].tolist()]
    how = "greedy" if len(outputs) == 1 else f"beam search, {len(outputs)} hypotheses"
    lines = [
        f"{'source' if 'src_vocab' in state else 'image'}: {shown}",
        f"output: {outputs[0]}",
        f"top {min(cfg.top_k, len(outputs))} ({how}):",
    ]
    lines += [f"  {p:<9.4g} {o}" for p, o in zip(scores[0].exp().tolist()[: cfg.top_k], outputs)]
    return "\n".join(lines)


def encode_source(text: str, vocab: Vocabulary, length: int) -> Tensor:
    """Source ids of ``text`` padded to the trained length; unknown tokens warn (as prompts do), a source
    longer than any the model was trained on is an error.  # (S,)"""
    import torch

    from attnexp.tokens import PAD_ID

    ids = encode_prompt(text, vocab, "source")
    if len(ids) > length:
        raise AttnexpError(
            f"The source {text!r} has {len(ids)} {vocab.level} tokens; the model was built for at most "
            f"{length} (the longest source in its data). Shorten it."
        )
    return torch.cat([ids, torch.full((length - len(ids),), PAD_ID, dtype=torch.long)])


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="predict")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-predict`` (:func:`cli`); a bad run folder, prompt or setting gets one
    paragraph and exit status 2."""
    try:
        print(predict(cfg))
    except AttnexpError as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"attnexp-predict: {explain(err)}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None


def cli() -> None:
    """Console script ``attnexp-predict``: :func:`main`; a second Ctrl-C, which stops at once, exits with status 130."""
    sys.argv[1:] = [quote_path(a, ("run",)) for a in sys.argv[1:]]
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    cli()
