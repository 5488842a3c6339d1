"""The encoder-decoder: causal decoder, padding that changes nothing, cross-attention maths, decoding."""

from __future__ import annotations

import math
import re

import pytest
import torch
from helpers import model_factory, options
from torch import nn

from attnexp.errors import AttnexpError, explain, root_cause
from attnexp.mixers import DotAttention, EuclidAttention, SqueezeExcitation
from attnexp.networks import Seq2Seq
from attnexp.networks.decoding import beam_search, greedy, trim
from attnexp.tasks import Seq2SeqTask
from attnexp.tokens import BOS_ID, EOS_ID, PAD_ID

SRC = dict(src_vocab_size=13, src_len=9, tgt_vocab_size=11, tgt_len=8)


def build(variant: str, **overrides) -> Seq2Seq:
    return Seq2Seq(
        model_factory(variant, heads=2),
        **{**SRC, "dim": 16, "enc_depth": 2, "dec_depth": 2, "dropout": 0.0, **overrides},
    )


def refuses(variant: str) -> bool:
    try:
        build(variant)
    except AttnexpError:
        return True
    return False


VARIANTS = [v for v in options("model") if not refuses(v)]


def test_every_variant_but_mlp_builds():
    assert set(options("model")) - set(VARIANTS) == {"mlp"}


def test_mlp_is_refused_with_a_reason():
    with pytest.raises(Exception) as err:
        build("mlp")
    assert isinstance(root_cause(err.value), AttnexpError)
    assert re.search(r"mlp token mixer cannot predict next tokens.*sequence-to-sequence.*model=dot", explain(err.value))


def sources(batch: int = 3, length: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Random source ids with real lengths 9, 5 and 2 (padding after), and which positions are real."""
    torch.manual_seed(1)
    src = torch.randint(4, 13, (batch, length))
    real = torch.arange(length) < torch.tensor([9, 5, 2])[:batch, None]
    return src.masked_fill(~real, PAD_ID), real


@pytest.mark.parametrize("variant", VARIANTS)
def test_decoder_does_not_see_later_target_tokens(variant):
    torch.manual_seed(0)
    net = build(variant).eval()
    src, _ = sources()
    tgt = torch.randint(3, 11, (3, 7))
    for need_weights in (False, True):
        out = net(src, tgt, need_weights=need_weights)
        logits = out[0] if need_weights else out
        for i in range(6):
            changed = tgt.clone()
            changed[:, i + 1 :] = (
                3 + (tgt[:, i + 1 :] - 3 + torch.randint(1, 8, (3, 6 - i))) % 8
            )  # every later token differs
            after = net(src, changed, need_weights=need_weights)
            after = after[0] if need_weights else after
            torch.testing.assert_close(after[:, : i + 1], logits[:, : i + 1], rtol=1e-5, atol=1e-5)
            assert not torch.allclose(after[:, i + 1 :], logits[:, i + 1 :])


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_padded_source_positions_change_no_output(variant, positions):
    torch.manual_seed(0)
    net = build(variant, positions=positions).eval()
    src, real = sources()
    tgt = torch.randint(3, 11, (3, 7))
    other = src.clone()
    other[~real] = torch.randint(4, 13, (int((~real).sum()),))  # other content where the source is padding
    for need_weights in (False, True):
        out, changed = net(src, tgt, need_weights, real), net(other, tgt, need_weights, real)
        out, changed = (out, changed) if need_weights else ((out, []), (changed, []))
        assert torch.equal(out[0], changed[0])
        for a, b in zip(out[1], changed[1]):  # the weights over the source too (of real queries): zero on padded keys
            if a is not None and a.dim() == 4 and a.shape[-1] == 9:
                queries = real[:, None, :, None] if a.shape[-2] == 9 else torch.ones(1, dtype=torch.bool)
                assert torch.equal(a * queries, b * queries)
                assert (a[1, ..., 5:] == 0).all() and (a[2, ..., 2:] == 0).all()
    unmasked = net(other, tgt, real=torch.ones_like(real))  # the test can fail: without the mask the content counts
    assert not torch.allclose(unmasked, net(src, tgt, real=torch.ones_like(real)))


def cross_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Five target tokens, nine source tokens (the memory) and which source tokens are real."""
    return torch.randn(3, 5, 16), torch.randn(3, 9, 16), sources()[1]


def assert_cross_attention(
    layer: nn.Module, inputs: tuple, expected: torch.Tensor, weights: torch.Tensor, tolerance: float
) -> None:
    """The layer's cross-attention of ``inputs`` (from :func:`cross_inputs`) with the key padding mask, with and
    without weights."""
    x, memory, real = inputs
    for need_weights in (False, True):
        out, got = layer(x, context=memory, mask=real[:, None, None, :], need_weights=need_weights)
        torch.testing.assert_close(out, expected, rtol=tolerance, atol=tolerance)
        if need_weights:
            torch.testing.assert_close(got, weights, rtol=tolerance, atol=1e-6)


def test_dot_cross_attention_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ours = DotAttention(16, heads=4).eval()
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight), theirs.out_proj.bias.copy_(ours.out_proj.bias)
    x, memory, real = cross_inputs()
    expected, expected_weights = theirs(x, memory, memory, key_padding_mask=~real, average_attn_weights=False)
    assert_cross_attention(ours, (x, memory, real), expected, expected_weights, tolerance=1e-5)


