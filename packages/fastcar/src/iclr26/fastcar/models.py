"""A native pure-PyTorch LLaMA decoder with a static KV cache and built-in FastCar replay.

:class:`TinyARVideoLM` has the parameter names of ``transformers.LlamaForCausalLM``
(``model.layers.{i}.self_attn.q_proj.weight``, ``...mlp.gate_proj.weight``, ``lm_head.weight``),
so weights move both ways with ``load_state_dict`` (:meth:`TinyARVideoLM.from_hf`,
:meth:`TinyARVideoLM.to_hf`). It is the reference semantics of the replay path and the model
for overhead-free timing (no hooks, no dynamic cache).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.fastcar.hf import apply_rope
from iclr26.fastcar.replay import ReplayConfig, ReplayState

__all__ = [
    "DecodeResult", "PackedMLP", "TinyARVideoLM", "pack_mlps", "position_noise",
    "sink_window_mask",
]  # fmt: skip


def position_noise(batch: int, num_tokens: int, vocab: int, seed: int) -> torch.Tensor:
    """``(batch, num_tokens, vocab)`` Gumbel noise fixed per (row, position, id) by ``seed``:
    ``argmax(logits + noise)`` samples from ``softmax(logits)`` with shared randomness."""
    g = torch.Generator().manual_seed(int(seed))
    u = torch.rand(batch, num_tokens, vocab, generator=g).clamp_(1e-10, 1 - 1e-7)
    return -torch.log(-torch.log(u))


class _RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class _MLP(nn.Module):
    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, d_ff, bias=False)
        self.up_proj = nn.Linear(d, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _onednn_pack(weight: torch.Tensor, batch_hint: int):
    """oneDNN's blocked layout of a ``(out, in)`` linear weight, or ``None`` where unavailable."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return None
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), batch_hint)
        probe = torch.zeros(1, weight.shape[1])
        torch.ops.mkldnn._linear_pointwise(probe, packed, None, "none", [], "")
    except (RuntimeError, AttributeError, NotImplementedError):
        return None
    return packed


class PackedMLP(nn.Module):
    """A LLaMA SwiGLU MLP ``down(silu(gate(x)) * up(x))`` with one fused gate/up weight and, on a
    float32 CPU tensor with oneDNN, weights pre-packed in oneDNN's blocked layout (no re-layout
    at every call; the GEMM of a few rows costs less of the full batch's). Same function as the
    MLP it packs (up to float rounding); the original ``gate_proj``/``up_proj``/``down_proj`` are
    kept, so ``state_dict`` keys are unchanged. Inference only: the packed copies do not follow
    later changes of the weights (pack again).

    Args:
        mlp: a module with bias-free ``gate_proj``, ``up_proj``, ``down_proj`` linears.
        batch_hint: the row count oneDNN tunes the packed layout for (any count works).
        onednn: use oneDNN packing where available (``False``: the fused weight with
            ``F.linear``).
    """

    def __init__(self, mlp: nn.Module, batch_hint: int = 32, onednn: bool = True) -> None:
        super().__init__()
        for name in ("gate_proj", "up_proj", "down_proj"):
            lin = getattr(mlp, name, None)
            if not isinstance(lin, nn.Linear):
                raise TypeError(
                    f"mlp must have nn.Linear gate_proj, up_proj and down_proj (LLaMA SwiGLU), "
                    f"{name} is {type(lin).__name__}"
                )
            if lin.bias is not None:
                raise ValueError(f"mlp.{name} has a bias: PackedMLP packs bias-free MLPs only")
        act = getattr(mlp, "act_fn", None)
        if act is not None and not (
            isinstance(act, nn.SiLU) or type(act).__name__ == "SiLUActivation"
        ):
            raise ValueError(f"mlp.act_fn must be SiLU, got {type(act).__name__}")
        if isinstance(batch_hint, bool) or not isinstance(batch_hint, int) or batch_hint < 1:
            raise ValueError(f"batch_hint must be a positive integer, got {batch_hint!r}")
        self.gate_proj, self.up_proj, self.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        self.d_ff = self.gate_proj.out_features
        with torch.no_grad():
            self.gate_up = torch.cat((self.gate_proj.weight, self.up_proj.weight), 0).contiguous()
            self.down = self.down_proj.weight.detach().contiguous()
        self.packed = None
        if onednn:
            pgu = _onednn_pack(self.gate_up, batch_hint)
            pd = _onednn_pack(self.down, batch_hint)
            if pgu is not None and pd is not None:
                self.packed = (pgu, pd)

    @property
    def onednn(self) -> bool:
        """Whether the oneDNN pre-packed kernels run (else fused ``F.linear``)."""
        return self.packed is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        if self.packed is not None and x2.dtype == torch.float32 and x2.device.type == "cpu":
            lin = torch.ops.mkldnn._linear_pointwise
            h = lin(x2, self.packed[0], None, "none", [], "")
            g, u = h[:, : self.d_ff], h[:, self.d_ff :]
            y = lin(F.silu(g) * u, self.packed[1], None, "none", [], "")
        else:
            h = F.linear(x2, self.gate_up.to(x2))
            g, u = h[:, : self.d_ff], h[:, self.d_ff :]
            y = F.linear(F.silu(g) * u, self.down.to(x2))
        return y.reshape(*shape[:-1], y.shape[-1])


