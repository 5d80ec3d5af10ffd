"""Spec §12 tests 6 and 7: mask-aware upsampling and semantic blending."""

import torch
import torch.nn.functional as F

from iclr26.splat_distill import mask_aware_upsample, semantic_blend


def test_constant_mask_is_align_corners_bilinear():
    torch.manual_seed(0)
    f = torch.randn(5, 4, 6)
    up = mask_aware_upsample(f, torch.zeros(16, 23, dtype=torch.long))
    torch.testing.assert_close(
        up, F.interpolate(f[None], size=(16, 23), mode="bilinear", align_corners=True)[0]
    )


def test_two_regions_never_mix():
    H = W = 32
    mask = torch.zeros(H, W, dtype=torch.long)
    mask[:, 13:] = 1  # boundary not on the low-res grid
    f = torch.zeros(3, 8, 8)
    f[:, :, :3] = 1.0  # region 0 value a = 1 on the LR nodes whose HR position is in region 0
    f[:, :, 3:] = -2.0
    up = mask_aware_upsample(f, mask, fallback="bilinear")
    plain = F.interpolate(f[None], size=(H, W), mode="bilinear", align_corners=True)[0]
    assert (plain[:, mask == 1] > -2 + 1e-6).any()  # plain bilinear leaks a into region b
    torch.testing.assert_close(up[:, mask == 1], torch.full_like(up[:, mask == 1], -2.0))
    torch.testing.assert_close(up[:, mask == 0], torch.full_like(up[:, mask == 0], 1.0))


def test_fallback_when_no_neighbour_shares_the_label():
    mask = torch.zeros(17, 17, dtype=torch.long)
    mask[6:9, 6:9] = 7  # a small island between low-res nodes (nodes at 0, 4, 8.. → 8 is inside!)
    mask[8, 8] = 0  # make sure no LR node carries label 7
    f = torch.ones(2, 5, 5)
    z = mask_aware_upsample(f, mask, fallback="zero")
    b = mask_aware_upsample(f, mask, fallback="bilinear")
    isl = mask == 7
    assert isl.any()
    assert (z[:, isl] == 0).all()  # official behaviour: zero feature
    torch.testing.assert_close(b[:, isl], torch.ones_like(b[:, isl]))
    torch.testing.assert_close(z[:, ~isl], torch.ones_like(z[:, ~isl]))


def test_semantic_blend():
    torch.manual_seed(1)
    f = torch.randn(4, 10, 12)
    mask = torch.randint(0, 3, (10, 12))
    torch.testing.assert_close(semantic_blend(f, mask, 1.0), f)
    b0 = semantic_blend(f, mask, 0.0)
    for k in range(3):
        region = b0[:, mask == k]
        torch.testing.assert_close(region, f[:, mask == k].mean(1, keepdim=True).expand_as(region))
    # region means invariant to α
    for a in (0.25, 0.5, 0.9):
        bl = semantic_blend(f, mask, a)
        for k in range(3):
            torch.testing.assert_close(bl[:, mask == k].mean(1), f[:, mask == k].mean(1))
    half = semantic_blend(f, mask, 0.5)
    torch.testing.assert_close(half, 0.5 * f + 0.5 * b0)
