"""Static cost of euclid's Triton kernels against flash attention's, compiled offline: no GPU needed, no time measured.

Each kernel the operator launches for a bf16 forward and backward pass (head dim 64, the mixer's layout, no mask, L =
1024) is compiled for sm_90 (``--arch``) as scripts/euclid_kernel_offline.py does, and so is a flash
attention of the same shapes written here (dot scores, an online softmax forward, a split backward: keys then queries,
as Triton's tutorial). From each kernel's SASS (cuobjdump) the main loop (the first outermost loop holding matrix
products, one tile per iteration) is read two ways: its **hot path**, from its head to its back edge through the most
matrix products with the fewest instructions (what a tile computed from the expansion executes; euclid's tiles from the
differences run in a loop of their own; a branch over a few instructions, a masked store's or atomic's guard, is gone
through), and its whole body. Per kernel: those counts per thread per tile, per score (times the block's threads, over
the tile's scores), the special-function (MUFU) ops per score on the hot path, registers, stack bytes (spills), shared
memory, and blocks per SM. The last lines: euclid's forward+backward over flash's (per score, hot path), the aim <= 2.

    PYTHONPATH=. python scripts/bench_kernel_static.py [--arch 90] [--markdown kernel_static.md]

Static counts are no timing: they leave out memory stalls, latency hiding and the tensor cores' share of the work.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

import euclid_kernel_offline as offline  # beside this script
import torch
import triton
import triton.language as tl
from smoke import parsed

from attnexp.mixers.euclid.ops.kernel import launches
from attnexp.mixers.euclid.ops.kernel.launches import Launch

GUARD = 16  # a conditional branch over at most this many instructions, a store or atomic among them, guards them
INSTRUCTION = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)([^;]*);")
TILES = {
    "euclid_forward": (launches.FORWARD_M, launches.KEYS),
    "euclid_backward": (launches.KEYS, launches.QUERIES),
    "euclid_backward_delta": (launches.KEYS, launches.QUERIES // 2),
    "euclid_backward_exact": (launches.KEYS, launches.QUERIES // 2),
    "flash_forward": (launches.FORWARD_M, launches.KEYS),
    "flash_backward_keys": (launches.KEYS, launches.QUERIES),
    "flash_backward_queries": (launches.QUERIES, launches.KEYS),
}


@triton.jit
def rows_of(X, bh, n, start, s_r, BLOCK: tl.constexpr, D: tl.constexpr):
    """The pointers of BLOCK rows of a (B * H, n, D) tensor from ``start``.  # (BLOCK, D)"""
    return X + bh * n * s_r + (start + tl.arange(0, BLOCK))[:, None] * s_r + tl.arange(0, D)[None, :]