def pack_mlps(model: nn.Module, batch_hint: int = 32, onednn: bool = True) -> nn.Module:
    """Replace every decoder layer's MLP of ``model`` (a :class:`TinyARVideoLM` or a HF
    LLaMA-like model) by a :class:`PackedMLP`, in place; returns ``model``. Apply it before
    :func:`iclr26.fastcar.enable_fastcar` (which then wraps the packed MLPs), and to the dense
    model a replay run is compared with."""
    if isinstance(model, TinyARVideoLM):
        layers = list(model.model.layers)
    else:
        from iclr26.fastcar.hf import find_decoder_layers

        _, layers = find_decoder_layers(model)
    for layer in layers:
        if not isinstance(layer.mlp, PackedMLP):
            layer.mlp = PackedMLP(layer.mlp, batch_hint=batch_hint, onednn=onednn)
    return model


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(d, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, d, bias=False)


class _Layer(nn.Module):
    def __init__(self, d, heads, kv_heads, head_dim, d_ff, eps) -> None:
        super().__init__()
        self.self_attn = _Attention(d, heads, kv_heads, head_dim)
        self.mlp = _MLP(d, d_ff)
        self.input_layernorm = _RMSNorm(d, eps)
        self.post_attention_layernorm = _RMSNorm(d, eps)


class _Decoder(nn.Module):
    def __init__(self, vocab, d, n_layers, heads, kv_heads, head_dim, d_ff, eps) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            _Layer(d, heads, kv_heads, head_dim, d_ff, eps) for _ in range(n_layers)
        )
        self.norm = _RMSNorm(d, eps)


@dataclass
class DecodeResult:
    """Output of :meth:`TinyARVideoLM.decode`.

    Attributes:
        tokens: ``(B, P + F*N)`` prefix followed by the generated frames.
        logits: ``(B, F*N, V)`` logits that produced each generated token (if kept).
        state: the :class:`ReplayState` used (``None`` for dense decoding).
    """

    tokens: torch.Tensor
    logits: torch.Tensor | None
    state: ReplayState | None


