"""Figures: a proposition tree as a PNG (node colour = p_true, edge label = β)."""

from __future__ import annotations

from typing import Any

from iclr26.analytica.tree import PropositionTree

__all__ = ["plot_tree"]


def plot_tree(
    tree: PropositionTree, *, title: str = "", max_chars: int = 38, ax: Any = None
) -> Any:
    """Draw ``tree`` top-down with matplotlib; returns the figure.

    Leaves are spread evenly on the bottom row; a parent sits above the mean of its children.
    Nodes are coloured by ``p_true`` (red 0 → green 1, grey if unproven); edges carry the
    parent's linear weight of the child when a linear rule is stored.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    leaves = tree.leaves()
    x: dict[str, float] = {pid: float(i) for i, pid in enumerate(leaves)}
    for pid in tree.internal():  # deepest first, so children are placed before parents
        kids = tree.get(pid).children
        x[pid] = sum(x[c] for c in kids) / len(kids)
    depth = tree.depth
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.9 * len(leaves)), 1.7 * (depth + 1) + 0.6))
    else:
        fig = ax.figure
    cmap = colormaps["RdYlGn"]
    for node in tree:
        y0 = depth - tree.depth_of(node.pid)
        rule = node.synthesis or {}
        for c in node.children:
            y1 = depth - tree.depth_of(c)
            ax.plot([x[node.pid], x[c]], [y0, y1], color="0.6", lw=1, zorder=1)
            w = (rule.get("weights") or {}).get(c)
            if w is not None:
                ax.text(
                    (x[node.pid] + x[c]) / 2,
                    (y0 + y1) / 2,
                    f"β={w:+.2f}",
                    fontsize=7,
                    ha="center",
                    color="0.3",
                    zorder=3,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none"},
                )
    for node in tree:
        y = depth - tree.depth_of(node.pid)
        p = node.p_true
        colour = "0.85" if p is None else cmap(p)
        text = (
            node.sentence
            if len(node.sentence) <= max_chars
            else node.sentence[: max_chars - 1] + "…"
        )
        label = f"{node.pid}  p={'—' if p is None else f'{p:.2f}'}\n" + "\n".join(_wrap(text, 20))
        ax.text(
            x[node.pid],
            y,
            label,
            ha="center",
            va="center",
            fontsize=7,
            zorder=4,
            bbox={"boxstyle": "round,pad=0.3", "fc": colour, "ec": "0.3"},
        )
    ax.set_xlim(-0.8, max(x.values()) + 0.8)
    ax.set_ylim(-0.6, depth + 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return lines[:3]