def test_euclid_cross_attention_equals_its_formula_with_masks():
    torch.manual_seed(0)
    layer = EuclidAttention(16, heads=2).eval()
    x, memory, real = cross_inputs()
    q = layer.q_proj(x).view(3, 5, 2, 8).transpose(1, 2)
    k = layer.k_proj(memory).view(3, 9, 2, 8).transpose(1, 2)
    v = layer.v_proj(memory).view(3, 9, 2, 8).transpose(1, 2)
    score = 1.0 / (torch.cdist(q, k) * 8**-0.5 + 1e-9)  # (B, H, 5, 9)
    weights = score.masked_fill(~real[:, None, None, :], float("-inf")).softmax(-1)
    expected = layer.out_proj((weights @ v).transpose(1, 2).reshape(3, 5, 16))
    assert_cross_attention(
        layer, (x, memory, real), expected, weights, tolerance=1e-4
    )  # the small path and the explicit one


def test_se_cross_attention_gates_every_token_alike_from_the_real_source_tokens():
    torch.manual_seed(0)
    se = SqueezeExcitation(16, reduction=4).eval()
    x, memory, real = cross_inputs()
    out, gates = se(x, context=memory, mask=real[:, None, None, :], need_weights=True)
    mean = torch.stack([memory[b, real[b]].mean(0) for b in range(3)])
    torch.testing.assert_close(gates, se.excite(mean))
    torch.testing.assert_close(out, x * gates[:, None])


def test_image_source_cuts_patches_and_checks_the_patch_size():
    net = Seq2Seq(
        model_factory("dot"),
        channels=1,
        image_height=8,
        image_width=24,
        patch_size=2,
        tgt_vocab_size=11,
        tgt_len=5,
        dim=16,
    )
    assert net.source.num_tokens == 4 * 12
    assert net(torch.randn(2, 1, 8, 24), torch.randint(0, 11, (2, 4))).shape == (2, 4, 11)
    with pytest.raises(AttnexpError, match=r"data.patch_size=3 does not tile the 8x24 images.*\[1, 2, 4, 8\]"):
        Seq2Seq(
            model_factory("dot"), channels=1, image_height=8, image_width=24, patch_size=3, tgt_vocab_size=11, tgt_len=5
        )


@pytest.mark.parametrize("variant", ["dot", "euclid", "se"])
def test_greedy_output_is_the_argmax_of_its_own_teacher_forced_logits(variant):
    torch.manual_seed(2)
    net = build(variant).eval()
    src, _ = sources()
    out = greedy(net, src)  # (B, T)
    assert out.shape[1] <= net.tgt_len - 1
    logits = Seq2SeqTask().forward(net, src)  # teacher forced on [bos] + its own output
    assert torch.equal(trim(logits.argmax(-1)), out)
    fed = torch.cat([torch.full((3, 1), BOS_ID), out], 1)
    assert torch.equal(trim(net(src, fed[:, :-1]).argmax(-1)), out)


