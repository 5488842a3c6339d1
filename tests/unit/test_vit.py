"""The ViT: shapes, parameter counts, the conv stem, variant semantics and its errors."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from helpers import model_factory, options

from attnexp.data import patchify
from attnexp.errors import AttnexpError
from attnexp.mixers import DISTRIBUTIONS, DenseMixer, DotAttention, EuclidAttention, weight_kind
from attnexp.networks import VisionTransformer

VARIANTS = {name: model_factory(name) for name in options("model")}  # each as its config builds it


def expected_params(
    variant: str,
    channels: int,
    image: int,
    patch: int,
    dim: int,
    depth: int,
    mlp_ratio: float,
    pool: str,
    classes: int = 10,
) -> int:
    """Parameter count written out from the architecture."""
    tokens = (image // patch) ** 2 + (pool == "cls")
    hidden = int(dim * mlp_ratio)
    mixer = {
        "dot": 4 * (dim * dim + dim),
        "euclid": 4 * (dim * dim + dim),
        "masked": 4 * (dim * dim + dim),
        "se": 2 * dim * max(dim // 4, 4) + max(dim // 4, 4) + dim,
        "mlp": tokens * tokens + tokens,
    }[variant]
    block = 2 * dim + mixer + 2 * dim + (dim * hidden + hidden + hidden * dim + dim)
    stem = channels * patch * patch * dim + dim
    return stem + (dim if pool == "cls" else 0) + tokens * dim + depth * block + 2 * dim + dim * classes + classes


CONFIGS = [  # variant, channels, image, patch, dim, depth, heads, mlp_ratio, pool
    ("dot", 3, 32, 4, 64, 2, 4, 2.0, "cls"),
    ("euclid", 1, 28, 7, 96, 4, 2, 2.0, "mean"),
    ("masked", 3, 32, 8, 48, 3, 3, 1.0, "cls"),
    ("se", 1, 8, 2, 32, 1, None, 2.0, "cls"),
    ("mlp", 3, 32, 4, 32, 2, None, 2.0, "cls"),
    ("mlp", 1, 28, 7, 64, 2, None, 1.5, "mean"),
]


@pytest.mark.parametrize("variant,channels,image,patch,dim,depth,heads,mlp_ratio,pool", CONFIGS)
def test_parameter_counts(variant, channels, image, patch, dim, depth, heads, mlp_ratio, pool):
    mixer = model_factory(variant, **({} if heads is None else {"heads": heads}))
    net = VisionTransformer(
        mixer, image, channels, None, 10, patch=patch, dim=dim, depth=depth, mlp_ratio=mlp_ratio, pool=pool
    )
    assert sum(p.numel() for p in net.parameters()) == expected_params(
        variant, channels, image, patch, dim, depth, mlp_ratio, pool
    )


@pytest.mark.parametrize("variant", options("model"))
def test_every_variant_runs_with_its_maps(variant):
    net = VisionTransformer(model_factory(variant, heads=2), 8, 1, 2, 10, dim=16, depth=2)
    logits, maps = net(torch.randn(5, 16, 4), need_weights=True)
    assert logits.shape == (5, 10) and len(maps) == 2
    distributions = weight_kind(net.blocks[0].mixer) == DISTRIBUTIONS
    for m in (
        maps
    ):  # attention: (B, H, L, L) weights in [0, 1], rows that sum to 1 where distributions; se: gates; mlp: none
        assert m is None or m.shape in ((5, 2, 17, 17), (5, 16))
        if m is not None and m.dim() == 4:
            assert float(m.min()) >= 0 and float(m.max()) <= 1
            if distributions:
                torch.testing.assert_close(m.sum(-1), torch.ones(5, 2, 17))
            else:  # sigmoid: b = -log n starts every weight near 1/n, so rows start near 1 without being held there
                assert not torch.allclose(m.sum(-1), torch.ones(5, 2, 17))


def test_book_configuration_size():
    """experiment=vit_book: patch 4, dim 512, 8 heads, MLP dim 512, 6 layers, class token."""
    net = VisionTransformer(model_factory("dot", heads=8), 32, 3, 4, 10, dim=512, depth=6, mlp_ratio=1.0)
    assert sum(p.numel() for p in net.parameters()) == expected_params("dot", 3, 32, 4, 512, 6, 1.0, "cls") == 9_532_938
    assert net.blocks[0].mixer.heads == 8


def test_stem_gives_the_same_result_on_images_and_precut_patches():
    torch.manual_seed(0)
    net = VisionTransformer(VARIANTS["dot"], 28, 1, None, 10, patch=7, dim=32, depth=1).eval()
    images = torch.randn(4, 1, 28, 28)
    torch.testing.assert_close(net(patchify(images, 7)), net(images), atol=1e-5, rtol=1e-5)
    assert net.embed(images).shape == (4, 16, 32)


def test_masked_is_causal_over_patches_and_the_class_token_sees_all():
    torch.manual_seed(1)
    net = VisionTransformer(VARIANTS["masked"], 8, 1, None, 10, patch=2, dim=16, depth=2).eval()
    images = torch.randn(2, 1, 8, 8)
    logits, maps = net(images, need_weights=True)
    future = torch.ones(17, 17, dtype=torch.bool).triu(1)
    assert torch.all(maps[0][..., future] == 0) and torch.all(maps[0][..., -1, :] > 0)
    changed = images.clone()
    changed[:, :, :2, :2] += 1.0  # the first patch
    assert not torch.allclose(net(changed), logits)


def test_the_heads_are_the_mixers():
    """One home for the number of heads: the mixer's ``model.heads``; the network asks for none."""
    assert VisionTransformer(partial(EuclidAttention, heads=4), 8, 1, 2, 10, dim=16, depth=1).blocks[0].mixer.heads == 4
    with pytest.raises(TypeError, match="heads"):
        VisionTransformer(partial(DotAttention, heads=2), 8, 1, 2, 10, dim=16, depth=1, heads=4)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            dict(patch_size=None, patch=5),
            r"net.patch=5 does not divide the image size 32.*Allowed: \[1, 2, 4, 8, 16, 32\]",
        ),
        (dict(patch_size=None, patch=None), "needs a patch size"),
        (dict(patch_size=4, patch=8), r"already cuts 4x4 patches.*net.patch=null.*data.patch_size=null"),
        (
            dict(patch_size=4, dim=30, mixer=partial(DotAttention, heads=4)),
            r"dim=30 is not divisible by heads=4.*model.heads.*\[1, 2, 3, 5, 6, 10, 15, 30\]",
        ),
        (dict(patch_size=4, dim=30, mixer=partial(DotAttention, heads=7)), "not divisible by heads=7"),
        (dict(patch_size=4, pool="max"), r"net.pool='max'.*\['cls', 'mean'\]"),
    ],
)
def test_bad_settings_are_explained(kwargs, message):
    args = dict(mixer=VARIANTS["dot"], image_size=32, channels=3, num_classes=10, dim=32, depth=1) | kwargs
    with pytest.raises(AttnexpError, match=message):
        VisionTransformer(**args)


def test_mlp_mixer_of_the_vit_mixes_tokens_with_weights_shared_by_channels():
    torch.manual_seed(2)
    mixer = DenseMixer(dim=6, num_tokens=5, shared_over_channels=True)
    x = torch.randn(3, 5, 6)  # (B, L, C)
    out, weights = mixer(x)
    expected = torch.einsum("ml,blc->bmc", mixer.dense.weight, x) + mixer.dense.bias[:, None]
    torch.testing.assert_close(out, expected)
    assert weights is None and sum(p.numel() for p in mixer.parameters()) == 5 * 5 + 5
