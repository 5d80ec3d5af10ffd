import numpy as np
import pytest
import torch

from iclr26.safa_snn.data import GLYPHS, glyph_fonts, load_glyphs_fscil


def test_glyph_alphabet_and_fonts():
    assert len(GLYPHS) == 60
    assert len(set(GLYPHS)) == 60
    assert "O" not in GLYPHS
    assert "l" not in GLYPHS
    fonts = glyph_fonts()
    names = {f.rsplit("/", 1)[-1].rsplit("\\", 1)[-1] for f in fonts}
    assert "DejaVuSans.ttf" in names
    assert not names & {"cmex10.ttf", "cmsy10.ttf", "LastResortHE-Regular.ttf"}
    assert len(fonts) >= 10


def test_glyph_dataset_split_by_font_and_seeded():
    n_fonts = len(glyph_fonts())
    d = load_glyphs_fscil(6, size=12, copies=1, test_fonts=0.3, seed=0)
    n_test = round(n_fonts * 0.3)
    assert d.x_train.shape == ((n_fonts - n_test) * 6, 1, 12, 12)
    assert d.x_test.shape == (n_test * 6, 1, 12, 12)
    assert d.classes == tuple(range(6))
    assert float(d.x_train.min()) >= 0.0
    assert float(d.x_train.max()) <= 1.0
    assert torch.equal(torch.bincount(d.y_test), torch.full((6,), n_test))
    again = load_glyphs_fscil(6, size=12, copies=1, test_fonts=0.3, seed=0)
    assert torch.equal(again.x_train, d.x_train)
    other = load_glyphs_fscil(6, size=12, copies=1, test_fonts=0.3, seed=1)
    assert not torch.equal(other.x_test, d.x_test)
    # without augmentation and noise a test font's glyph appears in no training font
    clean = load_glyphs_fscil(6, size=12, copies=1, augment=False, noise=0.0, flatten=True)
    assert clean.x_train.shape[1] == 144
    dist = torch.cdist(clean.x_test, clean.x_train).min(dim=1).values
    assert float(dist.min()) > 0.0
    # nearest-neighbour across fonts is well above chance (1/6): the classes are learnable
    nn_label = clean.y_train[torch.cdist(clean.x_test, clean.x_train).argmin(dim=1)]
    assert float((nn_label == clean.y_test).float().mean()) > 0.5


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"classes": 61}, "classes"),
        ({"classes": 2.0}, "classes"),
        ({"size": 4}, "size"),
        ({"copies": 0}, "copies"),
        ({"test_fonts": 1.0}, "test_fonts"),
        ({"noise": np.nan}, "noise"),
    ],
)
def test_glyph_bad_inputs(kw, match):
    with pytest.raises(ValueError, match=match):
        load_glyphs_fscil(**kw)
