"""Optional bridge to TRL's ``GRPOTrainer`` (extra ``[trl]``, tested against trl 1.16).

Two pieces:

* :func:`task_reward_func` turns a generated :class:`~iclr26.maskgrpo.tasks.Task` into a TRL reward
  function (``reward_funcs=`` of ``GRPOTrainer``), so the same verifiers score an autoregressive
  TRL run and a MaskGRPO run; :func:`encode_text` / :func:`decode_ids` map the task's token ids to
  the text TRL passes around (digits, ``|`` for SEP, ``+``).
* :func:`trl_grpo_loss` evaluates TRL's own loss code (``GRPOTrainer._compute_loss``) on given
  per-token log-probabilities, advantages and a credit mask: the parity run of the GRPO parts
  MaskGRPO shares with TRL (clipped surrogate, k3 KL, aggregation). With the MaskGRPO credit mask
  (the re-masked completion tokens) as TRL's ``completion_mask`` it matches
  :func:`~iclr26.maskgrpo.loss.clipped_surrogate` (``loss_agg="token_mean"`` is TRL's
  ``loss_type="bnpo"``, ``"seq_mean"`` its ``"grpo"``).

The official MaskGRPO code subclasses a pinned git commit of TRL and overrides its private
methods; TRL's internals change between releases, so this module checks the TRL version and the
method it calls, and the rest of the package never imports TRL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch

from iclr26.maskgrpo.loss import check_loss_inputs
from iclr26.maskgrpo.tasks import PLUS, SEP, Task

__all__ = ["decode_ids", "encode_text", "task_reward_func", "trl_grpo_loss"]

#: TRL releases this adapter is tested against (its private loss method changes between majors).
SUPPORTED_TRL = (1,)
_CHARS = {**{str(d): d for d in range(10)}, "|": SEP, "+": PLUS}
_IDS = {v: k for k, v in _CHARS.items()}


def _trl():
    try:
        import trl
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("the TRL adapter needs trl: pip install 'iclr26-maskgrpo[trl]'") from err
    major = int(str(trl.__version__).split(".")[0])
    if major not in SUPPORTED_TRL or not hasattr(trl.GRPOTrainer, "_compute_loss"):
        raise ImportError(
            f"trl {trl.__version__} is not supported by this adapter (tested with trl 1.x, whose "
            "GRPOTrainer has _compute_loss)"
        )
    return trl


def decode_ids(ids: torch.Tensor | Sequence[int]) -> str:
    """Text of task token ids: digits, ``|`` (SEP) and ``+``; the mask token is refused."""
    vals = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if isinstance(ids, torch.Tensor) and (ids.is_floating_point() or ids.ndim != 1):
        raise TypeError("ids must be a 1-D integer tensor or a sequence of ints")
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"ids must hold ints, got {type(v).__name__}")
        if v not in _IDS:
            raise ValueError(f"ids hold {v}, which is not a digit, SEP or PLUS token")
        out.append(_IDS[v])
    return "".join(out)


def encode_text(text: str) -> torch.Tensor:
    """Token ids (long) of ``text`` made of digits, ``|`` and ``+`` (whitespace is ignored)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    chars = [c for c in text if not c.isspace()]
    bad = sorted({c for c in chars if c not in _CHARS})
    if bad:
        raise ValueError(f"text holds characters outside digits, '|' and '+': {bad}")
    return torch.tensor([_CHARS[c] for c in chars], dtype=torch.long)


