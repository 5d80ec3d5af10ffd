"""``iclr26-bregman-fw reproduce|bench [--quick] [--out DIR] [--seed N]``."""

from iclr26.bregman_fw.experiments import bench, reproduce
from iclr26.shared import make_cli

main = make_cli(
    "bregman-fw",
    reproduce=reproduce,
    bench=bench,
    description="Frank–Wolfe with adaptive Bregman step sizes (ICLR 2026): reproduce the paper's "
    "claims at small scale, or benchmark against copt, accbpg and cvxpy.",
)

if __name__ == "__main__":
    raise SystemExit(main())
