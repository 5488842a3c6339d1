"""Linear attention (Katharopoulos, Vyas, Pappas and Fleuret 2020, "Transformers are RNNs: Fast Autoregressive
Transformers with Linear Attention", ICML, arXiv:2006.16236).

The softmax's exp(q . k) is replaced by a kernel phi(q) . phi(k) with a positive feature map, phi(x) = elu(x) + 1
(their eq. 7), and each row is divided by its sum (their eq. 4):

    V'_i = phi(Q_i)^T (sum_j phi(K_j) V_j^T) / phi(Q_i)^T (sum_j phi(K_j)),

which, computed right to left, costs time and memory linear in the length (their eq. 5; causal: prefix sums,
eqs. 8-9). Its weights phi(q_i) . phi(k_j) / sum_j' phi(q_i) . phi(k_j') are non-negative and each row sums to 1:
distributions, as softmax's are (``weight_kind`` stays ``"distributions"``, and the conformance kit holds every row
to a sum of 1). The explicit path builds that matrix; the fused path ``linear`` is the paper's linear-time form.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.mixers import MultiHeadAttention, attention


def feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1: positive, so every kernel value phi(q) . phi(k) is.  # (..., D)"""
    return F.elu(x) + 1.0


class LinearAttention(MultiHeadAttention):
    """phi(q) . phi(k) over its row's sum, phi(x) = elu(x) + 1; no 1/sqrt(d) (the kernel has no temperature). The
    fused path has no attention dropout (training with dropout runs the explicit formula) and takes key padding masks;
    a mask that differs between queries, or a causal cross-attention, runs the explicit formula."""

    fused_paths = ("linear",)
    fused_dropout = False

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return feature_map(q) @ feature_map(k).transpose(-2, -1)  # (B, H, Lq, Lk), all > 0

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """Each kernel value over its row's sum; masked pairs arrive as -inf and weigh 0.  # (B, H, Lq, Lk)"""
        kernel = scores.clamp_min(0.0)
        return kernel / kernel.sum(-1, keepdim=True).clamp_min(torch.finfo(kernel.dtype).tiny)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        """Right to left: phi(K)^T V once (or its prefix sums when causal), then each query.  # (B, H, Lq, D)"""
        if (mask is not None and mask.dim() == 4 and mask.shape[-2] > 1) or (
            self.causal and q.shape[-2] != k.shape[-2]
        ):
            return attention(self.score(q.float(), k.float()), v, self.full_mask(mask, q, k), 0.0, self.normalise)[0]
        fq, fk, vf = feature_map(q.float()), feature_map(k.float()), v.float()
        if mask is not None:  # a key padding mask (B|1, H|1, 1, Lk): hidden keys add nothing
            fk = fk * mask.reshape(*mask.shape[:-2], -1, 1).to(fk.dtype)
        if self.causal:
            states = torch.einsum("bhld,bhle->bhlde", fk, vf).cumsum(
                2
            )  # (B, H, L, D, D): sum over j <= i of phi(k_j) v_j^T
            num = torch.einsum("bhld,bhlde->bhle", fq, states)
            den = (fq * fk.cumsum(2)).sum(-1, keepdim=True)  # (B, H, L, 1)
        else:
            num = fq @ (fk.transpose(-2, -1) @ vf)  # (B, H, Lq, D)
            den = fq @ fk.sum(-2).unsqueeze(-1)  # (B, H, Lq, 1)
        safe = torch.where(den > 0, den, torch.ones_like(den))  # a row with no key: 0 / 1, finite gradients too
        return (num / safe).to(v.dtype)