@triton.jit
def flash_forward(Q, K, V, OUT, LSE, s_r, n, c, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    """softmax(q k^T c) v, c = scale log2(e), for BLOCK_M queries of (B * H, n, D) rows."""
    bh = tl.program_id(0).to(tl.int64)
    start_m = tl.program_id(1) * BLOCK_M
    q = tl.load(rows_of(Q, bh, n, start_m, s_r, BLOCK_M, D))
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for start_n in range(0, n, BLOCK_N):
        k = tl.load(rows_of(K, bh, n, start_n, s_r, BLOCK_N, D))
        s = tl.dot(q, tl.trans(k)) * c
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        v = tl.load(rows_of(V, bh, n, start_n, s_r, BLOCK_N, D))
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(rows_of(OUT, bh, n, start_m, s_r, BLOCK_M, D), (acc / l_i[:, None]).to(tl.bfloat16))
    tl.store(LSE + bh * n + start_m + tl.arange(0, BLOCK_M), m_i + tl.log2(l_i))


@triton.jit
def flash_backward_keys(Q, K, V, DO, LSE, DELTA, DK, DV, s_r, n, c, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                        D: tl.constexpr):  # fmt: skip
    """dK and dV of BLOCK_N keys over every query tile."""
    bh = tl.program_id(0).to(tl.int64)
    start_n = tl.program_id(1) * BLOCK_N
    k = tl.load(rows_of(K, bh, n, start_n, s_r, BLOCK_N, D))
    v = tl.load(rows_of(V, bh, n, start_n, s_r, BLOCK_N, D))
    dk = tl.zeros((BLOCK_N, D), tl.float32)
    dv = tl.zeros((BLOCK_N, D), tl.float32)
    for start_m in range(0, n, BLOCK_M):
        q = tl.load(rows_of(Q, bh, n, start_m, s_r, BLOCK_M, D))
        do = tl.load(rows_of(DO, bh, n, start_m, s_r, BLOCK_M, D))
        lse = tl.load(LSE + bh * n + start_m + tl.arange(0, BLOCK_M))
        delta = tl.load(DELTA + bh * n + start_m + tl.arange(0, BLOCK_M))
        p = tl.exp2(tl.dot(k, tl.trans(q)) * c - lse[None, :])
        dv += tl.dot(p.to(tl.bfloat16), do)
        ds = p * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk += tl.dot(ds.to(tl.bfloat16), q)
    tl.store(rows_of(DK, bh, n, start_n, s_r, BLOCK_N, D), dk.to(tl.bfloat16))
    tl.store(rows_of(DV, bh, n, start_n, s_r, BLOCK_N, D), dv.to(tl.bfloat16))


@triton.jit
def flash_backward_queries(Q, K, V, DO, LSE, DELTA, DQ, s_r, n, c, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           D: tl.constexpr):  # fmt: skip
    """dQ of BLOCK_M queries over every key tile."""
    bh = tl.program_id(0).to(tl.int64)
    start_m = tl.program_id(1) * BLOCK_M
    q = tl.load(rows_of(Q, bh, n, start_m, s_r, BLOCK_M, D))
    do = tl.load(rows_of(DO, bh, n, start_m, s_r, BLOCK_M, D))
    lse = tl.load(LSE + bh * n + start_m + tl.arange(0, BLOCK_M))
    delta = tl.load(DELTA + bh * n + start_m + tl.arange(0, BLOCK_M))
    dq = tl.zeros((BLOCK_M, D), tl.float32)
    for start_n in range(0, n, BLOCK_N):
        k = tl.load(rows_of(K, bh, n, start_n, s_r, BLOCK_N, D))
        v = tl.load(rows_of(V, bh, n, start_n, s_r, BLOCK_N, D))
        p = tl.exp2(tl.dot(q, tl.trans(k)) * c - lse[:, None])
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq += tl.dot(ds.to(tl.bfloat16), k)
    tl.store(rows_of(DQ, bh, n, start_m, s_r, BLOCK_M, D), dq.to(tl.bfloat16))


def flash_launches(length: int = 1024, dim: int = 64) -> dict[str, Launch]:
    """The flash kernels' launches for bf16 (B * H, L, D) rows, with euclid's tiles and warps."""
    x, rows = torch.zeros(4, length, dim, dtype=torch.bfloat16), torch.zeros(4, length)
    c = dim**-0.5 * 1.4426950408889634
    fwd = dict(BLOCK_M=launches.FORWARD_M, BLOCK_N=launches.KEYS, D=dim, num_warps=launches.FORWARD_WARPS)
    bwd = dict(BLOCK_N=launches.KEYS, BLOCK_M=launches.QUERIES, D=dim, num_warps=launches.BACKWARD_WARPS)
    return {
        "flash_forward": Launch("flash_forward", (), (x, x, x, x, rows, dim, length, c), fwd),
        "flash_backward_keys": Launch("flash_backward_keys", (), (x, x, x, x, rows, rows, x, x, dim, length, c), bwd),
        "flash_backward_queries": Launch(
            "flash_backward_queries", (), (x, x, x, x, rows, rows, x, dim, length, c), bwd
        ),
    }


class Loop(NamedTuple):
    """A kernel's main loop, per thread and iteration (one tile)."""

    hot: int  # instructions on its shortest path from head to back edge
    whole: int  # instructions in its body
    mufu: int  # special-function ops on the hot path
    products: int  # matrix-product instructions in its body


def main_loop(sass: str) -> Loop | None:
    """The main loop of ``sass``: of its outermost loops (strongly connected parts of the control flow, wherever
    ptxas placed their blocks) holding matrix products (HMMA/HGMMA), the one entered first; None without."""
    code = [(bool(p), op, rest) for _, p, op, rest in INSTRUCTION.findall(sass) if op != "NOP"]
    at = {int(a, 16): i for i, (a, *_) in enumerate(INSTRUCTION.findall(sass)) if _[1] != "NOP"}
    at = {addr: i for i, addr in enumerate(sorted(at))}
    succ = []
    for i, (predicated, op, rest) in enumerate(code):
        found = re.search(r"0x([0-9a-f]+)\s*$", rest) if op.startswith("BRA") else None
        jump = at.get(int(found.group(1), 16), -1) if found else -1
        nexts = [] if op in ("EXIT", "RET") and not predicated else [i + 1]
        if jump >= 0 and not (predicated and i < jump <= i + 1 + GUARD and guarded(code[i + 1 : jump])):
            nexts = ([] if not predicated and op == "BRA" else nexts) + [jump]
        elif op == "BRA" and not predicated:
            nexts = []
        succ.append([j for j in nexts if j < len(code)])
    for part in sorted(components(succ), key=min):
        if len(part) > 1 and any("MMA" in code[i][1] for i in part):
            head = min(i for i in part if i == 0 or any(i in succ[j] for j in range(len(code)) if j not in part))
            hot, mufu = hot_cycle(code, succ, part, head)
            return Loop(hot, len(part), mufu, sum("MMA" in code[i][1] for i in part))
    return None


def guarded(skipped: list) -> bool:
    """Whether a conditional branch over ``skipped`` guards a masked store or atomic (then it is gone through)."""
    ops = [op for _, op, _ in skipped]
    return any(op.startswith(("ST", "RED", "ATOM")) for op in ops) and not any(op.startswith("BRA") for op in ops)


def components(succ: list[list[int]]) -> list[set[int]]:
    """The strongly connected components of a graph given by its successor lists (Tarjan's, without recursion)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    for root in range(len(succ)):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on.add(node)
            if child < len(succ[node]):
                work.append((node, child + 1))
                nxt = succ[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            for nxt in succ[node]:
                if nxt in on:
                    low[node] = min(low[node], low[nxt])
            if low[node] == index[node]:
                part = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    part.add(top)
                    if top == node:
                        break
                found.append(part)
    return found


def hot_cycle(code: list, succ: list[list[int]], part: set[int], head: int) -> tuple[int, int]:
    """(instructions, MUFU) of one iteration from ``head`` back to it running the most matrix products and, among
    those, the fewest instructions (the loop's inner loops left: edges back into the depth-first path dropped)."""
    order, state, work = [], {head: 1}, [(head, iter(succ[head]))]
    while work:  # depth-first order within the loop, edges back to the path left out
        node, it = work[-1]
        nxt = next((j for j in it if j in part and j not in state), None)
        if nxt is None:
            work.pop()
            state[node] = 2
            order.append(node)
        else:
            state[nxt] = 1
            work.append((nxt, iter(succ[nxt])))
    rank = {node: r for r, node in enumerate(reversed(order))}
    best = {head: (0, 0, 0)}  # node -> (-products, instructions, MUFU) before it
    done = None
    for node in sorted(rank, key=rank.get):
        if node not in best:
            continue
        products, count, mufu = best[node]
        _, op, _ = code[node]
        step = (products - ("MMA" in op), count + 1, mufu + op.startswith("MUFU"))
        for nxt in succ[node]:
            if nxt == head:
                done = step if done is None or step < done else done
            elif nxt in rank and rank[nxt] > rank[node] and step < best.get(nxt, (1, 0, 0)):
                best[nxt] = step
    assert done is not None, "no way around the loop"
    return done[1], done[2]


def row(name: str, launch: Launch, arch: int) -> tuple[str, float, bool]:
    """A kernel's line of the table, its hot-path instructions per score and whether it spills."""
    compiled = offline.compile_for(launch, arch, globals().get(name))
    res = offline.resources(compiled)
    loop = main_loop(offline.sass(compiled))
    cells = [name, str(res.registers), str(res.stack), f"{res.shared // 1024} KiB", str(res.blocks_per_sm(arch))]
    if loop is None or name not in TILES:
        return "| " + " | ".join(cells + ["-"] * 5) + " |", 0.0, res.stack > 0
    tile = TILES[name][0] * TILES[name][1]
    per_score = loop.hot * 32 * res.warps / tile
    cells += [
        str(loop.hot),
        str(loop.whole),
        f"{per_score:.2f}",
        f"{loop.mufu * 32 * res.warps / tile:.2f}",
        str(loop.products),
    ]
    return "| " + " | ".join(cells) + " |", per_score, res.stack > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, default=90, choices=offline.ARCHS)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parsed(parser, length=64, markdown=None)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton_cache_")  # compiled here, not found
    lines = [
        f"sm_{args.arch}, bf16, head dim 64, L = {args.length}, no mask; Triton {triton.__version__}, torch "
        f"{torch.__version__}, {platform.processor() or platform.machine()}; static: SASS counts, not timings\n",
        "| kernel | registers | stack B | shared | blocks/SM | hot path | whole loop | hot per score | MUFU per "
        "score | products |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals: dict[str, float] = {"euclid": 0.0, "flash": 0.0}
    spills = False
    launches = {**offline.launches(length=args.length), **flash_launches(args.length)}
    for name, launch in launches.items():
        line, per_score, spilled = row(name, launch, args.arch)
        lines.append(line)
        spills |= name.startswith("euclid") and spilled
        if name in ("euclid_forward", "euclid_backward") or name.startswith("flash"):
            totals[name.split("_")[0]] += per_score
    ratio = totals["euclid"] / totals["flash"]
    lines.append(
        f"\nforward+backward hot path per score: euclid {totals['euclid']:.2f}, flash {totals['flash']:.2f}: "
        f"{ratio:.2f}x (aim <= 2); euclid spills: {'yes' if spills else 'none'}"
    )
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
