"""``iclr26-safa-snn``: run an FSCIL protocol, reproduce, bench."""

from __future__ import annotations

import argparse
import logging

from iclr26.shared import existing_file, int_arg, make_cli, prepare_output_file

__all__ = ["main"]

METHODS = ("safa", "safa-released", "prototype", "teen", "fine-tune")


def _fscil_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--data", type=existing_file,
        help=".npz with x_train, y_train, x_test, y_test (flat feature vectors); default: "
        "scikit-learn digits",
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

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out") if args.out else None
        import numpy as np
        import torch

        from iclr26.safa_snn.data import load_digits_fscil
        from iclr26.safa_snn.fscil import FSCILData, FSCILProtocol, make_sessions, run_fscil
        from iclr26.safa_snn.methods import SAFA, TEENSNN, FineTuneSNN, PrototypeSNN, train_base
        from iclr26.safa_snn.models import SpikingMLP
        from iclr26.shared import write_json

        torch.set_num_threads(1)
        if args.data is None:
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
        model = SpikingMLP(
            data.x_train.shape[1], hidden=(128,), feat_dim=64, T=args.T,
            num_classes=args.base_classes, mask_seed=args.seed,
        )  # fmt: skip
        train_base(
            model, data.x_train[s0.train_idx], data.y_train[s0.train_idx], s0.new_classes,
            epochs=args.epochs, seed=args.seed, progress=True,
        )  # fmt: skip
        method = {
            "safa": lambda: SAFA(),
            "safa-released": lambda: SAFA(regulate=False, name="SAFA (released code)"),
            "prototype": PrototypeSNN,
            "teen": TEENSNN,
            "fine-tune": lambda: FineTuneSNN(seed=args.seed),
        }[args.method]()
        res = run_fscil(method, data, protocol, model, seed=args.seed)
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
    commands={"fscil": ("run an FSCIL protocol (digits or an .npz)", _fscil_setup)},
)