def sink_window_mask(
    length: int, query_start: int, query_len: int, *, sink: int, window: int, device=None
) -> torch.Tensor:
    """Boolean ``(query_len, length)`` mask of sink + sliding-window causal attention.

    Query at absolute position ``i`` sees keys ``k <= i`` with ``k < sink`` or ``k > i - window``
    (StreamingLLM-style; the "local attention of 128 tokens" of the official script names).
    """
    if sink < 0 or window < 1:
        raise ValueError(f"sink must be >= 0 and window >= 1, got sink={sink}, window={window}")
    q = torch.arange(query_start, query_start + query_len, device=device)[:, None]
    k = torch.arange(length, device=device)[None, :]
    return (k <= q) & ((k < sink) | (k > q - window))


class TinyARVideoLM(nn.Module):
    """LLaMA-architecture decoder (RMSNorm, RoPE, GQA, SwiGLU) for token videos.

    Args:
        vocab_size, hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size: sizes
            (``LlamaConfig`` meaning).
        max_positions: KV-cache capacity (prefix + all frames).
        rope_theta: RoPE base (LLaMA default 10000).
        rms_norm_eps: RMSNorm epsilon (``LlamaConfig`` default 1e-6).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        num_layers: int,
        num_heads: int,
        num_kv_heads: int,
        intermediate_size: int,
        max_positions: int,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-6,
    ) -> None:
        super().__init__()
        for name, v in (
            ("vocab_size", vocab_size), ("hidden_size", hidden_size), ("num_layers", num_layers),
            ("num_heads", num_heads), ("num_kv_heads", num_kv_heads),
            ("intermediate_size", intermediate_size), ("max_positions", max_positions),
        ):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if hidden_size % num_heads or num_heads % num_kv_heads:
            raise ValueError(
                "hidden_size must be a multiple of num_heads and num_heads of num_kv_heads"
            )
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_layers, self.num_heads, self.num_kv_heads = num_layers, num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.intermediate_size, self.max_positions = intermediate_size, max_positions
        self.rope_theta, self.rms_norm_eps = float(rope_theta), float(rms_norm_eps)
        self.model = _Decoder(
            vocab_size, hidden_size, num_layers, num_heads, num_kv_heads, self.head_dim,
            intermediate_size, rms_norm_eps,
        )  # fmt: skip
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    # -- conversion -----------------------------------------------------------------------------
    @classmethod
    def from_hf(cls, model: nn.Module) -> TinyARVideoLM:
        """Copy a ``LlamaForCausalLM`` (or same-layout model) into a native model."""
        c = getattr(model, "config", None)
        if c is None or not hasattr(c, "num_hidden_layers"):
            raise TypeError(
                f"model must be a transformers LLaMA-like model, got {type(model).__name__}"
            )
        if getattr(c, "attention_bias", False) or getattr(c, "mlp_bias", False):
            raise ValueError(
                "biased attention/MLP projections are not supported by the native model"
            )
        if getattr(c, "hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act must be silu, got {c.hidden_act!r}")
        rope = getattr(c, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"rope_type {rope.get('rope_type')!r} is not supported natively")
        head_dim = getattr(c, "head_dim", c.hidden_size // c.num_attention_heads)
        if head_dim * c.num_attention_heads != c.hidden_size:
            raise ValueError("head_dim * num_attention_heads must equal hidden_size")
        native = cls(
            c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
            c.num_key_value_heads, c.intermediate_size, c.max_position_embeddings,
            rope_theta=theta, rms_norm_eps=c.rms_norm_eps,
        )  # fmt: skip
        sd = {k: v for k, v in model.state_dict().items() if "rotary" not in k}
        if getattr(c, "tie_word_embeddings", False) and "lm_head.weight" not in sd:
            sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
        native.load_state_dict(sd, strict=True)
        p = next(model.parameters())
        return native.to(device=p.device, dtype=p.dtype).eval()

    def hf_config(self):
        """The equivalent ``transformers.LlamaConfig``."""
        from transformers import LlamaConfig

        return LlamaConfig(
            vocab_size=self.vocab_size, hidden_size=self.hidden_size,
            num_hidden_layers=self.num_layers, num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads, intermediate_size=self.intermediate_size,
            max_position_embeddings=self.max_positions, rms_norm_eps=self.rms_norm_eps,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            tie_word_embeddings=False,
        )  # fmt: skip

    def to_hf(self):
        """A ``transformers.LlamaForCausalLM`` with the same weights."""
        from transformers import LlamaForCausalLM

        hf = LlamaForCausalLM(self.hf_config())
        hf.load_state_dict(self.state_dict(), strict=False)
        p = next(self.parameters())
        return hf.to(device=p.device, dtype=p.dtype).eval()

    # -- decoding ---------------------------------------------------------------------------------
    def _rope(self, positions: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype)[None], emb.sin().to(dtype)[None]

    def _forward(
        self,
        tokens: torch.Tensor,
        start: int,
        cache: tuple[torch.Tensor, torch.Tensor],
        state: ReplayState | None,
        attn_mask: tuple[int, int] | None,
        skip_mlp: bool = False,
    ) -> torch.Tensor:
        b, t = tokens.shape
        k_cache, v_cache = cache
        h = self.model.embed_tokens(tokens)
        cos, sin = self._rope(torch.arange(start, start + t, device=tokens.device), h.dtype)
        end = start + t
        hd, hq, hkv = self.head_dim, self.num_heads, self.num_kv_heads
        if attn_mask is not None:
            mask = sink_window_mask(end, start, t, sink=attn_mask[0], window=attn_mask[1],
                                    device=tokens.device)  # fmt: skip
        elif t > 1:
            mask = sink_window_mask(end, start, t, sink=0, window=end + 1, device=tokens.device)
        else:
            mask = None
        if state is not None:
            state.begin_step(start, t)
        for li, layer in enumerate(self.model.layers):
            a = layer.self_attn
            x = layer.input_layernorm(h)
            q_pre = a.q_proj(x).view(b, t, hq, hd).transpose(1, 2)
            k = a.k_proj(x).view(b, t, hkv, hd).transpose(1, 2)
            v = a.v_proj(x).view(b, t, hkv, hd).transpose(1, 2)
            q = apply_rope(q_pre, cos, sin)
            k = apply_rope(k, cos, sin)
            k_cache[li, :, :, start:end] = k
            v_cache[li, :, :, start:end] = v
            keys, vals = k_cache[li, :, :, :end], v_cache[li, :, :, :end]
            if state is not None and state.needs_score(li):
                qs = q if state.cfg.score == "post_rope" else q_pre
                state.attention_score(li, qs[:, :, 0], keys)
            o = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask, enable_gqa=hq != hkv)
            h = h + a.o_proj(o.transpose(1, 2).reshape(b, t, hq * hd))
            x = layer.post_attention_layernorm(h)
            if skip_mlp:
                continue
            y = layer.mlp(x) if state is None else state.mlp_forward(li, layer.mlp, x)
            h = h + y
        return self.lm_head(self.model.norm(h))

    @torch.inference_mode()
    def decode(
        self,
        prefix: torch.Tensor,
        num_tokens: int,
        *,
        replay: ReplayConfig | ReplayState | None = None,
        allowed_vocab: int | None = None,
        attention: tuple[int, int] | None = None,
        keep_logits: bool = False,
        skip_mlp: bool = False,
        noise_seed: int | None = None,
    ) -> DecodeResult:
        """Greedy decoding of ``num_tokens`` tokens after ``prefix`` with optional replay.

        Args:
            prefix: ``(B, P)`` integer token ids (the prompt); all rows share ``P``.
            num_tokens: tokens to generate (whole frames when a layout is given).
            replay: a :class:`ReplayConfig` (a fresh state) or a :class:`ReplayState` to reuse
                (its counters accumulate); ``None`` decodes densely.
            allowed_vocab: only ids ``< allowed_vocab`` may be generated (image codes).
            attention: ``(sink, window)`` sparse attention, ``None`` for full causal attention.
            keep_logits: return the ``(B, num_tokens, V)`` logits.
            skip_mlp: timing instrument only: every MLP is dropped (measures the MLP share).
            noise_seed: sample with Gumbel-max noise drawn once per (row, position) from this
                seed (:func:`position_noise`), so dense and replay runs differ only through their
                logits; ``None`` decodes greedily.
        """
        if not isinstance(prefix, torch.Tensor) or prefix.ndim != 2 or prefix.shape[1] < 1:
            raise ValueError(
                f"prefix must be a (B, P>=1) tensor, got {getattr(prefix, 'shape', prefix)}"
            )
        if prefix.dtype.is_floating_point or prefix.dtype == torch.bool:
            raise TypeError(f"prefix must hold integer token ids, got {prefix.dtype}")
        if prefix.numel() and (int(prefix.min()) < 0 or int(prefix.max()) >= self.vocab_size):
            raise ValueError(f"prefix token ids must lie in [0, {self.vocab_size})")
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
            raise ValueError(f"num_tokens must be a positive integer, got {num_tokens!r}")
        b, p = prefix.shape
        total = p + num_tokens
        if total > self.max_positions:
            raise ValueError(
                f"prefix + num_tokens = {total} exceeds max_positions {self.max_positions}"
            )
        state = None
        if isinstance(replay, ReplayConfig):
            state = ReplayState(replay, self.num_layers)
        elif isinstance(replay, ReplayState):
            state = replay
        elif replay is not None:
            raise TypeError(
                f"replay must be a ReplayConfig, ReplayState or None, got {type(replay).__name__}"
            )
        if state is not None:
            if state.num_layers != self.num_layers:
                raise ValueError(
                    f"replay state has {state.num_layers} layers, model {self.num_layers}"
                )
            pl = state.cfg.layout.prefix_len
            if pl is not None and pl != p:
                raise ValueError(f"prefix has {p} tokens but layout.prefix_len is {pl}")
            state.cfg.layout.num_frames(total, p)
            state.prefix_len = None if pl is None else pl
        if allowed_vocab is not None and not (1 <= allowed_vocab <= self.vocab_size):
            raise ValueError(
                f"allowed_vocab must be in [1, {self.vocab_size}], got {allowed_vocab}"
            )
        w = next(self.parameters())
        shape = (self.num_layers, b, self.num_kv_heads, total, self.head_dim)
        cache = (torch.zeros(shape, dtype=w.dtype, device=w.device),
                 torch.zeros(shape, dtype=w.dtype, device=w.device))  # fmt: skip
        out = torch.empty(b, total, dtype=torch.long, device=prefix.device)
        out[:, :p] = prefix
        kept = [] if keep_logits else None
        vocab = self.vocab_size if allowed_vocab is None else allowed_vocab
        noise = None
        if noise_seed is not None:
            noise = position_noise(b, num_tokens, vocab, noise_seed).to(w.device)
        logits = self._forward(prefix.long(), 0, cache, state, attention, skip_mlp)[:, -1]
        for i in range(p, total):
            if kept is not None:
                kept.append(logits)
            lg = logits[:, :vocab].float()
            if noise is not None:
                lg = lg + noise[:, i - p]
            nxt = lg.argmax(-1)
            out[:, i] = nxt
            if i + 1 < total:
                logits = self._forward(nxt[:, None], i, cache, state, attention, skip_mlp)[:, -1]
        return DecodeResult(out, torch.stack(kept, 1) if kept is not None else None, state)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Full-sequence logits ``(B, T, V)`` (training; no cache kept)."""
        b, t = input_ids.shape
        w = next(self.parameters())
        shape = (self.num_layers, b, self.num_kv_heads, t, self.head_dim)
        cache = (torch.zeros(shape, dtype=w.dtype, device=w.device),
                 torch.zeros(shape, dtype=w.dtype, device=w.device))  # fmt: skip
        return self._forward(input_ids, 0, cache, None, None)
