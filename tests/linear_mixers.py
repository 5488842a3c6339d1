"""Four sub-quadratic families written as a new user writes them from their papers, each correct and small: Based
(Arora et al. 2024: Taylor linear attention beside a sliding window), Hedgehog (Zhang et al. 2024: learned feature
maps), Mamba-2's state-space dual in chunked form (Dao and Gu 2024) and Gated DeltaNet (Yang et al. 2024, as a
recurrence); and broken copies with the bug of a first draft each: one that mixes the batch in training only, one
whose chunks read the next chunk, one that makes NaN past 100 tokens and one that makes NaN at its third training
step. For the kit's and the run's tests (and a user folder's in the CLI tests: copied beside its configs)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers import DotAttention, MultiHeadAttention, attention_weights, causal_mask


def rows_summing_to_one(w: Tensor, allowed: Tensor | None) -> Tensor:
    """Positive weights over the keys a row may see, each row divided by its sum (0 on a row that sees nothing)."""
    if allowed is not None:
        w = w.masked_fill(~allowed, 0.0)
    return w / w.sum(-1, keepdim=True).clamp_min(1e-30)


class Based(MultiHeadAttention):
    """Linear attention with the second-order Taylor feature map of exp (phi(q).phi(k) = 1 + s + s^2/2 > 0, s the
    scaled product of q and k projected to ``features`` channels), averaged with softmax attention over a sliding
    window of ``window`` tokens."""

    permutation_equivariant = False  # the window reads positions

    def __init__(self, dim: int, window: int = 4, features: int = 4, **options) -> None:
        super().__init__(dim, **options)
        self.window = window
        self.feature_q, self.feature_k = nn.Linear(self.head_dim, features), nn.Linear(self.head_dim, features)

    def taylor(self, x: Tensor) -> Tensor:
        x = x * x.shape[-1] ** -0.25
        return torch.cat([torch.ones_like(x[..., :1]), x, (x[..., :, None] * x[..., None, :]).flatten(-2) / 2**0.5], -1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool):
        allowed = self.full_mask(mask, q, k)
        phi_q, phi_k = self.taylor(self.feature_q(q.float())), self.taylor(self.feature_k(k.float()))
        linear = rows_summing_to_one(phi_q @ phi_k.transpose(-2, -1), allowed)
        lq, lk = q.shape[-2], k.shape[-2]
        near = (torch.arange(lq, device=q.device)[:, None] - torch.arange(lk, device=q.device)).abs() < self.window
        window = near if allowed is None else allowed & near
        local = attention_weights((q @ k.transpose(-2, -1)).float() * self.head_dim**-0.5, window)
        seen = window.any(-1, keepdim=True)  # a row whose window holds no key it may see: the linear part alone
        weights = torch.where(seen, 0.5 * (linear + local), linear)
        return weights.to(v.dtype) @ v, weights if need_weights else None


class Hedgehog(MultiHeadAttention):
    """Linear attention through a learned feature map per head, phi(x) = [softmax(xW), softmax(-xW)], W starting as
    the identity; weights phi(q).phi(k) over each row's sum."""

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.feature = nn.Parameter(torch.eye(self.head_dim).repeat(self.heads, 1, 1))  # (H, D, D)

    def phi(self, x: Tensor) -> Tensor:
        z = x.float() @ self.feature
        return torch.cat([z.softmax(-1), (-z).softmax(-1)], -1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool):
        weights = rows_summing_to_one(self.phi(q) @ self.phi(k).transpose(-2, -1), self.full_mask(mask, q, k))
        return weights.to(v.dtype) @ v, weights if need_weights else None


class BatchCentred(Hedgehog):
    """A draft that centres its features on the batch's mean while training (a batch norm without the norm): a
    sample's output depends on the others in its batch, in training mode only."""

    def phi(self, x: Tensor) -> Tensor:
        z = x.float() @ self.feature
        if self.training:
            z = z - z.mean(0, keepdim=True)
        return torch.cat([z.softmax(-1), (-z).softmax(-1)], -1)


