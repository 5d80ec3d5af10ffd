"""``iclr26-safa-snn``: run an FSCIL protocol, reproduce, bench."""

from __future__ import annotations

import argparse
import logging
import os

from iclr26.shared import existing_file, int_arg, make_cli, prepare_output_file

__all__ = ["main"]

_BASE = "base_model.json"
METHODS = ("safa", "safa-released", "prototype", "teen", "fine-tune")


def _fscil_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--data", type=existing_file,
        help=".npz with x_train, y_train, x_test, y_test (flat feature vectors); default: "
        "scikit-learn digits",
    )  # fmt: skip
    parser.add_argument(
        "--task", choices=("digits", "glyphs", "events"), default="digits",
        help="bundled data when --data is not given: scikit-learn digits, 60 characters "
        "rendered with matplotlib's fonts (28x28, test fonts unseen in training), or "
        "synthetic DVS-like event streams (11 classes, 8 frames, 2x32x32)",
    )  # fmt: skip
    parser.add_argument(
        "--backbone", choices=("auto", "mlp", "conv", "vgg9", "resnet20"), default="auto",
        help="spiking backbone: auto = mlp for digits, glyphs and --data, conv for events; "
        "vgg9 (official layout) and resnet20 need --task glyphs (rendered at 32x32) or events",
    )  # fmt: skip
    parser.add_argument("--method", choices=METHODS, default="safa", help="FSCIL method")
    parser.add_argument("--base-classes", type=int_arg(1), default=5, help="classes in session 0")
    parser.add_argument("--way", type=int_arg(1), default=1, help="new classes per session")
    parser.add_argument("--shot", type=int_arg(1), default=5, help="samples per new class")
    parser.add_argument("--sessions", type=int_arg(0), default=5, help="incremental sessions")
    parser.add_argument("--T", type=int_arg(1), default=4, help="time steps (direct encoding)")
    parser.add_argument("--epochs", type=int_arg(1), default=40, help="base-session epochs")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--out", help="write the per-session metrics as JSON here")
    parser.add_argument(
        "--checkpoint-dir",
        help="save the base model and the state after every session here (safetensors + JSON)",
    )
    parser.add_argument(
        "--resume", action="store_true",
        help="continue the run in --checkpoint-dir after its last finished session",
    )  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        if args.resume and not args.checkpoint_dir:
            raise ValueError("--resume needs --checkpoint-dir")
        out = prepare_output_file(args.out, "--out") if args.out else None
        import numpy as np
        import torch

        from iclr26.safa_snn.checkpoint import (
            config_mismatch,
            fingerprint_tensors,
            load_state,
            save_state,
        )
        from iclr26.safa_snn.data import load_digits_fscil, load_events_fscil, load_glyphs_fscil
        from iclr26.safa_snn.fscil import FSCILData, FSCILProtocol, make_sessions, run_fscil
        from iclr26.safa_snn.methods import SAFA, TEENSNN, FineTuneSNN, PrototypeSNN, train_base
        from iclr26.safa_snn.models import (
            SpikingConvNet,
            SpikingMLP,
            SpikingResNet20,
            SpikingVGG9,
        )
        from iclr26.safa_snn.neurons import set_phase
        from iclr26.shared import write_json

        backbone = args.backbone
        if backbone == "auto":
            backbone = "conv" if args.data is None and args.task == "events" else "mlp"
        if backbone != "mlp" and (args.data is not None or args.task == "digits"):
            raise ValueError(f"--backbone {backbone} needs image data: --task glyphs or events")
        torch.set_num_threads(1)
        if args.data is None and args.task == "glyphs":
            size = 32 if backbone in ("vgg9", "resnet20") else 28
            data = load_glyphs_fscil(size=size, flatten=backbone == "mlp", seed=args.seed)
        elif args.data is None and args.task == "events":
            data = load_events_fscil(T=args.T, seed=args.seed)
            if backbone == "mlp":
                data.x_train, data.x_test = data.x_train.flatten(2), data.x_test.flatten(2)
        elif args.data is None:
            data = load_digits_fscil(seed=args.seed)
        else:
            try:
                z = np.load(args.data, allow_pickle=False)
            except (ValueError, OSError) as err:
                raise ValueError(
                    f"--data {args.data} is not a readable .npz file ({err})"
                ) from None
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError(f"--data {args.data} is a single array, expected an .npz archive")
            with z:
                missing = {"x_train", "y_train", "x_test", "y_test"} - set(z.files)
                if missing:
                    raise ValueError(f"--data {args.data} lacks arrays {sorted(missing)}")
                arrays = {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}
            for k in ("y_train", "y_test"):
                if not np.issubdtype(arrays[k].dtype, np.integer):
                    raise ValueError(f"--data: {k} must hold integer labels")
            classes = tuple(
                int(c) for c in np.unique(np.concatenate([arrays["y_train"], arrays["y_test"]]))
            )
            data = FSCILData(
                torch.as_tensor(arrays["x_train"], dtype=torch.float32).flatten(1),
                torch.as_tensor(arrays["y_train"]).long(),
                torch.as_tensor(arrays["x_test"], dtype=torch.float32).flatten(1),
                torch.as_tensor(arrays["y_test"]).long(),
                classes,
            )
        protocol = FSCILProtocol(
            args.base_classes, args.way, args.shot, args.sessions, seed=args.seed
        )
        s0 = make_sessions(data, protocol)[0]  # validates the protocol before training
        torch.manual_seed(args.seed)
        common = {"T": args.T, "num_classes": args.base_classes, "mask_seed": args.seed}
        if backbone == "mlp":
            model = SpikingMLP(data.x_train.shape[-1], hidden=(128,), feat_dim=64, **common)
        else:
            c, size = data.x_train.shape[-3], data.x_train.shape[-1]
            model = {
                "conv": lambda: SpikingConvNet(c, img_size=size, widths=(16, 32), **common),
                "vgg9": lambda: SpikingVGG9(c, img_size=size, **common),
                "resnet20": lambda: SpikingResNet20(c, img_size=size, **common),
            }[backbone]()
        ckpt = args.checkpoint_dir
        if ckpt is not None:
            from iclr26.safa_snn.checkpoint import latest_session

            if os.path.exists(ckpt) and not os.path.isdir(ckpt):
                raise ValueError(f"--checkpoint-dir {ckpt} exists and is not a folder")
            if not args.resume and (
                latest_session(ckpt) is not None or os.path.exists(os.path.join(ckpt, _BASE))
            ):
                raise ValueError(
                    f"--checkpoint-dir {ckpt} already holds a run: pass --resume or use an "
                    "empty folder"
                )
        base_cfg = {
            "data": fingerprint_tensors([data.x_train, data.y_train, data.x_test, data.y_test]),
            "protocol": [args.base_classes, args.way, args.shot, args.sessions],
            "T": args.T, "epochs": args.epochs, "seed": args.seed,
            "arch": backbone, "task": args.task,
        }  # fmt: skip
        if ckpt is not None and args.resume and os.path.exists(os.path.join(ckpt, _BASE)):
            tensors, meta = load_state(ckpt, "base_model")
            diff = config_mismatch(meta.get("config", {}), base_cfg)
            if diff:
                raise ValueError(
                    f"--checkpoint-dir {ckpt} holds a run of another configuration (differs "
                    f"in: {', '.join(diff)})"
                )
            model.load_state_dict(tensors)
            model.eval()
            set_phase(model, "frozen")
            logging.getLogger(__name__).info("loaded the base model from %s", ckpt)
        else:
            train_base(
                model, data.x_train[s0.train_idx], data.y_train[s0.train_idx], s0.new_classes,
                epochs=args.epochs, seed=args.seed, progress=True,
            )  # fmt: skip
            if ckpt is not None:
                save_state(ckpt, "base_model", model.state_dict(), {"config": base_cfg})
        method = {
            "safa": lambda: SAFA(),
            "safa-released": lambda: SAFA(regulate=False, name="SAFA (released code)"),
            "prototype": PrototypeSNN,
            "teen": TEENSNN,
            "fine-tune": lambda: FineTuneSNN(seed=args.seed),
        }[args.method]()
        res = run_fscil(
            method, data, protocol, model, seed=args.seed, checkpoint_dir=ckpt,
            resume=args.resume,
        )  # fmt: skip
        payload = {
            "method": res.method, "acc": res.acc, "base_acc": res.base_acc,
            "novel_acc": res.novel_acc, "hmean": res.hmean, "pd": res.pd,
            "inference_energy_J": res.inference_energy, "session_energy_J": res.session_energy,
        }  # fmt: skip
        for s, a in enumerate(res.acc):
            print(f"session {s}: acc {a:.3f}")
        print(f"PD {res.pd:.3f}")
        if out is not None:
            write_json(out, payload)
            logging.getLogger(__name__).info("wrote %s", out)
        return 0

    return run


main = make_cli(
    "safa-snn",
    reproduce="iclr26.safa_snn.experiments:reproduce",
    bench="iclr26.safa_snn.experiments:bench",
    description="SAFA-SNN (ICLR 2026): spiking few-shot class-incremental learning.",
    commands={"fscil": ("run an FSCIL protocol (a bundled task or an .npz)", _fscil_setup)},
)
