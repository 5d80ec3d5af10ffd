"""``iclr26-bregman-fw reproduce|bench [--quick] [--out DIR] [--seed N]``.

The experiments are named as ``"module:function"`` strings: JAX loads only when a command runs,
so ``--help``, ``--version`` and argument errors stay fast.
"""

from iclr26.shared import make_cli

main = make_cli(
    "bregman-fw",
    reproduce="iclr26.bregman_fw.experiments:reproduce",
    bench="iclr26.bregman_fw.experiments:bench",
    description="Frank–Wolfe with adaptive Bregman step sizes (ICLR 2026): reproduce the paper's "
    "claims at small scale, or benchmark against copt, accbpg and cvxpy.",
)

if __name__ == "__main__":
    raise SystemExit(main())
