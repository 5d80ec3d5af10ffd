"""Install learnable gates on a model's prunable units (forward pre-hooks on the consumer layers).

Every unit group gets its own ``nn.Parameter`` of logits, keyed by module name (the official
hooks find their logits with a global call counter, which breaks when the call order changes;
this does not). The gate multiplies the input columns of the consumer linear layers, i.e. each
head's output before the output projection and each FFN neuron's activation. The same mask
multiplies every sample of a batch, so classifier-free guidance sees one mask for both halves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from iclr26.ecodiff.gates import GATES, TEMPERATURE, deterministic_gate, hard_concrete
from iclr26.ecodiff.units import PrunableUnit, find_prunable_units

__all__ = ["MODES", "MaskedModel"]

MODES = ("stochastic", "deterministic", "binary", "keep", "probe")


class MaskedModel(nn.Module):
    """Learnable structured gates attached to a (frozen) model.

    Use as a context manager (hooks installed on enter, removed on exit) or call
    :meth:`install` / :meth:`remove`. The wrapped model's own parameters are not touched.

    Args:
        model: a diffusers model or any ``nn.Module`` holding the units.
        units: unit groups (default: :func:`find_prunable_units` on ``model``).
        gate: ``"hard_concrete"`` (paper) or ``"sigmoid"`` (``m = sigmoid(λ)``).
        init_logit: initial ``λ`` (3 for SDXL/FLUX, 10 for DiT in the official configs).
        noise_eps: the official ``masking_eps`` ``e`` (0.5 SDXL, 0.1 FLUX).
        temperature: hard-concrete ``b`` (0.83).
        noise: ``"trajectory"``: one ``u`` per :meth:`resample_noise` call, reused by every
            forward (needed for exact time-step checkpointing); ``"call"``: a fresh ``u`` at every
            gated forward (the official code's behaviour).
    """

    def __init__(
        self,
        model: nn.Module,
        units: Sequence[PrunableUnit] | None = None,
        *,
        gate: str = "hard_concrete",
        init_logit: float = 3.0,
        noise_eps: float = 0.5,
        temperature: float = TEMPERATURE,
        noise: str = "trajectory",
    ) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        if noise not in ("trajectory", "call"):
            raise ValueError(f"noise must be 'trajectory' or 'call', got {noise!r}")
        for name, value in (("init_logit", init_logit), ("noise_eps", noise_eps)):
            if not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if noise_eps < 0:
            raise ValueError(f"noise_eps must be >= 0, got {noise_eps}")
        if not (temperature > 0):
            raise ValueError(f"temperature must be > 0, got {temperature}")
        units = list(find_prunable_units(model) if units is None else units)
        if not units:
            raise ValueError("units must not be empty")
        if len({u.key for u in units}) != len(units):
            raise ValueError("units must have distinct names")
        object.__setattr__(self, "model", model)  # not a submodule: parameters() = gate logits only
        self.units = units
        self.gate = gate
        self.noise_eps = float(noise_eps)
        self.temperature = float(temperature)
        self.noise = noise
        ref = next(model.parameters(), None)
        device = ref.device if ref is not None else torch.device("cpu")
        # logits stay in float32 for bf16/fp16 models (the gate is cast to the activations' dtype)
        dtype = torch.float64 if ref is not None and ref.dtype == torch.float64 else torch.float32
        self.logits = nn.ParameterDict(
            {
                u.key: nn.Parameter(
                    torch.full((u.size,), float(init_logit), device=device, dtype=dtype)
                )
                for u in units
            }
        )
        self.mode = "stochastic"
        self._u: dict[str, torch.Tensor] = {}
        self._keep: dict[str, torch.Tensor] = {}
        self._handles: list = []
        self._generator: torch.Generator | None = None
        self._by_consumer: dict[str, list[tuple[PrunableUnit, int]]] = {}
        self._by_output: dict[str, PrunableUnit] = {}  # units without consumers: gate outputs
        for u in units:
            for path, off in u.consumers:
                self._by_consumer.setdefault(path, []).append((u, off))
            if not u.consumers:
                for path, _ in u.producers:
                    self._by_output[path] = u
        for path in [*self._by_consumer, *self._by_output]:
            model.get_submodule(path)  # fail early on a stale unit list

    # ----------------------------------------------------------------- gates
    def resample_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw the uniform noise ``u`` of every gate once (one mask per trajectory)."""
        self._generator = generator
        self._u = {
            u.key: torch.rand(u.size, generator=generator, device="cpu", dtype=torch.float64).to(
                self.logits[u.key]
            )
            for u in self.units
        }

    def gate_values(self, key: str) -> torch.Tensor:
        """The mask ``m`` (one value per unit) of group ``key`` in the current mode."""
        lam = self.logits[key]
        if self.mode == "keep":
            return self._keep[key].to(lam)
        if self.mode == "probe":  # value exactly 1, gradient dL/dm (first-order Taylor)
            return 1.0 + (lam - lam.detach())
        if self.mode == "binary":
            return (lam > 0).to(lam)
        if self.gate == "sigmoid":
            return torch.sigmoid(lam)
        if self.mode == "deterministic":
            return deterministic_gate(lam, temperature=self.temperature)
        if self.noise == "call" or key not in self._u:
            u = torch.rand(lam.shape, generator=self._generator, dtype=torch.float64).to(lam)
            if self.noise == "trajectory":
                self._u[key] = u
        else:
            u = self._u[key]
        return hard_concrete(lam, u, eps=self.noise_eps, temperature=self.temperature)

    def masks(self) -> dict[str, torch.Tensor]:
        """Current gate value of every group, keyed by unit key."""
        return {u.key: self.gate_values(u.key) for u in self.units}

    @contextlib.contextmanager
    def use(self, mode: str, keep: Mapping[str, torch.Tensor] | None = None) -> Iterator[None]:
        """Temporarily switch mode: ``"stochastic"``, ``"deterministic"`` (u = 1/2),
        ``"binary"`` (``λ > 0``), ``"keep"`` (a given boolean mask per unit key) or ``"probe"``
        (every gate exactly 1 with ``dm/dλ = 1``, so ``dL/dλ`` is the Taylor importance)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        old_mode, old_keep = self.mode, self._keep
        if mode == "keep":
            if keep is None:
                raise ValueError("mode 'keep' needs keep=")
            self._keep = check_keep(self.units, keep)
        self.mode = mode
        try:
            yield
        finally:
            self.mode, self._keep = old_mode, old_keep

    # ----------------------------------------------------------------- hooks
    def _hook(self, path: str):
        groups = self._by_consumer[path]

        def pre_hook(module: nn.Linear, args: tuple) -> tuple:
            x = args[0]
            scale = torch.ones(module.in_features, dtype=x.dtype, device=x.device)
            pieces = []
            for unit, off in groups:
                m = self.gate_values(unit.key).to(x.dtype)
                pieces.append((off, unit.size * unit.width, m.repeat_interleave(unit.width)))
            pieces.sort(key=lambda p: p[0])
            parts, pos = [], 0
            for off, n, vec in pieces:
                if off > pos:
                    parts.append(scale[pos:off])
                parts.append(vec)
                pos = off + n
            if pos < module.in_features:
                parts.append(scale[pos:])
            return (x * torch.cat(parts), *args[1:])

        return pre_hook

    def _output_hook(self, path: str):
        unit = self._by_output[path]

        def hook(module: nn.Linear, args: tuple, out: torch.Tensor) -> torch.Tensor:
            return out * self.gate_values(unit.key).to(out.dtype).repeat_interleave(unit.width)

        return hook

    def install(self) -> MaskedModel:
        """Register the gate hooks (idempotent)."""
        if not self._handles:
            for path in self._by_consumer:
                mod = self.model.get_submodule(path)
                self._handles.append(mod.register_forward_pre_hook(self._hook(path)))
            for path in self._by_output:
                mod = self.model.get_submodule(path)
                self._handles.append(mod.register_forward_hook(self._output_hook(path)))
        return self

    def remove(self) -> None:
        """Remove the gate hooks; the model is back to its dense behaviour."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> MaskedModel:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @property
    def installed(self) -> bool:
        """Whether the hooks are active."""
        return bool(self._handles)

    def forward(self, *args, **kwargs):
        """Call the wrapped model (gated if the hooks are installed)."""
        return self.model(*args, **kwargs)

    def scores(self):
        """The current logits as :class:`~iclr26.ecodiff.select.MaskScores` (detached copies)."""
        from iclr26.ecodiff.select import MaskScores

        return MaskScores(
            {u.key: self.logits[u.key].detach().clone() for u in self.units}, list(self.units)
        )

    def load_scores(self, scores) -> None:
        """Copy logits from :class:`~iclr26.ecodiff.select.MaskScores` (e.g. to resume)."""
        for u in self.units:
            if u.key not in scores.logits:
                raise ValueError(f"scores lack unit {u.name} ({u.kind})")
            value = scores.logits[u.key]
            if value.shape != (u.size,):
                raise ValueError(f"scores for {u.name}: shape {tuple(value.shape)} != ({u.size},)")
            if not torch.isfinite(value).all():
                raise ValueError(f"scores for {u.name} are not finite")
            with torch.no_grad():
                self.logits[u.key].copy_(value)


def check_keep(
    units: Sequence[PrunableUnit], keep: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Validate a keep-mask mapping: one bool tensor of shape ``(unit.size,)`` per unit key."""
    out = {}
    for u in units:
        if u.key not in keep:
            raise ValueError(f"keep lacks unit {u.name} ({u.kind}, key {u.key!r})")
        k = torch.as_tensor(keep[u.key])
        if k.dtype != torch.bool:
            raise TypeError(f"keep[{u.key!r}] must be a bool tensor, got {k.dtype}")
        if k.shape != (u.size,):
            raise ValueError(f"keep[{u.key!r}] must have shape ({u.size},), got {tuple(k.shape)}")
        out[u.key] = k
    return out