def task_reward_func(task: Task, *, partial: bool = False) -> Callable[..., list[float]]:
    """A TRL reward function scoring text completions with ``task``'s verifier.

    The returned ``reward_func(prompts, completions, **kwargs)`` takes lists of strings (the
    prompt as :func:`decode_ids` writes it, e.g. ``"31415926|"`` for Sort-8; the completion as
    generated) and returns one float per completion: ``task.reward`` (exact success) or, with
    ``partial=True``, ``task.score``. A completion that is not a well-formed answer (other
    characters, wrong length) gets 0.0; a malformed prompt is an error.
    """
    if not isinstance(task, Task):
        raise TypeError(f"task must implement the Task protocol, got {type(task).__name__}")
    if not isinstance(partial, bool):
        raise TypeError("partial must be a bool")
    verify = task.score if partial else task.reward

    def reward_func(
        prompts: Sequence[str], completions: Sequence[str], **kwargs: Any
    ) -> list[float]:
        if isinstance(prompts, str) or isinstance(completions, str):
            raise TypeError("prompts and completions must be lists of strings")
        if len(prompts) != len(completions):
            raise ValueError(
                f"prompts ({len(prompts)}) and completions ({len(completions)}) differ in length"
            )
        out = []
        for prompt, completion in zip(prompts, completions, strict=True):
            p = encode_text(prompt)
            if p.numel() != task.prompt_len:
                raise ValueError(
                    f"prompt {prompt!r} has {p.numel()} tokens, expected {task.prompt_len}"
                )
            try:
                c = encode_text(completion)
            except (TypeError, ValueError):
                out.append(0.0)
                continue
            if c.numel() != task.completion_len:
                out.append(0.0)
                continue
            out.append(float(verify(p[None], c[None])[0]))
        return out

    reward_func.__name__ = f"{task.name}_{'score' if partial else 'reward'}"
    return reward_func


def trl_grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    loss_agg: str = "token_mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """TRL's GRPO loss (``GRPOTrainer._compute_loss`` of the installed trl) on given inputs.

    Arguments as :func:`~iclr26.maskgrpo.loss.clipped_surrogate`: ``logps`` (B, L)
    differentiable l_θ, ``old_logps``/``ref_logps`` (B, L), ``advantages`` (B,), ``mask`` (B, L)
    the credit mask (bool or 0/1), which TRL sees as its ``completion_mask``. TRL's method is
    called with a single-process stand-in for the trainer state that carries exactly the
    settings ``GRPOTrainer.__init__`` derives from ``GRPOConfig`` (token-level importance
    sampling, no entropy terms, no vLLM correction), and with ``logps`` in place of the model's
    forward. Inputs are validated by :func:`~iclr26.maskgrpo.loss.check_loss_inputs` (the
    checks of ``clipped_surrogate``, plus a 0/1 mask). Returns ``(loss, stats)``; ``stats``
    holds TRL's logged ``clip_frac`` (``clip_ratio/region_mean``) and ``kl``.
    """
    w, eps_lo, eps_hi, beta = check_loss_inputs(
        logps, old_logps, advantages, mask, epsilon=epsilon, epsilon_high=epsilon_high,
        ref_logps=ref_logps, beta=beta, loss_agg=loss_agg, binary_mask=True,
    )  # fmt: skip
    trl = _trl()

    class _OneProcess:  # accelerate's collectives in a single process are identities
        num_processes = 1
        sync_gradients = True

        @staticmethod
        def reduce(t, reduction="sum"):
            return t

        @staticmethod
        def gather(t):
            return t

        gather_for_metrics = gather

    b, length = logps.shape
    state = SimpleNamespace(
        beta=float(beta), epsilon_low=eps_lo, epsilon_high=eps_hi,
        loss_type="bnpo" if loss_agg == "token_mean" else "grpo",
        importance_sampling_level="token", top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, use_vllm=False, vllm_importance_sampling_correction=False,
        aux_loss_enabled=False, _entropy_bonus_enabled=False, max_completion_length=length,
        current_gradient_accumulation_steps=1, model=SimpleNamespace(training=True),
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
        accelerator=_OneProcess(), _metrics=defaultdict(lambda: defaultdict(list)),
        _get_per_token_logps_and_entropies=lambda *a, **k: (logps, torch.zeros_like(logps), None),
    )  # fmt: skip
    inputs = {
        "prompt_ids": torch.zeros(b, 0, dtype=torch.long),
        "prompt_mask": torch.zeros(b, 0, dtype=torch.long),
        "completion_ids": torch.zeros(b, length, dtype=torch.long),
        "completion_mask": w,
        "advantages": advantages.to(logps.dtype),
        "old_per_token_logps": old_logps.detach(),
        "num_items_in_batch": w.sum(),
    }
    if beta > 0:
        inputs["ref_per_token_logps"] = ref_logps.detach()
    loss = trl.GRPOTrainer._compute_loss(state, None, inputs)
    metrics = state._metrics["train"]
    stats = {
        "clip_frac": float(metrics["clip_ratio/region_mean"][-1]),
        "kl": float(metrics["kl"][-1]) if beta > 0 else 0.0,
    }
    return loss, stats
