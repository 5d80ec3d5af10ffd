"""iclr26-fastcar: FastCar — Cache Attentive Replay for Fast Auto-Regressive Video Generation
(ICLR 2026).

Replays a decoder layer's MLP output from the same spatial position of the previous frame when
the temporal attention score (TAS) is high; only non-replayed rows run the MLP. Works on Hugging
Face LLaMA-like causal LMs through module hooks (with ``generate`` and its KV cache) and on a
native PyTorch decoder with the same weights layout.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-fastcar")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "layout": ["FrameLayout"],
        "score": ["temporal_attention_score", "reference_scale"],
        "replay": ["ReplayConfig", "ReplayMLP", "ReplayState", "ReplayStats"],
        "hf": [
            "FastCarHandle", "enable_fastcar", "find_decoder_layers", "generate_video",
            "preallocated_cache",
        ],
        "models": [
            "DecodeResult", "PackedMLP", "TinyARVideoLM", "pack_mlps", "position_noise",
            "sink_window_mask",
        ],
        "calibrate": ["calibrate", "calibrate_thresholds", "decode", "record"],
        "cost": ["amdahl_bound", "decode_macs"],
        "metrics": ["drift_slope", "frame_psnr", "spearman_per_layer", "token_agreement"],
        "data": [
            "DigitClassifier", "PatchTokenizer", "VideoTokens", "moving_digits",
            "real_clip_frames", "trajectory",
        ],
        "toy": ["ToyModel", "ToyPreset", "build_model", "load_toy", "save_toy", "train_toy"],
        "experiments": [
            "BENCH_PRESET", "bench", "decode_sweep", "mlp_row_cost", "mlp_time_in_decode",
            "reproduce", "row_padding_from_costs", "time_split", "tune_row_padding",
        ],
    },
)  # fmt: skip
__all__ += ["__version__"]
