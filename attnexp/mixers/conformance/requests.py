"""Checks of the contract's requests and inputs: what does not fit is refused, what is asked is honoured or refused."""

from __future__ import annotations

import torch

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import Kit, Outcome, refusal


def mismatched_shapes(kit: Kit) -> Outcome:
    """Inputs that do not fit together raise an error instead of broadcasting into numbers."""
    mixer, s = kit.build(), kit.size
    cases = {
        "a context of another batch": dict(context=kit.context[:1]),
        "a mask of another key length": dict(mask=torch.ones(s.batch, 1, 1, s.queries + 1, dtype=torch.bool)),
        "a mask of another batch": dict(mask=torch.ones(s.batch + 1, 1, 1, s.queries, dtype=torch.bool)),
        "a float mask": dict(mask=torch.ones(s.batch, 1, 1, s.queries)),
    }
    computed = []
    for label, kwargs in cases.items():
        try:
            mixer(kit.x, **kwargs)
            computed.append(label)
        except Exception:
            pass
    try:
        mixer(kit.noise(s.batch, s.queries, s.dim + 1))
        computed.append("tokens of another width")
    except Exception:
        pass
    total = len(cases) + 1
    return not computed, f"{total - len(computed)} of {total} refused" + (
        f"; numbers computed for {', '.join(computed)}" if computed else ""
    )


def contract_options(kit: Kit) -> Outcome:
    """Each request of the contract is honoured (the mixer builds and runs; ``heads`` shows in the weights) or refused
    with :class:`AttnexpError`; a misspelt option raises instead of being ignored."""
    honoured: list[str] = []
    refused: list[str] = []
    wrong: list[str] = []
    for key, value in (
        ("causal", True),
        ("heads", 2),
        ("out_proj", False),
        ("shared_over_channels", True),
        ("num_tokens", None),
    ):
        label = f"{key}={value}"
        try:
            mixer = kit.build(**{key: value})
        except AttnexpError as err:
            refusal(err)
            refused.append(label)
            continue
        out, weights = mixer(kit.x, need_weights=True)
        heads = getattr(mixer, "heads", None)
        wrong_heads = key == "heads" and (
            heads not in (None, 2) or (weights is not None and weights.dim() == 4 and weights.shape[1] != 2)
        )
        (wrong if out.shape != kit.x.shape or wrong_heads else honoured).append(label)
    try:
        kit.build(hedas=2)
        wrong.append("a misspelt option (hedas=2) ignored")
    except TypeError:
        pass
    except AttnexpError as err:
        refusal(err)
    measured = (
        f"{len(honoured)} honoured"
        + (f", refused: {', '.join(refused)}" if refused else "")
        + "; a misspelt option raises"
    )
    return not wrong, measured if not wrong else f"not honoured: {', '.join(wrong)}"
