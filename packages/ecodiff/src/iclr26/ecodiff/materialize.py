"""Physical pruning: slice the kept rows/columns out of the model's linear layers (spec §2.6).

The result is the same diffusers class with smaller layers (head counts and widths updated), so
it runs faster and saves fewer parameters. A module with every unit removed keeps a zero-width
layer (its output is the bias), or, for attention, a processor that returns the output bias.
:func:`save_pruned` / :func:`load_pruned` store and reload it with ``save_pretrained`` and the
kept-unit indices.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from iclr26.ecodiff.masking import check_keep
from iclr26.ecodiff.units import PrunableUnit

__all__ = ["ZeroHeadsProcessor", "load_pruned", "materialize", "save_pruned"]

PRUNING_FILE = "ecodiff_pruning.json"


class ZeroHeadsProcessor:
    """Attention processor for a module whose heads were all removed: the output projection
    sees zeros, so the attention returns its output bias (and the residual, if any)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, *args, **kwargs):
        to_out = getattr(attn, "to_out", None)
        x = hidden_states
        if to_out is None:  # FLUX single-stream: concatenated with the MLP branch
            return x.new_zeros(*x.shape[:-1], 0)
        flat = x if x.ndim == 3 else x.flatten(2).transpose(1, 2)
        out = to_out[0](flat.new_zeros(*flat.shape[:-1], 0))
        if x.ndim == 4:
            out = out.transpose(1, 2).reshape(x.shape)
        if getattr(attn, "residual_connection", False):
            out = out + x
        out = out / getattr(attn, "rescale_output_factor", 1.0)
        if (
            isinstance(getattr(attn, "to_add_out", None), nn.Linear)
            and encoder_hidden_states is not None
        ):
            e = encoder_hidden_states
            return out, attn.to_add_out(e.new_zeros(*e.shape[:-1], 0))
        return out


def _row_index(n: int, spans: list[tuple[int, int, torch.Tensor]]) -> torch.Tensor:
    keep = torch.ones(n, dtype=torch.bool)
    for off, width, k in spans:
        keep[off : off + k.numel() * width] = k.repeat_interleave(width)
    return keep.nonzero().flatten()


