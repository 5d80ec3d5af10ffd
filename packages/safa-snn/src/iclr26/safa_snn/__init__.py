"""iclr26-safa-snn: SAFA-SNN — sparsity-aware on-device few-shot class-incremental learning with
spiking neural networks (ICLR 2026).

Multi-step LIF neurons with the LocalZO spike gradient, sparsity-aware threshold regulation with
explicit phases, prototype classifiers with subspace projection, an FSCIL protocol engine and a
spike-count energy counter, in PyTorch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-safa-snn")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "neurons": [
            "LIF", "LocalZOSpike", "SparsityAwareLIF", "lif_reference", "set_phase", "spike_fn",
            "surrogate_grad",
        ],
        "zo": ["zo_gradient"],
        "models": [
            "ConvBNLIF", "ReLUNeuron", "SpikingBasicBlock", "SpikingConvNet", "SpikingMLP", "SpikingResNet20",
            "SpikingVGG9", "direct_encode",
        ],
        "prototypes": ["CosineClassifier", "class_means", "subspace_project", "teen_calibrate"],
        "losses": ["tet_loss"],
        "fscil": [
            "FSCILData", "FSCILProtocol", "FSCILResult", "SessionSplit", "make_sessions",
            "run_fscil",
        ],
        "methods": ["SAFA", "FineTuneSNN", "PrototypeSNN", "TEENSNN", "train_base"],
        "energy": [
            "EnergyReport", "ann_twin_energy", "count_sops", "energy_joules", "training_energy",
        ],
        "data": [
            "EVENT_CLASSES", "GLYPHS", "glyph_fonts", "load_digits_fscil", "load_events_fscil",
            "load_glyphs_fscil",
        ],
    },
)  # fmt: skip
__all__ += ["__version__"]
