"""A tiny version of the headline claim: a few SnD steps make the shipped 2D VFM's features more
multi-view consistent on held-out scenes (mean cosine at ground-truth correspondences)."""

from iclr26.splat_distill import SnDConfig, load_pretrained_vfm, make_dataset
from iclr26.splat_distill.experiments import _tokens, eval_pairs, train_snd


def _consistency(model, data, pairs):
    import numpy as np

    from iclr26.splat_distill import correspondence_recall

    f = _tokens(model, data.rgb.flatten(0, 1))
    V = data.n_views
    vals = [
        correspondence_recall(
            f[p["s"] * V + p["v0"]], f[p["s"] * V + p["v1"]], p["uv0"], p["uv1"], (32, 32)
        )["consistency"]
        for p in pairs
    ]
    return float(np.mean(vals))


def test_snd_increases_multiview_consistency():
    vfm = load_pretrained_vfm()
    train = make_dataset(6, n_views=4, size=32, seed=101)
    test = make_dataset(2, n_views=4, size=32, seed=202)
    pairs = eval_pairs(test, 60, 0)
    cfg = SnDConfig(render_size=16, lift_stride=2, ema_momentum=0.99, n_prototypes=256)
    snd, _ = train_snd(vfm, train, cfg, steps=20, batch=2, seed=0)
    before, after = _consistency(vfm, test, pairs), _consistency(snd.student, test, pairs)
    assert after > before + 0.01, (before, after)
