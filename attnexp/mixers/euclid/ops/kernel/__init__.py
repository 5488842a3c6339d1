"""Euclid's Triton kernels: the torch operator (:mod:`.operator`) and the launches it runs (:mod:`.launches`), neither
importing Triton; the kernels (:mod:`.forward`, :mod:`.backward`, :mod:`.queries`) and their shared tile arithmetic
(:mod:`.tiles`), imported when a kernel is launched (scripts/euclid_kernel_offline.py compiles them for a GPU
without one)."""

from attnexp.mixers.euclid.ops.kernel.operator import available, triton_euclid_attention

__all__ = ["available", "triton_euclid_attention"]
