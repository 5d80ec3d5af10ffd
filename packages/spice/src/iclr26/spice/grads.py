"""Per-sample gradients of any torch model, restricted to the trainable (e.g. LoRA) parameters,
with seeded random projectors; and the loader for Hugging Face causal LMs with LoRA.

``per_sample_grads`` forms the per-sample gradients of linear (and LoRA, and LayerNorm) layers
from ONE batched backward with hooks (a linear layer's per-sample gradient is the outer product
of its output gradient and input), and projects them through a Kronecker-factored projector
without materialising them. ``torch.func`` ``vmap(grad(...))`` is the general fallback (also
traced once and compiled by inductor, which fuses the per-example outer products into the
result), and a plain loop of single-example backward passes (what the official code does) the
reference; all give the same matrix.
"""

from __future__ import annotations

import itertools
import logging
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.func import functional_call, grad, vmap
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from iclr26.shared import check_choice, check_int

logger = logging.getLogger(__name__)

__all__ = [
    "HOOKED_LAYERS",
    "KroneckerProjector",
    "LoraSettings",
    "RandomProjector",
    "clear_compiled",
    "format_example",
    "lm_per_sample_grads",
    "load_causal_lm",
    "per_sample_grads",
    "select_params",
]


def select_params(
    model: torch.nn.Module, params: str | Iterable[str] | Callable[[str], bool] = "trainable"
) -> dict[str, torch.Tensor]:
    """The parameters to differentiate: ``"trainable"`` (``requires_grad``, i.e. LoRA weights in a
    PEFT model), ``"all"``, a collection of names, or a predicate on names."""
    return _choose(dict(model.named_parameters()), params)


def _choose(
    named: dict[str, torch.Tensor], params: str | Iterable[str] | Callable[[str], bool]
) -> dict[str, torch.Tensor]:
    if params == "trainable":
        chosen = {n: p for n, p in named.items() if p.requires_grad}
    elif params == "all":
        chosen = named
    elif callable(params):
        chosen = {n: p for n, p in named.items() if params(n)}
    else:
        wanted = list(params)  # type: ignore[arg-type]
        missing = [n for n in wanted if n not in named]
        if missing:
            raise ValueError(
                f"unknown parameter names {missing[:5]}; the model has e.g. {list(named)[:5]}"
            )
        chosen = {n: named[n] for n in wanted}
    if not chosen:
        raise ValueError(
            "no parameters selected: the model has no trainable parameters (params='trainable')?"
        )
    return chosen


class RandomProjector:
    """Seeded Johnson–Lindenstrauss projection ``R^{d_in} → R^{d_out}``.

    Entries are i.i.d. ``N(0, 1/d_out)`` (``kind="gaussian"``) or ``±1/√d_out``
    (``"rademacher"``), so squared norms and dot products are preserved in expectation. The matrix
    is generated block by block from the seed and never stored whole, so ``d_in`` can be in the
    millions; the same seed gives the same projection on any device.

    Args:
        d_in: input dimension.
        d_out: output dimension (the official code uses 8192).
        seed: seed of the projection.
        kind: ``"gaussian"`` or ``"rademacher"``.
        block_rows: input rows generated at once (memory ``block_rows · d_out`` floats).
        cache_limit: keep the whole matrix after the first call when it has at most this many
            entries (default 2**25, 256 MB in float64); larger ones are regenerated per call.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        *,
        seed: int = 0,
        kind: str = "gaussian",
        block_rows: int | None = None,
        cache_limit: int = 2**25,
    ) -> None:
        self.d_in = check_int(d_in, "d_in", low=1)
        self.d_out = check_int(d_out, "d_out", low=1)
        self.seed = check_int(seed, "seed", low=0)
        self.kind = check_choice(kind, "kind", ("gaussian", "rademacher"))
        self.block_rows = block_rows or max(1, 2**23 // d_out)
        self._cached: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        self._cache = d_in * d_out <= cache_limit

    def _block(self, b: int, rows: int, dtype: torch.dtype) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + b)
        if self.kind == "gaussian":
            block = torch.randn(rows, self.d_out, generator=gen, dtype=torch.float64)
        else:
            block = torch.randint(0, 2, (rows, self.d_out), generator=gen).to(torch.float64) * 2 - 1
        return (block / math.sqrt(self.d_out)).to(dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Project ``(n, d_in)`` to ``(n, d_out)`` on ``x``'s device and dtype."""
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"expected shape (n, {self.d_in}), got {tuple(x.shape)}")
        if self._cache:
            key = (x.dtype, x.device)
            if key not in self._cached:
                blocks = [
                    self._block(b, min(self.block_rows, self.d_in - s), x.dtype)
                    for b, s in enumerate(range(0, self.d_in, self.block_rows))
                ]
                self._cached[key] = torch.cat(blocks).to(x.device)
            return x @ self._cached[key]
        out = torch.zeros(x.shape[0], self.d_out, dtype=x.dtype, device=x.device)
        for b, start in enumerate(range(0, self.d_in, self.block_rows)):
            stop = min(start + self.block_rows, self.d_in)
            out += x[:, start:stop] @ self._block(b, stop - start, x.dtype).to(x.device)
        return out