class ChunkedSSD(MultiHeadAttention):
    """Mamba-2's state-space dual: weights (q.k / sqrt(d)) * prod(a_t, t = j+1..i) for keys j <= i, the decay a_t in
    (0, 1) computed from each token. The explicit path is that matrix; ``chunked`` (what ``auto`` trains with) is the
    chunked algorithm: within a chunk of ``chunk`` tokens the matrix, across chunks the state carried from one to the
    next."""

    fused_paths = ("chunked",)
    weight_kind = "signed"
    permutation_equivariant = False
    causal_only = True

    def __init__(self, dim: int, chunk: int = 16, **options) -> None:
        super().__init__(dim, **options)
        self.chunk = chunk
        self.decay = nn.Linear(dim, self.heads)

    def tokens(self, x: Tensor, context: Tensor) -> Tensor:
        return -F.softplus(self.decay(x)).transpose(1, 2)  # log a_t  # (B, H, L)

    def score(self, q: Tensor, k: Tensor, tokens: Tensor) -> Tensor:
        total = tokens.float().cumsum(-1)
        gap = total[..., :, None] - total[..., None, :]  # sum of log a_t over j < t <= i  # (B, H, L, L)
        gap = gap.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5 * gap.exp()

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return torch.where(torch.isinf(scores), 0.0, scores)  # no normaliser; masked pairs weigh 0

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str, tokens: Tensor) -> Tensor:
        if mask is not None and mask.shape[-2] != 1:
            raise AttnexpError("the chunked path takes key padding masks (B, 1, 1, Lk) only")
        if mask is not None:
            k = k * mask.transpose(-2, -1).to(k.dtype)  # hidden keys add nothing
        b, h, length, d = q.shape
        c = self.chunk
        n = -(-length // c)
        pad = n * c - length
        q, k, v = (F.pad(t.float(), (0, 0, 0, pad)).reshape(b, h, n, c, d) for t in (q, k, v))
        total = F.pad(tokens.float(), (0, pad)).reshape(b, h, n, c).cumsum(-1)  # (B, H, n, c)
        gap = (total[..., :, None] - total[..., None, :]).masked_fill(~causal_mask(c, c, q.device), float("-inf"))
        inside = ((q @ k.transpose(-2, -1)) * gap.exp()) @ v  # (B, H, n, c, D)
        states = (k * (total[..., -1:] - total).exp()[..., None]).transpose(-2, -1) @ v  # each chunk's, at its end
        entering = self.carried(states, total[..., -1].exp())  # (B, H, n, D, D)
        across = (q * total.exp()[..., None]) @ entering
        out = (inside + across) * self.head_dim**-0.5
        return out.reshape(b, h, n * c, d)[:, :, :length].to(v.dtype)

    def carried(self, states: Tensor, decays: Tensor) -> Tensor:
        """The state entering each chunk: the chunks before it, each decayed over the chunks since.
        # states (B, H, n, D, D), decays (B, H, n) -> (B, H, n, D, D)"""
        entering = [torch.zeros_like(states[:, :, 0])]
        for i in range(states.shape[2] - 1):
            entering.append(entering[-1] * decays[:, :, i, None, None] + states[:, :, i])
        return torch.stack(entering, 2)


class ChunkedSSDReadsAhead(ChunkedSSD):
    """A draft whose carried state is one chunk ahead: each chunk starts from the state after itself. Inside one
    chunk (8 tokens of 16) nothing shows; from two chunks on every chunk reads its own later tokens."""

    def carried(self, states: Tensor, decays: Tensor) -> Tensor:
        entering = [torch.zeros_like(states[:, :, 0])]
        for i in range(states.shape[2]):
            entering.append(entering[-1] * decays[:, :, i, None, None] + states[:, :, i])
        ahead = torch.stack(entering, 2)
        return ahead[:, :, 1:] if states.shape[2] > 1 else ahead[:, :, :1]


class GatedDeltaNet(MultiHeadAttention):
    """Gated DeltaNet as its recurrence: S_t = a_t S_(t-1) (I - b_t k_t k_t^T) + b_t v_t k_t^T, out_t = S_t q_t, keys
    of unit norm, the gate a_t and the step b_t in (0, 1) from each token. No weights; causal by construction."""

    causal_only = True
    permutation_equivariant = False
    weight_kind = "signed"

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.gates = nn.Linear(dim, 2 * self.heads)

    def tokens(self, x: Tensor, context: Tensor) -> tuple[Tensor, Tensor]:
        gate, step = self.gates(x).sigmoid().transpose(1, 2).chunk(2, 1)
        return gate, step  # (B, H, L) each

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool, tokens):
        gate, step = tokens
        if mask is not None:
            if mask.shape[-2] != 1:
                raise AttnexpError("GatedDeltaNet takes key padding masks (B, 1, 1, Lk) only")
            shown = mask[:, :, 0].to(step.dtype)  # (B, 1, L)
            step, gate = step * shown, torch.where(shown.bool(), gate, 1.0)  # a hidden key leaves the state alone
        k = F.normalize(k.float(), dim=-1)
        q, v = q.float(), v.float()
        state = q.new_zeros(*q.shape[:2], v.shape[-1], k.shape[-1])  # (B, H, Dv, Dk)
        outs = []
        for t in range(q.shape[-2]):
            a, b = gate[..., t, None, None], step[..., t, None, None]
            kt = k[:, :, t, None, :]  # (B, H, 1, Dk)
            state = a * (state - b * (state @ kt.transpose(-2, -1)) @ kt) + b * v[:, :, t, :, None] @ kt
            outs.append(state @ q[:, :, t, :, None])  # (B, H, Dv, 1)
        return (torch.cat(outs, -1).transpose(-2, -1) * self.head_dim**-0.5).to(v.dtype), None


class NaNPastHundred(DotAttention):
    """A distance bias sqrt(99.5 - |i - j|) written for sequences of at most 100 tokens: NaN for any longer one."""

    fused_paths = ()
    permutation_equivariant = False

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        i, j = (torch.arange(t.shape[-2], device=t.device, dtype=t.dtype) for t in (q, k))
        bias = torch.sqrt(99.5 - (i[:, None] - j).abs())
        return super().score(q, k) + 0.1 * bias


class NaNAtThirdStep(DotAttention):
    """Counts its training calls in a buffer and divides by (2.5 - count) under a square root: its third training
    step makes NaN, at parameters that are finite."""

    fused_paths = ()

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.register_buffer("calls", torch.zeros(()))

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        if self.training:
            self.calls += 1
        return super().score(q, k) * torch.sqrt(2.5 - self.calls)
