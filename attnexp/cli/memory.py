"""Out of memory, explained: the model's size, the batch, the device, and what to lower."""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf

from attnexp.errors import OutOfMemory, root_cause


def is_out_of_memory(err: BaseException) -> bool:
    """A failed allocation: Python's MemoryError, torch's CUDA or MPS out of memory, or its CPU allocator's refusal."""
    cause = root_cause(err)
    text = str(cause).lower()
    return (isinstance(cause, MemoryError) or type(cause).__name__ == "OutOfMemoryError"
            or "out of memory" in text or "can't allocate memory" in text)


def explain_out_of_memory(cfg: DictConfig, err: BaseException, params: int | None) -> OutOfMemory:
    """The paragraph for an allocation that failed (``params``: the network's parameter count, if known)."""
    cause = root_cause(err)
    text = " ".join(str(cause).split())
    device = "the GPU" if "cuda" in text.lower() or type(cause).__name__ == "OutOfMemoryError" else "the CPU (main memory)"
    asked = re.search(r"allocate (\d+) bytes", text) or re.search(r"[Tt]ried to allocate ([\d.]+ [KMGT]iB)", text)
    size = "" if asked is None else f" {int(asked[1]) / 2**30:.2f} GiB" if asked[1].isdigit() else f" {asked[1]}"
    model = (f"{params:,} parameters ({params * 4 / 2**30:.2f} GiB as float32; training with Adam keeps about 4 times "
             "that)") if params else "a size that could not be counted"
    batch = OmegaConf.select(cfg, "data.batch_size", default="?")
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    keys = [f"{k}={OmegaConf.select(cfg, k)}" for k in ("net.dim", "net.depth", "model.heads") if OmegaConf.select(cfg, k, default=None) is not None]
    return OutOfMemory(
        f"Out of memory on {device}: an allocation of{size or ' memory'} failed. The model has {model} and trains on "
        f"batches of {batch}{f' on each of {devices} devices' if devices not in (1, '1', 'auto') else ''}"
        f"{' (' + ', '.join(keys) + ')' if keys else ''}. Lower data.batch_size (data.eval_batch_size for validation "
        "and test), net.dim or net.depth; trainer.precision=bf16-mixed halves the activations; a sweep on one machine "
        "can run fewer jobs at once (hydra.launcher.n_jobs=1)."
    )
