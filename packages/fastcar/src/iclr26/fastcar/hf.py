"""FastCar on Hugging Face causal LMs (LLaMA, Qwen2, Mistral-style decoders) through module hooks.

:func:`enable_fastcar` wraps each decoder layer's ``mlp`` in a :class:`ReplayMLP` and adds three
kinds of forward hooks, so ``model.generate`` (and its KV cache) runs unchanged:

* a pre-hook on the decoder finds the absolute position of the forward (cache length) and resets
  the state when a new prompt is prefilled;
* a hook on ``self_attn.q_proj`` keeps the current token's query (before RoPE);
* a hook on ``self_attn`` reads the key cache *after* its update and computes TAS against the
  predecessor key (RoPE is applied to the query with the layer's own ``position_embeddings`` for
  ``score="post_rope"``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from iclr26.fastcar.replay import ReplayConfig, ReplayMLP, ReplayState, ReplayStats

__all__ = [
    "FastCarHandle",
    "enable_fastcar",
    "find_decoder_layers",
    "generate_video",
    "preallocated_cache",
]

_EXPECTED = (
    "a decoder with `.layers` (model.model.layers / model.get_decoder().layers) whose layers "
    "have `.mlp` and `.self_attn.q_proj` (LLaMA/Qwen2/Mistral-style)"
)


def find_decoder_layers(model: nn.Module) -> tuple[nn.Module, list[nn.Module]]:
    """The decoder module and its layers; ``TypeError`` naming what was expected otherwise."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    decoder = None
    get = getattr(model, "get_decoder", None)
    if callable(get):
        with contextlib.suppress(Exception):
            decoder = get()
    if decoder is None or not hasattr(decoder, "layers"):
        decoder = getattr(model, "model", model)
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise TypeError(
            f"cannot find the decoder layers of {type(model).__name__}: expected {_EXPECTED}"
        )
    for i, layer in enumerate(layers):
        attn = getattr(layer, "self_attn", None)
        if (
            not isinstance(getattr(layer, "mlp", None), nn.Module)
            or attn is None
            or not hasattr(attn, "q_proj")
        ):
            raise TypeError(
                f"layer {i} of {type(model).__name__} has no MLP/attention where expected: "
                f"expected {_EXPECTED}"
            )
        if isinstance(layer.mlp, ReplayMLP):
            raise ValueError("FastCar is already enabled on this model: disable() the old handle")
    return decoder, list(layers)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """LLaMA rotary embedding of ``q`` ``(B, H, T, d)`` with ``cos``/``sin`` ``(B, T, d)``."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin


def _cache_keys(cache: object, layer: int) -> torch.Tensor:
    layers = getattr(cache, "layers", None)
    if (
        layers is not None
        and layer < len(layers)
        and getattr(layers[layer], "keys", None) is not None
    ):
        return layers[layer].keys
    key_cache = getattr(cache, "key_cache", None)
    if key_cache is not None:
        return key_cache[layer]
    raise TypeError(
        f"cannot read keys of layer {layer} from a {type(cache).__name__}: FastCar needs a "
        "DynamicCache/StaticCache (use_cache=True)"
    )


class FastCarHandle:
    """Returned by :func:`enable_fastcar`: statistics, reset, recording, disable.

    Also a context manager: ``with enable_fastcar(model, cfg) as fc: model.generate(...)``
    disables FastCar on exit.
    """

    def __init__(self, model: nn.Module, state: ReplayState, layers: list[nn.Module]) -> None:
        self.model = model
        self.state = state
        self._layers = layers
        self._hooks: list[torch.utils.hooks.RemovableHandle] = []
        self._q: list[torch.Tensor | None] = [None] * len(layers)
        self.active = True

    @property
    def stats(self) -> ReplayStats:
        """Per-layer decode counters (rows total, eligible, replayed, computed)."""
        return self.state.stats

    def reset(self) -> None:
        """Forget the previous video (a new prefill does this too); counters are kept."""
        self.state.reset()

    def reset_stats(self) -> None:
        """Zero the counters and recorded scores."""
        self.state.reset_stats()

    def set_thresholds(self, thresholds: float | Sequence[float | None]) -> None:
        """Replace the per-layer thresholds."""
        self.state.set_thresholds(thresholds)

    @contextlib.contextmanager
    def recording(self) -> Iterator[ReplayState]:
        """Record TAS and the true MLP-output change of every decode step (computes every MLP)."""
        self.state.recording = True
        try:
            yield self.state
        finally:
            self.state.recording = False

    def disable(self) -> None:
        """Remove hooks and restore the original MLPs: the model is unpatched again."""
        if not self.active:
            return
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        for layer in self._layers:
            if isinstance(layer.mlp, ReplayMLP):
                layer.mlp = layer.mlp.inner
        self.active = False

    def __enter__(self) -> FastCarHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disable()


def enable_fastcar(model: nn.Module, cfg: ReplayConfig) -> FastCarHandle:
    """Patch a Hugging Face decoder-only model for FastCar decoding (spec §5.2).

    Args:
        model: e.g. ``transformers.LlamaForCausalLM`` / ``Qwen2ForCausalLM``; decode with
            ``model.generate`` or manual forwards with a cache. All sequences of a batch must
            share one prefix length (no left padding): slots are ``(i - P) % N``.
        cfg: the :class:`ReplayConfig`; thresholds are checked against the layer count, and
            ``layout.tokens_per_frame`` against ``config.fastcar_tokens_per_frame`` if the
            model's config carries one.

    Returns:
        a :class:`FastCarHandle`. ``thresholds=+inf`` reproduces the unpatched model bit for bit.
    """
    if not isinstance(cfg, ReplayConfig):
        raise TypeError(f"cfg must be a ReplayConfig, got {type(cfg).__name__}")
    decoder, layers = find_decoder_layers(model)
    config = getattr(model, "config", None)
    n_model = getattr(config, "fastcar_tokens_per_frame", None)
    if n_model is not None and int(n_model) != cfg.layout.tokens_per_frame:
        raise ValueError(
            f"layout.tokens_per_frame={cfg.layout.tokens_per_frame} does not match the model's "
            f"tokens per frame ({n_model})"
        )
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        sw = config.sliding_window
        if isinstance(sw, int) and sw <= cfg.layout.tokens_per_frame:
            raise ValueError(
                f"sliding_window={sw} drops the predecessor key (tokens_per_frame="
                f"{cfg.layout.tokens_per_frame})"
            )
    state = ReplayState(cfg, len(layers))
    handle = FastCarHandle(model, state, layers)

    def decoder_pre_hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        emb = kwargs.get("inputs_embeds")
        x = ids if ids is not None else emb
        if x is None:
            return None
        length = x.shape[1]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        past = int(cache.get_seq_length()) if cache is not None else 0
        mask = kwargs.get("attention_mask")
        if isinstance(mask, torch.Tensor) and mask.ndim == 2 and not bool(mask.all()):
            raise ValueError(
                "attention_mask has padding: FastCar needs one prefix length per batch "
                "(no left padding), since slots are (i - P) % tokens_per_frame"
            )
        if past == 0 and cache is None and length == 1:
            # a forward without cache restarts the sequence; nothing to replay
            pass
        state.begin_step(past, length)
        return None

    handle._hooks.append(decoder.register_forward_pre_hook(decoder_pre_hook, with_kwargs=True))

    for li, layer in enumerate(layers):
        attn = layer.self_attn
        head_dim = getattr(attn, "head_dim", None)
        if head_dim is None:
            raise TypeError(f"layer {li}: self_attn has no head_dim; expected {_EXPECTED}")

        def q_hook(module, args, output, li=li):
            if state.needs_score(li):
                handle._q[li] = output
            return None

        def attn_hook(module, args, kwargs, output, li=li, head_dim=head_dim):
            if not state.needs_score(li):
                return None
            q = handle._q[li]
            handle._q[li] = None
            if q is None:
                raise RuntimeError(f"layer {li}: q_proj hook did not run")
            b = q.shape[0]
            q = q.view(b, 1, -1, head_dim).transpose(1, 2)  # (B, H, 1, d)
            if state.cfg.score == "post_rope":
                pe = kwargs.get("position_embeddings")
                if pe is None:
                    raise TypeError(
                        f"layer {li}: self_attn was called without position_embeddings; "
                        "use score='reference' for this architecture"
                    )
                q = apply_rope(q, *pe)
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            if cache is None:
                raise ValueError("FastCar decodes with a KV cache: pass use_cache=True")
            layer_idx = getattr(module, "layer_idx", li)
            keys = _cache_keys(cache, layer_idx)
            state.attention_score(li, q[:, :, 0], keys)
            return None

        handle._hooks.append(attn.q_proj.register_forward_hook(q_hook))
        handle._hooks.append(attn.register_forward_hook(attn_hook, with_kwargs=True))
        layer.mlp = ReplayMLP(layer.mlp, li, state)
    return handle


def preallocated_cache(capacity: int):
    """A ``transformers`` ``DynamicCache`` whose layers write keys and values into buffers of
    ``capacity`` positions allocated at their first update, instead of ``torch.cat``-ing the
    whole cache at every token; a layer's ``keys``/``values`` are views of the filled part.

    Same keys, values and attention inputs as the dynamic default of a full-attention model
    (tokens and logits are identical); what it saves is the copy of every layer's cache per generated token, a cost
    that grows with the sequence and the batch. It grows by doubling past ``capacity``; beam
    reordering and batch selection index the buffers. Its layers keep every position (no
    sliding-window trimming: a sliding-window model still gets its window from the mask). Pass it to ``generate`` as its cache
    (``cache=``; ``past_key_values=`` in transformers versions before the rename);
    :func:`generate_video` does with ``cache_implementation="preallocated"``.
    """
    from transformers.cache_utils import DynamicCache, DynamicLayer

    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, got {capacity!r}")

    class _PreallocatedLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states):
            super().lazy_initialization(key_states, value_states)
            self.buffers = None

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, t = self.get_seq_length(), key_states.shape[-2]
            buf = self.buffers
            if (
                buf is None
                or n + t > buf[0].shape[-2]
                or buf[0].shape[:-2] != key_states.shape[:-2]
                or (n and self.keys.data_ptr() != buf[0].data_ptr())
            ):  # first update, overflow, or keys replaced from outside: re-buffer
                grow = buf is not None and n + t > buf[0].shape[-2]
                cap = max(capacity, 2 * (n + t) if grow else n + t)
                buf = tuple(
                    s.new_empty(*s.shape[:-2], cap, s.shape[-1]) for s in (key_states, value_states)
                )
                if n:
                    buf[0][..., :n, :] = self.keys
                    buf[1][..., :n, :] = self.values
                self.buffers = buf
            buf[0][..., n : n + t, :] = key_states
            buf[1][..., n : n + t, :] = value_states
            self.keys, self.values = buf[0][..., : n + t, :], buf[1][..., : n + t, :]
            return self.keys, self.values

        def _batch_op(self, fn) -> None:
            """Apply a batch reordering to the whole buffers and keep the views on them."""
            n = self.get_seq_length()
            if n > 0:
                self.buffers = tuple(fn(b) for b in self.buffers)
                self.keys, self.values = (b[..., :n, :] for b in self.buffers)

        def reorder_cache(self, beam_idx):
            self._batch_op(lambda b: b.index_select(0, beam_idx.to(b.device)))

        def batch_select_indices(self, indices):
            self._batch_op(lambda b: b[indices, ...])

        def batch_repeat_interleave(self, repeats):
            self._batch_op(lambda b: b.repeat_interleave(repeats, dim=0))

    cache = DynamicCache()  # no config: full-attention layers, created at their first update
    cache.layer_class_to_replicate = _PreallocatedLayer
    return cache


@torch.inference_mode()
def generate_video(
    model: nn.Module,
    prefix: torch.Tensor,
    num_tokens: int,
    *,
    allowed_vocab: int | None = None,
    keep_logits: bool = False,
    noise_seed: int | None = None,
    cache_implementation: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Greedy (or fixed-noise Gumbel-max, ``noise_seed``) ``model.generate`` of exactly ``num_tokens`` tokens after ``prefix`` ``(B, P)``.

    ``allowed_vocab`` suppresses ids ``>= allowed_vocab`` (non-image tokens); ``noise_seed``
    adds the same per-position Gumbel noise as the native decoder (a logits processor);
    ``cache_implementation``: ``None`` (or ``"dynamic"``) is ``generate``'s default cache,
    ``"static"`` its fixed-length cache (attention over every slot, masked),
    ``"preallocated"`` a :func:`preallocated_cache` of ``P + num_tokens`` positions. Returns
    ``(tokens (B, P + num_tokens), raw logits (B, num_tokens, V) or None)``.
    """
    if not isinstance(prefix, torch.Tensor) or prefix.ndim != 2 or prefix.shape[1] < 1:
        raise ValueError(
            f"prefix must be a (B, P>=1) tensor, got {getattr(prefix, 'shape', prefix)}"
        )
    if prefix.dtype.is_floating_point or prefix.dtype == torch.bool:
        raise TypeError(f"prefix must hold integer token ids, got {prefix.dtype}")
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(f"num_tokens must be a positive integer, got {num_tokens!r}")
    if cache_implementation not in (None, "static", "dynamic", "preallocated"):
        raise ValueError(
            "cache_implementation must be None, 'static', 'dynamic' or 'preallocated', "
            f"got {cache_implementation!r}"
        )
    vocab = model.config.vocab_size
    suppress = list(range(allowed_vocab, vocab)) if allowed_vocab is not None else None
    processors = None
    if noise_seed is not None:
        from transformers import LogitsProcessor, LogitsProcessorList

        from iclr26.fastcar.models import position_noise

        v = vocab if allowed_vocab is None else allowed_vocab
        noise = position_noise(prefix.shape[0], num_tokens, v, noise_seed).to(prefix.device)
        p = prefix.shape[1]

        class _Noise(LogitsProcessor):
            def __call__(self, input_ids, scores):
                scores = scores.float().clone()
                scores[:, :v] += noise[:, input_ids.shape[1] - p]
                return scores

        processors = LogitsProcessorList([_Noise()])
    cache = {}
    if cache_implementation == "preallocated":
        import inspect

        # transformers renamed ``past_key_values`` to ``cache`` (5.x); pass what this one takes
        key = (
            "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )
        cache = {key: preallocated_cache(prefix.shape[1] + num_tokens)}
    elif cache_implementation is not None:
        cache = {"cache_implementation": cache_implementation}
    out = model.generate(
        prefix.long(), attention_mask=torch.ones_like(prefix), max_new_tokens=num_tokens,
        min_new_tokens=num_tokens, do_sample=False, suppress_tokens=suppress,
        output_logits=keep_logits, return_dict_in_generate=True, pad_token_id=0,
        eos_token_id=None, use_cache=True, logits_processor=processors,
        **cache,
    )  # fmt: skip
    logits = torch.stack(out.logits, 1) if keep_logits else None
    return out.sequences, logits