def _slice_linear(
    lin: nn.Linear, rows: torch.Tensor | None, cols: torch.Tensor | None
) -> nn.Linear:
    w = lin.weight.detach()
    b = lin.bias.detach() if lin.bias is not None else None
    if rows is not None:
        w = w[rows.to(w.device)]
        b = b[rows.to(w.device)] if b is not None else None
    if cols is not None:
        w = w[:, cols.to(w.device)]
    with warnings.catch_warnings():  # a fully pruned group gives a zero-width layer
        warnings.simplefilter("ignore", UserWarning)
        new = nn.Linear(w.shape[1], w.shape[0], bias=b is not None, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        new.weight.copy_(w)
        if b is not None:
            new.bias.copy_(b)
    new.requires_grad_(lin.weight.requires_grad)
    return new


def _set(model: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, child = path.rpartition(".")
    owner = model.get_submodule(parent) if parent else model
    if isinstance(owner, nn.ModuleList | nn.Sequential):
        owner[int(child)] = module
    else:
        setattr(owner, child, module)


def materialize(
    model: nn.Module,
    units: Sequence[PrunableUnit],
    keep: Mapping[str, torch.Tensor],
    *,
    inplace: bool = False,
) -> nn.Module:
    """Remove the units with ``keep == False`` from ``model``.

    Args:
        model: the dense model the units were found on.
        units: the unit groups (from :func:`find_prunable_units`).
        keep: ``{unit key: bool tensor (size,)}`` (from :func:`select`).
        inplace: modify ``model`` instead of a deep copy.

    Returns:
        The pruned model (same class). Its output equals the dense model gated with the same
        binary mask. FLUX norm/modulation channels (``"flux_norm"``) are zeroed rows of the
        modulation linear, not removed: the AdaLN layers keep their shapes.
    """
    units = list(units)
    if not units:
        raise ValueError("units must not be empty")
    keep = check_keep(units, keep)
    out = model if inplace else copy.deepcopy(model)
    rows: dict[str, list] = {}
    cols: dict[str, list] = {}
    for u in units:
        k = keep[u.key].cpu()
        if u.kind == "flux_norm":  # modulation channels: zero the rows, shapes stay
            lin = out.get_submodule(u.producers[0][0])
            drop = (~k).repeat_interleave(u.width).nonzero().flatten().to(lin.weight.device)
            with torch.no_grad():
                lin.weight[drop] = 0
                if lin.bias is not None:
                    lin.bias[drop] = 0
            continue
        for path, off in u.producers:
            rows.setdefault(path, []).append((off, u.width, k))
        for path, off in u.consumers:
            cols.setdefault(path, []).append((off, u.width, k))
    for path in sorted(set(rows) | set(cols)):
        lin = out.get_submodule(path)
        r = _row_index(lin.out_features, rows[path]) if path in rows else None
        c = _row_index(lin.in_features, cols[path]) if path in cols else None
        _set(out, path, _slice_linear(lin, r, c))
    for u in units:
        kept = int(keep[u.key].sum())
        if u.kind == "heads":
            attn = out.get_submodule(u.name)
            attn.heads = kept
            for attr in ("inner_dim", "inner_kv_dim"):
                if hasattr(attn, attr):
                    setattr(attn, attr, kept * u.width)
            if kept == 0:
                attn.set_processor(ZeroHeadsProcessor())
        elif u.kind == "flux_single_mlp":
            block = out.get_submodule(u.name.rpartition(".")[0])
            block.mlp_hidden_dim = kept
            if hasattr(block.proj_out, "_tp_packed_row_blocks"):
                del block.proj_out._tp_packed_row_blocks
    return out


def save_pruned(
    model: nn.Module,
    units: Sequence[PrunableUnit],
    keep: Mapping[str, torch.Tensor],
    path: str | os.PathLike[str],
) -> Path:
    """``save_pretrained`` the pruned diffusers ``model`` plus the kept-unit indices.

    ``model`` is the already materialised model; ``units``/``keep`` those it was built from.
    """
    if not hasattr(model, "save_pretrained"):
        raise TypeError(f"model must be a diffusers ModelMixin, got {type(model).__name__}")
    keep = check_keep(list(units), keep)
    path = Path(path)
    model.save_pretrained(path)
    record = {
        "format": "iclr26-ecodiff/1",
        "units": [
            {"name": u.name, "kind": u.kind, "size": u.size, "key": u.key,
             "kept": keep[u.key].nonzero().flatten().tolist()}
            for u in units
        ],
    }  # fmt: skip
    (path / PRUNING_FILE).write_text(json.dumps(record, indent=1))
    return path


def load_pruned(model_cls: type, path: str | os.PathLike[str], **kwargs) -> nn.Module:
    """Load a model written by :func:`save_pruned`: the dense architecture from its config,
    sliced to the stored kept units, then the saved (smaller) weights."""
    from iclr26.ecodiff.units import KINDS, find_prunable_units

    path = Path(path)
    meta_file = path / PRUNING_FILE
    if not meta_file.is_file():
        raise OSError(f"{path} has no {PRUNING_FILE}: not a pruned model folder")
    record = json.loads(meta_file.read_text())
    config = model_cls.load_config(path)
    dense = model_cls.from_config(config)
    by_key = {u.key: u for u in find_prunable_units(dense, kinds=KINDS)}
    units, keep = [], {}
    for entry in record["units"]:
        u = by_key.get(entry["key"])
        if u is None or u.size != entry["size"]:
            raise ValueError(f"{path}: unit {entry['name']} does not match the model config")
        k = torch.zeros(u.size, dtype=torch.bool)
        k[entry["kept"]] = True
        units.append(u)
        keep[u.key] = k
    model = materialize(dense, units, keep, inplace=True)
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise OSError(f"{path} has no .safetensors weights")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    model.load_state_dict(state, strict=True)
    dtype = kwargs.get("torch_dtype")
    return model.to(dtype) if dtype is not None else model.eval()