def _flat_batch(batch: Any) -> tuple[int, list[Any], Any]:
    """The number of examples in ``batch`` and its flattened leaves and tree spec; refuses an
    empty, ragged or non-finite batch."""
    leaves, spec = tree_flatten(batch)
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    if not tensors:
        raise TypeError(
            f"batch must be a tensor or a tuple/dict of tensors, got {type(batch).__name__}"
        )
    sizes = {t.shape[0] if t.ndim else 0 for t in tensors}
    if len(sizes) != 1:
        raise ValueError(
            f"every tensor in batch must share the first dimension, got sizes {sorted(sizes)}"
        )
    n = sizes.pop()
    if n == 0:
        raise ValueError("batch is empty (0 examples)")
    for t in tensors:
        # a sum is finite when every entry is (an overflowing sum of finite values falls back
        # to the exact test): one reduction instead of an elementwise mask
        if t.is_floating_point() and not (
            math.isfinite(float(t.sum())) or bool(torch.isfinite(t).all())
        ):
            raise ValueError("batch contains NaN or inf")
    return n, leaves, spec


class KroneckerProjector:
    """Seeded Kronecker-factored Johnson–Lindenstrauss projection of per-sample gradients, one
    block per parameter (the structure LoGra-style gradient stores use).

    A weight gradient ``G ∈ R^{d_out×d_in}`` is mapped to ``P_out G P_inᵀ ∈ R^{k_out×k_in}``,
    i.e. ``vec(G)`` is multiplied by ``P_out ⊗ P_in``; a 1-D parameter (bias, norm scale) of size
    ``d`` to ``P g ∈ R^{k_out}``. The factors have i.i.d. ``N(0, 1/k)`` (or ``±1/√k``) entries,
    so ``E[(P_out⊗P_in)ᵀ(P_out⊗P_in)] = I``: squared norms and dot products are preserved in
    expectation. A side whose dimension is at most its ``k`` is kept exactly (identity).

    For a linear layer the per-sample gradient is ``Σ_t δ_t x_tᵀ`` (output gradient ⊗ input), so
    ``P_out G P_inᵀ = Σ_t (P_out δ_t)(P_in x_t)ᵀ``: :func:`per_sample_grads` with
    ``method="hooks"`` projects the two factors and never forms the ``d_out×d_in`` gradient. With
    ``"vmap"``/``"loop"`` the materialised gradient is projected, with the same result.

    Args:
        k_in: projected size of a weight's input side.
        k_out: projected size of a weight's output side and of 1-D parameters.
        seed: seed; parameter ``j`` (in ``named_parameters`` order of the chosen ones) gets its
            own factors, so the projection depends only on the seed and the shapes.
        kind: ``"gaussian"`` or ``"rademacher"``.
    """

    def __init__(
        self, k_in: int = 32, k_out: int = 32, *, seed: int = 0, kind: str = "gaussian"
    ) -> None:
        self.k_in = check_int(k_in, "k_in", low=1)
        self.k_out = check_int(k_out, "k_out", low=1)
        self.seed = check_int(seed, "seed", low=0)
        self.kind = check_choice(kind, "kind", ("gaussian", "rademacher"))
        self._cache: dict[tuple[int, int, int, torch.dtype, torch.device], torch.Tensor] = {}

    def factor(
        self, index: int, side: int, d: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor | None:
        """The ``(k, d)`` factor of parameter ``index`` (side 0: output, 1: input), or ``None``
        when ``d <= k`` (that side is kept exactly)."""
        k = self.k_out if side == 0 else self.k_in
        if d <= k:
            return None
        key = (index, side, d, dtype, device)
        if key not in self._cache:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + 2 * index + side)
            if self.kind == "gaussian":
                m = torch.randn(k, d, generator=gen, dtype=torch.float64)
            else:
                m = torch.randint(0, 2, (k, d), generator=gen).to(torch.float64) * 2 - 1
            self._cache[key] = (m / math.sqrt(k)).to(dtype=dtype, device=device)
        return self._cache[key]

    def block_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Projected shape of a parameter of ``shape`` (more than 2 dims: ``(shape[0], rest)``)."""
        if len(shape) == 0:
            return (1,)
        if len(shape) == 1:
            return (min(shape[0], self.k_out),)
        d_in = math.prod(shape[1:])
        return (min(shape[0], self.k_out), min(d_in, self.k_in))

    def dim(self, shapes: Iterable[Sequence[int]]) -> int:
        """Output dimension for parameters of these shapes."""
        return sum(math.prod(self.block_shape(s)) for s in shapes)

    def project_block(self, index: int, grads: torch.Tensor) -> torch.Tensor:
        """Project materialised per-sample gradients ``(n, *shape)`` of parameter ``index`` to
        ``(n, prod(block_shape(shape)))``."""
        n = grads.shape[0]
        if grads.ndim == 1:
            return grads.reshape(n, 1)
        if grads.ndim == 2:
            p = self.factor(index, 0, grads.shape[1], grads.dtype, grads.device)
            return grads if p is None else grads @ p.T
        g = grads.reshape(n, grads.shape[1], -1)
        p_out = self.factor(index, 0, g.shape[1], g.dtype, g.device)
        p_in = self.factor(index, 1, g.shape[2], g.dtype, g.device)
        if p_in is not None:
            g = g @ p_in.T
        if p_out is not None:
            g = p_out @ g
        return g.reshape(n, -1)


# --------------------------------------------------------- one batched backward with hooks

#: Layer types whose per-sample gradients ``method="hooks"`` forms from one batched backward.
HOOKED_LAYERS = (torch.nn.Linear, torch.nn.LayerNorm)


def _hooked_owner(
    model: torch.nn.Module, chosen: dict[str, torch.Tensor]
) -> tuple[dict[str, tuple[torch.nn.Module, str]], list[str]]:
    """Map each chosen parameter to ``(layer, "weight"|"bias")`` when a hookable layer owns it
    directly; also return the chosen names that no hookable layer owns."""
    owner: dict[str, tuple[torch.nn.Module, str]] = {}
    for mod_name, module in model.named_modules():
        if type(module) not in HOOKED_LAYERS:
            continue  # subclasses may override forward: only the stock layers are trusted
        for attr in ("weight", "bias"):
            full = f"{mod_name}.{attr}" if mod_name else attr
            if full in chosen and getattr(module, attr) is not None:
                owner[full] = (module, attr)
    return owner, [n for n in chosen if n not in owner]


class _NotPerExample(ValueError):
    """The loss is not one value per example, so hooks cannot separate the examples."""


def _per_example_loss(loss: Any, n: int) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.shape != (n,):
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise _NotPerExample(
            f"method='hooks' needs compute_loss(model, batch) to return one loss per example, "
            f"shape ({n},), got {shape}: use reduction='none' and average within each example, "
            "or method='vmap'"
        )
    return loss


def _hooks_grads(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    batch: Any,
    chosen: dict[str, torch.Tensor],
    owner: dict[str, tuple[torch.nn.Module, str]],
    n: int,
    projector: KroneckerProjector | None,
) -> torch.Tensor:
    """Per-sample gradients of Linear/LayerNorm parameters from ONE batched backward.

    Each hooked layer's input ``x`` (forward hook) and output gradient ``δ`` (a tensor hook on its
    output, which sees the gradient before any later in-place op) give the per-sample gradients
    ``Σ_t δ_t x_tᵀ`` (weight) and ``Σ_t δ_t`` (bias); LayerNorm: ``Σ_t δ_t ⊙ x̂_t``. Correct when
    example ``i``'s loss depends only on row ``i`` of every layer (no batch statistics).

    The ``(n, P)`` result is allocated once; the tensor hook writes each parameter's block
    straight into its column view while the backward runs (an outer product for one row per
    example, a batched matmul over a sequence; a bias block is the output gradient itself), so
    no per-layer gradient, no ``torch.cat`` and no graph outlive the call.
    """
    names = list(chosen)
    ref = chosen[names[0]]
    if projector is None:
        widths = [chosen[k].numel() for k in names]
    else:
        widths = [math.prod(projector.block_shape(chosen[k].shape)) for k in names]
    out = _aligned_rows(n, sum(widths), ref.dtype, ref.device)
    # column view of each chosen parameter, grouped by the layer that owns it; a linear
    # weight's block is also kept as an (n, d_out, d_in) view for the outer-product write
    blocks: dict[int, list[tuple[int, str, torch.Tensor, torch.Tensor | None]]] = {}
    layers: dict[int, torch.nn.Module] = {}
    start = 0
    for index, (name, width) in enumerate(zip(names, widths, strict=True)):
        module, attr = owner[name]
        block = out[:, start : start + width]
        square = None
        if projector is None and attr == "weight" and isinstance(module, torch.nn.Linear):
            square = block.view(n, *module.weight.shape)
        blocks.setdefault(id(module), []).append((index, attr, block, square))
        layers[id(module)] = module
        start += width
    written: set[int] = set()  # blocks holding a first call's gradient (later calls add to it)

    def forward_hook(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
        x = args[0]
        if x.ndim == 0 or x.shape[0] != n:
            raise _NotPerExample(
                f"method='hooks': a {type(module).__name__} was called on an input of shape "
                f"{tuple(x.shape)}, not batch-first with {n} examples; use method='vmap'"
            )
        if not output.requires_grad:
            return
        x = x.detach()
        own = blocks[id(module)]
        # one row per example through a plain linear layer: the per-sample weight gradient is
        # the outer product δ xᵀ, written by one broadcast multiply straight into its block
        rows = projector is None and x.ndim == 2 and type(module) is torch.nn.Linear
        x_row = x.unsqueeze(1) if rows else None

        def write(g: torch.Tensor) -> None:
            if rows and g.ndim == 2:
                g_col = g.unsqueeze(2)
                for index, _, block, square in own:
                    if index in written:
                        if square is None:
                            block.add_(g)
                        else:
                            square.addcmul_(g_col, x_row)
                    elif square is None:  # the bias block IS the output-gradient row
                        block.copy_(g)
                    else:
                        torch.mul(g_col, x_row, out=square)
                    written.add(index)
                return
            for index, attr, block, _ in own:
                first = index not in written
                _accumulate(block, index, module, attr, x, g, n, projector, first)
                written.add(index)

        output.register_hook(write)

    # The engine must run every hooked layer's backward node; asking for one cheap gradient per
    # layer (its bias when chosen) is enough, and lets the unused batched weight gradients be
    # skipped.
    wanted = []
    for key, own in blocks.items():
        attrs = {entry[1] for entry in own}
        wanted.append(getattr(layers[key], "bias" if "bias" in attrs else "weight"))
    frozen = [p for p in chosen.values() if not p.requires_grad]
    handles = [m.register_forward_hook(forward_hook) for m in layers.values()]
    try:
        for p in frozen:
            p.requires_grad_(True)
        losses = _per_example_loss(compute_loss(model, batch), n)
        torch.autograd.grad(losses.sum(), wanted, allow_unused=True)
    finally:
        for h in handles:
            h.remove()
        for p in frozen:
            p.requires_grad_(False)
    if len(written) < len(names):
        for own in blocks.values():
            for index, _, block, _ in own:
                if index not in written:  # the layer never reached the loss: zero gradient
                    block.zero_()
    return out


def _aligned_rows(n: int, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised ``(n, width)`` matrix whose rows start on 64-byte boundaries: the columns
    ``[:width]`` of an ``(n, width rounded up to 64 bytes)`` buffer. Writing a layer's outer
    products into rows that straddle cache lines measured 1.75x slower (4810 float32 columns,
    the bench MLP); the returned matrix is a strided view when ``width`` is not a multiple of
    64 bytes (``.contiguous()`` packs it)."""
    per_line = max(1, 64 // dtype.itemsize)
    padded = -(-width // per_line) * per_line
    buffer = torch.empty(n, padded, dtype=dtype, device=device)
    return buffer if padded == width else buffer[:, :width]


def _accumulate(
    block: torch.Tensor,
    index: int,
    module: torch.nn.Module,
    attr: str,
    x: torch.Tensor,
    g: torch.Tensor,
    n: int,
    projector: KroneckerProjector | None,
    first: bool,
) -> None:
    """Write (``first``) or add one layer call's per-sample gradients into ``block``."""
    if isinstance(module, torch.nn.LayerNorm):
        shape = module.normalized_shape
        xhat = torch.nn.functional.layer_norm(x, shape, None, None, module.eps)
        width = math.prod(shape)
        g3 = g.reshape(n, -1, width)
        per = (g3 * xhat.reshape(n, -1, width)).sum(1) if attr == "weight" else g3.sum(1)
        per = per if projector is None else projector.project_block(index, per)
        block.copy_(per) if first else block.add_(per)
        return
    d_out, d_in = module.weight.shape
    if attr == "bias":
        # one row per example: the bias gradient IS the output-gradient row
        per = g.reshape(n, d_out) if g.ndim == 2 else g.reshape(n, -1, d_out).sum(1)
        if projector is not None:
            per = projector.project_block(index, per)
        block.copy_(per) if first else block.add_(per)
        return
    g3 = g.reshape(n, -1, d_out)
    x3 = x.reshape(n, -1, d_in)
    if projector is not None:
        p_out = projector.factor(index, 0, d_out, g.dtype, g.device)
        p_in = projector.factor(index, 1, d_in, x.dtype, x.device)
        if p_out is not None:
            g3 = g3 @ p_out.T
        if p_in is not None:
            x3 = x3 @ p_in.T
    view = block.view(n, g3.shape[2], x3.shape[2])
    if x3.shape[1] == 1:  # one row per example: an outer product, written in place
        if first:
            torch.mul(g3[:, 0, :, None], x3[:, 0, None, :], out=view)
        else:
            view.addcmul_(g3[:, 0, :, None], x3[:, 0, None, :])
    elif first:  # a sequence: Σ_t δ_t x_tᵀ as one batched matmul
        torch.bmm(g3.transpose(1, 2), x3, out=view)
    else:
        view.baddbmm_(g3.transpose(1, 2), x3)


def per_sample_grads(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    batch: Any,
    *,
    params: str | Iterable[str] | Callable[[str], bool] = "trainable",
    method: str = "auto",
    chunk_size: int | None = None,
    projector: RandomProjector | KroneckerProjector | None = None,
) -> torch.Tensor:
    """Gradient of each example's loss with respect to the chosen parameters, as an ``(n, d)``
    matrix (rows in batch order, parameters concatenated in ``named_parameters`` order).

    Methods (all give the same matrix up to float rounding):

    * ``"hooks"``: ONE batched forward and backward. Every chosen parameter must belong to an
      ``nn.Linear`` (LoRA ``lora_A``/``lora_B`` are ``nn.Linear``) or ``nn.LayerNorm``; the
      per-sample gradient of a linear weight is ``Σ_t δ_t x_tᵀ``, formed from the layer input
      ``x`` and output gradient ``δ`` captured by hooks. ``compute_loss(model, batch)`` must
      return one loss per example, shape ``(n,)`` (e.g. ``reduction="none"``), and example ``i``'s
      loss may depend only on row ``i`` (no batch statistics, e.g. BatchNorm in train mode).
      With a :class:`KroneckerProjector` the projection is formed from the projected factors,
      never from the ``d_out × d_in`` gradient.
    * ``"vmap"``: ``torch.func`` ``vmap(grad(...))``, chunked by ``chunk_size``; any model.
    * ``"compiled"``: the same ``vmap(grad(...))`` traced once (``make_fx`` on fake tensors) and
      compiled by inductor, which fuses the per-example outer products into the writes of the
      result; the compiled code is called directly (no TorchDynamo guards or wrapper). The
      first call for a model, ``compute_loss`` function, parameter set, module modes and batch
      shapes/dtypes compiles (seconds to tens of seconds on a CPU; inductor needs a C++ compiler
      there); later calls with the same ones reuse the code, so pass the same ``compute_loss``
      object each time. The parameters and buffers are inputs of the program (weight updates
      are seen), but Python control flow is fixed at trace time, like ``torch.jit.trace``: a
      model whose ``forward`` branches on a plain attribute that changes later must be
      recompiled (:func:`clear_compiled`); a branch on tensor values cannot be traced and
      raises.
    * ``"loop"``: one backward per example (the official approach); any model.
    * ``"auto"`` (default): ``"hooks"`` when every chosen parameter is hookable and the loss is
      per-example, else ``"vmap"``.

    With ``"hooks"`` the matrix is allocated once and every layer writes its block into it during
    the backward; its rows start on 64-byte boundaries, so when ``d`` is not a multiple of 64
    bytes it is a column slice of a slightly wider buffer (``.contiguous()`` packs it).

    Args:
        model: any ``nn.Module``; put it in ``eval()`` mode for deterministic gradients (vmap
            refuses random ops such as active dropout).
        compute_loss: ``compute_loss(call, sample)``: ``call(*args, **kwargs)`` runs the model.
            For ``"vmap"``/``"loop"`` ``sample`` is one example with a batch dimension of 1 and
            the result a scalar (or shape ``(1,)``); for ``"hooks"`` ``sample`` is the whole
            batch and the result has shape ``(n,)``. A loss written per example
            (``reduction="none"``, averaged within each example) serves every method.
        batch: a tensor or pytree (tuple/dict) of tensors sharing the first dimension ``n``.
        params: which parameters, see :func:`select_params`.
        method: ``"auto"``, ``"hooks"``, ``"vmap"``, ``"compiled"`` or ``"loop"``.
        chunk_size: examples per vmapped chunk (memory bound); ``None`` = all at once.
        projector: optional :class:`RandomProjector` (dense, applied to the ``(n, d)`` result) or
            :class:`KroneckerProjector` (per parameter, factored).

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, ``compute_loss`` is not callable, or
            ``batch``/``projector`` has the wrong type.
        ValueError: unknown ``method``, empty or ragged ``batch``, NaN/inf in ``batch``,
            ``chunk_size < 1``, parameters ``"hooks"`` cannot handle, a loss of the wrong shape.
        RuntimeError: ``"compiled"`` cannot trace the model (data-dependent control flow) or
            inductor cannot build its code here.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(compute_loss):
        raise TypeError(f"compute_loss must be callable, got {type(compute_loss).__name__}")
    check_choice(method, "method", ("auto", "hooks", "vmap", "compiled", "loop"))
    if chunk_size is not None:
        check_int(chunk_size, "chunk_size", low=1)
    if projector is not None and not isinstance(projector, RandomProjector | KroneckerProjector):
        raise TypeError(
            "projector must be a RandomProjector or KroneckerProjector, "
            f"got {type(projector).__name__}"
        )
    n, leaves, spec = _flat_batch(batch)
    named = dict(model.named_parameters())
    chosen = _choose(named, params)
    names = list(chosen)
    if method in ("auto", "hooks"):
        owner, unsupported = _hooked_owner(model, chosen)
        if unsupported and method == "hooks":
            raise ValueError(
                "method='hooks' handles parameters of nn.Linear and nn.LayerNorm only; not "
                f"{unsupported[:5]}: use method='vmap'"
            )
        if not unsupported:
            kron = projector if isinstance(projector, KroneckerProjector) else None
            try:
                flat = _hooks_grads(model, compute_loss, batch, chosen, owner, n, kron)
            except _NotPerExample:
                if method == "hooks":
                    raise
                logger.info(
                    "compute_loss returns a scalar for the batch: per_sample_grads uses vmap"
                )
            else:
                return projector(flat) if isinstance(projector, RandomProjector) else flat
        method = "vmap"
    buffers = dict(model.named_buffers())
    frozen = {k: v.detach() for k, v in named.items() if k not in chosen}
    flat = None
    if method in ("compiled", "vmap"):
        detached = {k: v.detach() for k, v in chosen.items()}
        others = {**frozen, **buffers}
        if method == "compiled":
            flat = _compiled_flat_grads(
                model, compute_loss, detached, others, leaves, spec, chunk_size
            )
            if not isinstance(projector, KroneckerProjector):
                return projector(flat) if projector is not None else flat
            bounds = [0, *itertools.accumulate(chosen[k].numel() for k in names)]
            blocks = [
                flat[:, a:b].view(n, *chosen[k].shape)
                for k, a, b in zip(names, bounds, bounds[1:], strict=False)
            ]
        else:
            grads = _vmapped_grads(model, compute_loss, detached, others, batch, chunk_size)
            blocks = [grads[k].reshape(n, *chosen[k].shape) for k in names]
    else:
        rows: list[list[torch.Tensor]] = []
        was = {k: p.requires_grad for k, p in chosen.items()}
        try:
            for p in chosen.values():
                p.requires_grad_(True)
            for i in range(n):
                sample = tree_map(lambda t, i=i: t[i : i + 1], batch)
                loss = _scalar_loss(compute_loss(model, sample))
                rows.append(list(torch.autograd.grad(loss, [chosen[k] for k in names])))
        finally:
            for k, p in chosen.items():
                p.requires_grad_(was[k])
        blocks = [torch.stack([r[j] for r in rows]) for j in range(len(names))]
    if isinstance(projector, KroneckerProjector):
        return torch.cat([projector.project_block(j, b) for j, b in enumerate(blocks)], dim=1)
    if flat is None:
        flat = torch.cat([b.reshape(n, -1) for b in blocks], dim=1)
    return projector(flat) if projector is not None else flat


def _vmapped_grads(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    params: dict[str, torch.Tensor],
    others: dict[str, torch.Tensor],
    batch: Any,
    chunk_size: int | None,
) -> dict[str, torch.Tensor]:
    """``vmap(grad(loss))`` over the examples of ``batch``: each parameter in ``params``' per-sample
    gradient, with ``others`` (the remaining parameters and the buffers) held fixed."""

    def loss_of(p: dict[str, torch.Tensor], sample: Any) -> torch.Tensor:
        state = {**others, **p}

        def call(*args: Any, **kwargs: Any) -> Any:
            return functional_call(model, state, args, kwargs)

        return _scalar_loss(compute_loss(call, tree_map(lambda t: t.unsqueeze(0), sample)))

    return vmap(grad(loss_of), in_dims=(None, 0), chunk_size=chunk_size)(params, batch)


#: compiled per-sample gradient programs, per model (dropped with the model), keyed by
#: :func:`_program_key`
_COMPILED: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple, Callable[..., Any]]]
_COMPILED = weakref.WeakKeyDictionary()


def _program_key(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    names: tuple[tuple[str, ...], tuple[str, ...]],
    inputs: list[torch.Tensor],
    spec: Any,
    leaves: list[Any],
    chunk_size: int | None,
) -> tuple:
    """What a traced program depends on besides the tensors' values: the loss function, every
    module's train/eval mode, ``chunk_size``, the batch's structure and non-tensor entries, and the
    ``names`` of the differentiated parameters and of the other parameters and buffers, and the
    shape, dtype and device of every input tensor (``inputs``: the parameters, the others, then
    the batch's tensors)."""
    try:
        extras = tuple(None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves)
        hash(extras)
    except TypeError as err:
        raise TypeError(
            "method='compiled' needs the batch's non-tensor entries to be hashable "
            f"(they are part of the compiled program): {err}"
        ) from err
    metas = tuple((t.shape, t.dtype, t.device) for t in inputs)
    modes = tuple(m.training for m in model.modules())
    return (compute_loss, chunk_size, modes, spec, extras, names, metas)


def _compiled_flat_grads(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    params: dict[str, torch.Tensor],
    others: dict[str, torch.Tensor],
    leaves: list[Any],
    spec: Any,
    chunk_size: int | None,
) -> torch.Tensor:
    """The flat ``(n, d)`` matrix of ``vmap(grad(loss))`` on the batch ``tree_unflatten(leaves,
    spec)``, from a program that is traced once (``make_fx``, fake tensors) and compiled by
    inductor, then cached.

    The program takes the parameters, the other parameters and buffers, and the batch's tensors
    as inputs (so in-place weight updates are seen) and is reused while :func:`_program_key` is
    unchanged. Calling inductor's compiled code directly, without TorchDynamo's guards and
    runtime wrapper, is what makes it cheap per call: the caller's own checks replace the guards.
    """
    tensors = {**params, **others}
    # inductor's code assumes the example inputs' strides: pass dense tensors (a no-op for most)
    inputs = [t.contiguous() for t in tensors.values()]
    inputs += [leaf.contiguous() for leaf in leaves if isinstance(leaf, torch.Tensor)]
    names = (tuple(params), tuple(others))
    key = _program_key(model, compute_loss, names, inputs, spec, leaves, chunk_size)
    per_model = _COMPILED.setdefault(model, {})
    program = per_model.get(key)
    if program is None:
        program = _compile_program(model, compute_loss, *names, spec, leaves, chunk_size, inputs)
        per_model[key] = program
    out = program(*inputs)
    return out[0] if isinstance(out, list | tuple) else out


def clear_compiled(model: torch.nn.Module | None = None) -> None:
    """Drop the compiled per-sample gradient programs of ``model`` (all models if ``None``), e.g.
    after changing a plain attribute its ``forward`` branches on."""
    if model is None:
        _COMPILED.clear()
    else:
        _COMPILED.pop(model, None)


def _compile_program(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    names: tuple[str, ...],
    other_names: tuple[str, ...],
    spec: Any,
    leaves: list[Any],
    chunk_size: int | None,
    inputs: list[torch.Tensor],
) -> Callable[..., Any]:
    from torch.fx.experimental.proxy_tensor import make_fx

    k, m = len(names), len(other_names)

    def flat_grads(*flat: torch.Tensor) -> torch.Tensor:
        params = dict(zip(names, flat[:k], strict=True))
        others = dict(zip(other_names, flat[k : k + m], strict=True))
        batch_tensors = iter(flat[k + m :])
        rebuilt = [next(batch_tensors) if isinstance(x, torch.Tensor) else x for x in leaves]
        batch = tree_unflatten(rebuilt, spec)
        grads = _vmapped_grads(model, compute_loss, params, others, batch, chunk_size)
        return torch.cat([grads[name].reshape(grads[name].shape[0], -1) for name in names], dim=1)

    try:
        graph = make_fx(flat_grads, tracing_mode="fake")(*inputs)
    except Exception as err:  # any tracing failure names the eager fallback
        raise RuntimeError(
            "method='compiled' could not trace the per-sample gradients (data-dependent Python "
            f"control flow in the model or loss?); use method='hooks' or 'vmap': {err}"
        ) from err
    try:
        import torch._inductor as inductor

        return inductor.compile(graph, inputs)
    except Exception as err:  # e.g. no C++ compiler for inductor's CPU code
        raise RuntimeError(
            "method='compiled' could not compile the per-sample gradients (inductor needs a "
            f"working C++ compiler on CPU); use method='hooks' or 'vmap': {err}"
        ) from err


def _scalar_loss(loss: Any) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(
            f"compute_loss on one example must return a scalar (or shape (1,)), got {shape}"
        )
    return loss.reshape(())


# ---------------------------------------------------------------- Hugging Face causal LMs


def format_example(instruction: str, response: str) -> str:
    """The official formatter: ``"Instruction:\\n{instruction}\\n\\nResponse:\\n{response}"``."""
    return f"Instruction:\n{instruction}\n\nResponse:\n{response}"


#: LoRA target modules of the official proxy (Qwen2/LLaMA naming).
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA of the official proxy: r=16, α=32, dropout 0.05 on attention and MLP projections."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Sequence[str] = field(default=DEFAULT_TARGETS)


def load_causal_lm(
    path: str | Path,
    *,
    lora: LoraSettings | None = LoraSettings(),
    allow_download: bool = False,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.nn.Module, Any]:
    """Load a causal LM and its tokenizer with ``transformers`` and wrap it with PEFT LoRA.

    Args:
        path: a local model folder (or a hub id when ``allow_download=True``).
        lora: LoRA settings; only the target modules present in the model are used. ``None``
            keeps every parameter trainable.
        allow_download: allow ``transformers`` to fetch from the hub; off by default.
        dtype: parameter dtype.

    Returns:
        ``(model, tokenizer)``, the model in ``eval()`` mode.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local_only = not allow_download
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=local_only, torch_dtype=dtype
    )
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [t for t in lora.target_modules if t in present]
        if not targets:
            raise ValueError(
                f"none of the LoRA target modules {list(lora.target_modules)} exist in the model"
            )
        config = LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=targets,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    return model.eval(), tokenizer


def lm_per_sample_grads(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: Sequence[tuple[str, str]],
    *,
    max_length: int = 512,
    mask_prompt: bool = False,
    projector: RandomProjector | KroneckerProjector | None = None,
    method: str = "auto",
) -> torch.Tensor:
    """Per-example gradients of the causal-LM loss of formatted ``(instruction, response)`` pairs.

    Matches the official loss: the whole formatted text is the target, only padding is masked
    (``mask_prompt=True`` also masks the instruction part, an option the official code lacks).

    Args:
        model: a causal LM, e.g. from :func:`load_causal_lm`; gradients w.r.t. its trainable
            parameters.
        tokenizer: its tokenizer (needs a pad token).
        examples: ``(instruction, response)`` pairs.
        max_length: truncation length in tokens.
        mask_prompt: exclude the instruction tokens from the loss.
        projector: optional :class:`RandomProjector` or :class:`KroneckerProjector`.
        method: see :func:`per_sample_grads`; ``"auto"`` uses one batched backward with hooks
            when only LoRA (``nn.Linear``) parameters are trainable.
    """
    if isinstance(examples, str) or not isinstance(examples, Sequence):
        raise TypeError(
            f"examples must be a list of (instruction, response) pairs, got {type(examples).__name__}"
        )
    if not examples:
        raise ValueError("examples must not be empty")
    for j, ex in enumerate(examples):
        if not (
            isinstance(ex, tuple | list) and len(ex) == 2 and all(isinstance(t, str) for t in ex)
        ):
            raise TypeError(
                f"examples[{j}] must be an (instruction, response) pair of strings, got {ex!r:.80}"
            )
    check_int(max_length, "max_length", low=2)
    texts = [format_example(i, r) for i, r in examples]
    enc = tokenizer(
        texts, return_tensors="pt", padding=True, truncation=True, max_length=max_length
    )
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    if mask_prompt:
        for row, (instruction, _) in enumerate(examples):
            prompt = format_example(instruction, "")
            n_prompt = len(tokenizer(prompt, truncation=True, max_length=max_length)["input_ids"])
            labels[row, :n_prompt] = -100
    batch = {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "labels": labels,
    }

    def compute_loss(call: Callable[..., Any], sample: dict[str, torch.Tensor]) -> torch.Tensor:
        # the causal-LM loss of each example: mean over its own target tokens (as the model's
        # built-in loss computes it for one example), so one definition serves every method
        logits = call(input_ids=sample["input_ids"], attention_mask=sample["attention_mask"]).logits
        targets = sample["labels"][:, 1:]
        token = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=-100, reduction="none"
        )
        keep = (targets != -100).to(token.dtype)
        return token.sum(1) / keep.sum(1).clamp(min=1)

    return per_sample_grads(model, compute_loss, batch, method=method, projector=projector)
