"""What greedy decoding costs against a teacher-forced pass: the validation of data=pairs decodes every epoch.

Builds ``net=seq2seq`` (its config, with the mixer of ``model=``) at the shapes of a real corpus (by default those
of the Spanish-English Bible verses of ``scripts/bible_pairs.py``: 9,642 target words, 48 target and 39 source
tokens), random weights, and times, in turns in one process, a teacher-forced forward pass of one validation batch
(the baseline) and greedy decoding of the same batch for all ``tgt_len - 1`` steps. Prints the medians and their
ratio: decoding re-runs the decoder on the whole prefix at every step, so the ratio grows with the target length.

    PYTHONPATH=. python scripts/bench_decoding.py --threads 2 model=euclid
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from smoke import parsed

from attnexp.cli.train import CONFIG_DIR
from attnexp.networks.decoding import greedy
from attnexp.tokens import BOS_ID, EOS_ID


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=500, help="data.eval_batch_size of data=pairs")
    parser.add_argument("--tgt-vocab", type=int, default=9642)
    parser.add_argument("--src-vocab", type=int, default=12000)
    parser.add_argument("--tgt-len", type=int, default=48)
    parser.add_argument("--src-len", type=int, default=39)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (model=..., net.dim=...)")
    args = parsed(parser, batch=8, rounds=1, tgt_vocab=50, src_vocab=50, tgt_len=8, src_len=8)
    torch.set_num_threads(args.threads)
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=["data=pairs", *args.overrides])
    torch.manual_seed(0)
    net = instantiate(
        cfg.net,
        src_vocab_size=args.src_vocab,
        src_len=args.src_len,
        tgt_vocab_size=args.tgt_vocab,
        tgt_len=args.tgt_len,
    ).eval()
    with torch.no_grad():
        net.head.bias[EOS_ID] = -1e4  # random weights: never end early, every step is decoded
    src = torch.randint(4, args.src_vocab, (args.batch, args.src_len))
    tgt = torch.cat(
        [torch.full((args.batch, 1), BOS_ID), torch.randint(4, args.tgt_vocab, (args.batch, args.tgt_len - 2))], 1
    )
    runs = {"teacher": lambda: net(src, tgt), "greedy": lambda: greedy(net, src)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        greedy(net, src[:8])  # warm-up
        for _ in range(args.rounds):
            for name, run in runs.items():
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    t, d = statistics.median(times["teacher"]), statistics.median(times["greedy"])
    print(
        f"bench_decoding: {' '.join(args.overrides) or 'model=dot'}, batch {args.batch}, target {args.tgt_len} tokens "
        f"of {args.tgt_vocab}, {args.threads} thread(s), {args.rounds} rounds; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"teacher-forced pass {t:.3f} s, greedy decoding {d:.3f} s: ratio {d / t:.1f}")


if __name__ == "__main__":
    main()
