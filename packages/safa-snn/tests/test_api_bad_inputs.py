"""One bad input per entry of the README API table: a clear error naming the argument."""

import pytest
import torch

import iclr26.safa_snn as s

NAN = torch.full((3, 4), float("nan"))
OK = torch.rand(3, 4)

CASES = {
    "LIF spike": (lambda: s.LIF(3, spike="sigmoid"), ValueError, "spike"),
    "LIF n_samples": (lambda: s.LIF(3, n_samples=0), ValueError, "n_samples"),
    "SparsityAwareLIF beta": (lambda: s.SparsityAwareLIF(3, beta=float("nan")), ValueError, "beta"),
    "set_phase model": (lambda: s.set_phase("model", "base"), TypeError, "model"),
    "set_phase phase": (lambda: s.set_phase(torch.nn.Linear(1, 1), "sleep"), ValueError, "phase"),
    "spike_fn u": (lambda: s.spike_fn(torch.ones(2, dtype=torch.long)), TypeError, "u must"),
    "spike_fn method": (lambda: s.spike_fn(OK, "sigmoid"), ValueError, "spike"),
    "zo_gradient f": (lambda: s.zo_gradient(3, OK), TypeError, "f must"),
    "zo_gradient n_samples": (
        lambda: s.zo_gradient(torch.sum, OK, 0.5, 0),
        ValueError,
        "n_samples",
    ),
    "SpikingMLP T": (lambda: s.SpikingMLP(4, T=0), ValueError, "T must"),
    "SpikingMLP neuron": (
        lambda: s.SpikingMLP(4, T=1, neuron="relu", spike="zo"),
        TypeError,
        "takes no neuron arguments",
    ),
    "ReLUNeuron num_channels": (lambda: s.ReLUNeuron(0), ValueError, "num_channels"),
    "SpikingMLP x": (lambda: s.SpikingMLP(4)(NAN), ValueError, "NaN"),
    "SpikingConvNet x": (
        lambda: s.SpikingConvNet(1, img_size=8)(torch.rand(2, 3, 8, 8)),
        ValueError,
        "x must end",
    ),
    "SpikingVGG9 width": (lambda: s.SpikingVGG9(width=0), ValueError, "width"),
    "SpikingVGG9 x": (lambda: s.SpikingVGG9(img_size=8, width=0.1)(NAN), ValueError, "x must"),
    "SpikingResNet20 blocks": (lambda: s.SpikingResNet20(blocks=0), ValueError, "blocks"),
    "SpikingResNet20 img_size": (lambda: s.SpikingResNet20(img_size=30), ValueError, "img_size"),
    "LIF loop": (lambda: s.LIF(3, loop="jit"), ValueError, "loop"),
    "load_events_fscil T": (lambda: s.load_events_fscil(T=0), ValueError, "T must"),
    "direct_encode T": (lambda: s.direct_encode(OK, -1), ValueError, "T must"),
    "class_means labels": (lambda: s.class_means(OK, torch.rand(3), [0]), TypeError, "labels"),
    "subspace_project base": (lambda: s.subspace_project(OK, NAN, 0.1), ValueError, "base"),
    "teen_calibrate weight": (lambda: s.teen_calibrate(OK, OK, weight=2.0), ValueError, "weight"),
    "CosineClassifier feat_dim": (lambda: s.CosineClassifier(0), ValueError, "feat_dim"),
    "tet_loss y": (lambda: s.tet_loss(torch.rand(2, 3, 4), torch.rand(2)), TypeError, "y must"),
    "FSCILProtocol shot": (lambda: s.FSCILProtocol(2, 1, 0, 1), ValueError, "shot"),
    "FSCILData y": (
        lambda: s.FSCILData(OK, torch.tensor([0, 1, 7]), OK, torch.tensor([0, 1, 1]), (0, 1)),
        ValueError,
        "outside the declared",
    ),
    "make_sessions data": (
        lambda: s.make_sessions("data", s.FSCILProtocol(1, 1, 1, 1)),
        TypeError,
        "data",
    ),
    "run_fscil base_model": (
        lambda: s.run_fscil(s.SAFA(), None, s.FSCILProtocol(1, 1, 1, 1), torch.nn.Linear(1, 1)),
        TypeError,
        "base_model",
    ),
    "train_base epochs": (
        lambda: s.train_base(
            s.SpikingMLP(4, num_classes=2), OK, torch.tensor([0, 1, 0]), (0, 1), epochs=0
        ),
        ValueError,
        "epochs",
    ),
    "SAFA alpha": (lambda: s.SAFA(alpha=1.5), ValueError, "alpha"),
    "FineTuneSNN epochs": (lambda: s.FineTuneSNN(epochs=0), ValueError, "epochs"),
    "count_sops x": (lambda: s.count_sops(torch.nn.Linear(4, 2), NAN), ValueError, "NaN"),
    "energy_joules report": (lambda: s.energy_joules({}), TypeError, "report"),
    "training_energy backward_factor": (
        lambda: s.training_energy(s.EnergyReport(), backward_factor=-1),
        ValueError,
        "backward_factor",
    ),
    "ann_twin_energy report": (lambda: s.ann_twin_energy(None), TypeError, "report"),
    "load_glyphs_fscil classes": (lambda: s.load_glyphs_fscil(0), ValueError, "classes"),
    "glyph_fonts chars": (lambda: s.glyph_fonts("AB"), TypeError, "chars"),
    "run_fscil resume": (
        lambda: s.run_fscil(
            s.SAFA(), None, s.FSCILProtocol(1, 1, 1, 1), s.SpikingMLP(4), resume=True
        ),
        ValueError,
        "needs a checkpoint_dir",
    ),
    "load_digits_fscil test_fraction": (
        lambda: s.load_digits_fscil(1.0),
        ValueError,
        "test_fraction",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_api_rejects_bad_input(name):
    call, exc, match = CASES[name]
    with pytest.raises(exc, match=match):
        call()
