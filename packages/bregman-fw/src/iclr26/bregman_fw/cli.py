"""``iclr26-bregman-fw reproduce|bench|bench-dopt [--quick] [--out DIR] [--seed N]``.

The experiments are named as ``"module:function"`` strings: JAX loads only when a command runs,
so ``--help``, ``--version`` and argument errors stay fast.
"""

from pathlib import Path

from iclr26.shared import int_arg, make_cli, prepare_output_dir


def _bench_dopt_setup(parser):
    parser.add_argument("--quick", action="store_true", help="small run (10 x 100 design)")
    parser.add_argument(
        "--out", type=Path, default=Path("reports/bregman-fw/bench-dopt"), help="output folder"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args) -> int:
        out = prepare_output_dir(args.out)
        from iclr26.bregman_fw.experiments import bench_dopt

        report = bench_dopt(quick=args.quick, seed=args.seed, progress=not args.no_progress)
        report.finish()
        print(report.to_markdown(), flush=True)
        path = report.write(out)
        print(f"wrote {path} and report.json with figures")
        return 0

    return run


main = make_cli(
    "bregman-fw",
    reproduce="iclr26.bregman_fw.experiments:reproduce",
    bench="iclr26.bregman_fw.experiments:bench",
    description="Frank–Wolfe with adaptive Bregman step sizes (ICLR 2026): reproduce the paper's "
    "claims at small scale, or benchmark against copt, accbpg and cvxpy.",
    commands={
        "bench-dopt": (
            "only the bench's D-optimal part (B2) against accbpg, with more timing rounds",
            _bench_dopt_setup,
        )
    },
)

if __name__ == "__main__":
    raise SystemExit(main())
