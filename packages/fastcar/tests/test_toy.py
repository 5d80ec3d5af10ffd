"""The toy: temporally coherent token videos and the seeded training command."""

import numpy as np
import torch

from iclr26.fastcar import PatchTokenizer, ToyPreset, load_toy, moving_digits, save_toy, train_toy


def test_default_canvas_gives_temporally_coherent_tokens():
    """Most slots keep their token from one frame to the next (the regime FastCar targets):
    the 8x8 digit covers at most 9 of the 36 patches of a 24x24 frame."""
    p = ToyPreset()
    v = moving_digits(40, 8, p.canvas, seed=1)
    tok = PatchTokenizer(p.patch, p.codebook_size).fit(v["frames"][:20], seed=0)
    codes = tok.encode(v["frames"])
    assert codes.shape == (40, 8, 36)
    repeat = (codes[:, 1:] == codes[:, :-1]).mean()
    assert 0.75 < repeat < 1.0
    moving = v["velocity"] != 4  # index 4 is (0, 0): a static digit
    assert (codes[~moving, 1:] == codes[~moving, :-1]).all()


def test_train_toy_is_seeded_and_round_trips(tmp_path):
    pre = ToyPreset(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                    intermediate_size=64, canvas=16, num_frames=3)  # fmt: skip
    a = train_toy(pre, num_videos=24, epochs=2, batch_size=8, seed=3)
    b = train_toy(pre, num_videos=24, epochs=2, batch_size=8, seed=3)
    assert a.train_log["epoch_loss"] == b.train_log["epoch_loss"]
    assert a.train_log["epoch_loss"][1] < a.train_log["epoch_loss"][0]
    save_toy(a, tmp_path / "toy")
    c = load_toy(tmp_path / "toy")
    assert c.preset == pre
    assert c.train_log == a.train_log
    np.testing.assert_array_equal(c.tokenizer.codebook_, a.tokenizer.codebook_)
    for (name, w), w2 in zip(a.model.state_dict().items(), c.model.state_dict().values(),
                             strict=True):  # fmt: skip
        assert torch.equal(w.half().float(), w2), name


def test_shipped_toy_was_trained_on_coherent_videos():
    toy = load_toy()
    log = toy.train_log
    assert log is not None
    assert log["same_slot_repeat"] > 0.75
    assert log["epoch_loss"][-1] < log["epoch_loss"][0]
    assert toy.preset == ToyPreset()
