"""Euclid's Triton kernel: the torch operator and its launch (:mod:`.operator`, no Triton import), the kernels
(:mod:`.kernels`) and their shared tile arithmetic (:mod:`.tiles`), imported when a kernel is launched."""

from attnexp.mixers.euclid.ops.kernel.operator import available, triton_euclid_attention

__all__ = ["available", "triton_euclid_attention"]