@pytest.mark.parametrize("variant", VARIANTS)
def test_next_token_logits_are_the_last_position_of_the_full_logits(variant):
    """Decoding scores only the last position (the head over the target vocabulary is most of its cost)."""
    torch.manual_seed(4)
    net = build(variant).eval()
    src, real = sources()
    memory, mask, _ = net.encode(src, real)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), torch.randint(3, 11, (3, 5))], 1)  # (B, 6)
    full, _ = net.decode(tgt, memory, mask)  # (B, 6, V)
    last = net.next_logits(tgt, memory, mask)  # (B, V)
    assert last.shape == (3, 11) and torch.isinf(last[:, [PAD_ID, BOS_ID]]).all()
    torch.testing.assert_close(last, full[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["dot", "euclid"])
def test_beam_search(variant):
    torch.manual_seed(3)
    net = build(variant).eval()
    src, _ = sources()
    one, _ = beam_search(net, src, beam=1)
    assert torch.equal(one[:, 0], greedy(net, src))  # beam size 1 is greedy decoding
    ids, scores = beam_search(net, src, beam=4)
    assert ids.shape[:2] == (3, 4) and (scores[:, :-1] >= scores[:, 1:]).all()  # best first
    for b in range(3):  # each score is the log-probability of its sequence, teacher-forced
        for k in range(4):
            seq = trim(ids[b, k : k + 1])
            length = int((seq != PAD_ID).sum())
            fed = torch.cat([torch.tensor([[BOS_ID]]), seq[:, :length]], 1)
            logp = net(src[b : b + 1], fed[:, :-1]).log_softmax(-1)[0]
            total = logp.gather(1, fed[0, 1:, None]).sum()
            assert math.isclose(float(total), float(scores[b, k]), rel_tol=1e-4, abs_tol=1e-4)
    assert len({tuple(trim(ids[0, k : k + 1])[0].tolist()) for k in range(4)}) == 4  # different hypotheses
    assert scores[:, 0].ge(beam_search(net, src, beam=1)[1][:, 0] - 1e-5).all()  # never worse than greedy


def test_task_loss_skips_padding_and_exact_match_needs_every_token():
    task = Seq2SeqTask()
    target = torch.tensor([[BOS_ID, 5, 6, EOS_ID, PAD_ID], [BOS_ID, 7, EOS_ID, PAD_ID, PAD_ID]])
    logits = torch.randn(2, 4, 9)
    loss, _, scored = task.loss(logits, target)
    assert int(task.count(scored)) == 5  # 3 + 2 tokens after [bos], [eos] included
    kept = target[:, 1:] != PAD_ID
    expected = torch.nn.functional.cross_entropy(logits[kept], target[:, 1:][kept])
    torch.testing.assert_close(loss, expected)
    from attnexp.tasks.seq2seq import same_sequences

    ref = target[:, 1:]
    assert same_sequences(torch.tensor([[5, 6, EOS_ID], [7, EOS_ID, PAD_ID]]), ref).tolist() == [True, True]
    assert same_sequences(torch.tensor([[5, 6, 6, EOS_ID], [7, 8, EOS_ID, PAD_ID]]), ref).tolist() == [False, False]


@pytest.mark.parametrize("text_metric", ["cer", "bleu"])
def test_decoded_metrics_score_right_and_wrong_outputs(text_metric):
    from types import SimpleNamespace

    from attnexp.data.vocabulary import Vocabulary
    from attnexp.tokens import SEQ2SEQ_SPECIALS

    vocab = Vocabulary([*SEQ2SEQ_SPECIALS, "the", "cat", "sat", "on", "mat", "."], "word")
    task = Seq2SeqTask(text_metric=text_metric)
    task.bind(SimpleNamespace(tgt_vocab=vocab))
    target = torch.tensor([[BOS_ID, 4, 5, 6, 7, 4, 8, 9, EOS_ID]])  # [bos] the cat sat on the mat . [eos]
    _, _, scored = task.loss(torch.zeros(1, 8, 10), target)

    def scores(output: list[int]) -> dict[str, float]:
        metrics = task.metrics(10, "val")
        decoded = torch.tensor([output])
        logits = torch.nn.functional.one_hot(
            torch.cat([decoded, torch.full((1, 8 - decoded.shape[1]), PAD_ID)], 1), 10
        ).float()
        task.decode = lambda net, x, beam=1: decoded  # the network's output, without a network
        task.update(metrics, logits, scored, None, torch.zeros(1, 1), "val")
        return {name: float(metric.compute()) for name, metric in metrics.items()}

    right = scores([4, 5, 6, 7, 4, 8, 9, EOS_ID])
    assert (
        right["exact"] == 1.0 and right["acc"] == 1.0 and right[text_metric] == (1.0 if text_metric == "bleu" else 0.0)
    )
    wrong = scores([4, 5, 6, 7, 4, 4, 9, EOS_ID])  # one word wrong
    assert wrong["exact"] == 0.0 and wrong["acc"] == pytest.approx(7 / 8)
    assert (
        (0 < wrong["bleu"] < 1)
        if text_metric == "bleu"
        else wrong["cer"] == pytest.approx(3 / len("the cat sat on the mat ."))
    )


def test_mismatched_task_and_network_are_explained():
    with pytest.raises(AttnexpError, match=r"task=seq2seq needs sequence pairs.*data=dates, pairs or captions"):
        Seq2SeqTask().bind(object())
    with pytest.raises(AttnexpError, match=r"net=seq2seq reads the targets too.*task=seq2seq"):
        build("dot")(torch.zeros(1, 3, dtype=torch.long))
