"""Grounders (the official provers): turn a leaf proposition into a :class:`Proof`.

* :class:`LLMGrounder` — one LLM call with the official calibration table (``vanilla`` prover).
* :class:`NotebookGrounder` — the Jupyter Notebook agent (``programming`` prover): the LLM writes
  code cells that run on a local IPython kernel (``jupyter_client``) in a scratch folder, sees
  their output, and ends with ``{"p_true", "key_factor", "proof"}``. Cells are killed at their
  timeout; sockets are refused inside the kernel unless ``allow_network``.
* :class:`DataFrameGrounder` — a deterministic tool agent over a pandas frame: one rule per
  proposition, evaluated on the rows available at the query date only (no look-ahead).
* :class:`NoisyGrounder` — the official ``noise_level``: ``p + N(0, σ)`` clipped to [0, 1].
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import re
import tempfile
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from iclr26.analytica.clients import CallLedger, ChatClient, complete_json, extract_json
from iclr26.analytica.tree import Proof, Proposition, check_probability
from iclr26.shared import import_optional

__all__ = [
    "CALIBRATION_PROMPT",
    "DataFrameGrounder",
    "Grounder",
    "GroundingError",
    "LLMGrounder",
    "LookaheadError",
    "NoisyGrounder",
    "NotebookGrounder",
    "parse_proof",
]

log = logging.getLogger(__name__)


class GroundingError(RuntimeError):
    """A grounder could not produce a proof (steps or debug retries exhausted)."""


class LookaheadError(ValueError):
    """A data rule needed rows dated after the query date."""


@runtime_checkable
class Grounder(Protocol):
    """Proves one leaf proposition."""

    async def ground(self, prop: Proposition) -> Proof: ...


CALIBRATION_PROMPT = """You estimate the probability that a proposition is true as of its date,
using only information available at that date. Calibrate your answer:
0.90-0.99 extremely likely; 0.70-0.89 likely; 0.55-0.69 somewhat likely; 0.50 unknown;
0.31-0.45 somewhat unlikely; 0.11-0.30 unlikely; 0.01-0.10 extremely unlikely.
Reply with one JSON object: {"p_true": float in [0, 1], "key_factor": "...", "proof": "..."}"""


def parse_proof(text: str) -> Proof:
    """Parse a prover answer ``{"p_true", "key_factor", "proof"}`` (raises ``ValueError``)."""
    data = extract_json(text)
    if not isinstance(data, Mapping) or "p_true" not in data:
        raise ValueError("the answer needs a JSON object with 'p_true'")
    return Proof(
        check_probability(data["p_true"], "p_true"),
        str(data.get("proof", "")),
        str(data.get("key_factor", "")),
    )


def _describe(prop: Proposition) -> str:
    return f"Proposition {prop.pid}: {prop.sentence}\nDate: {prop.date}\nContext: {prop.context}"


class LLMGrounder:
    """One LLM call per leaf with the calibration prompt; bad answers are repaired (bounded)."""

    def __init__(
        self,
        client: ChatClient,
        *,
        prompt: str = CALIBRATION_PROMPT,
        max_repairs: int = 3,
        ledger: CallLedger | None = None,
    ) -> None:
        self.client = client
        self.prompt = prompt
        self.max_repairs = max_repairs
        self.ledger = ledger
        self.calls = 0

    async def ground(self, prop: Proposition) -> Proof:
        self.calls += 1
        return await complete_json(
            self.client,
            [
                {"role": "system", "content": self.prompt},
                {"role": "user", "content": _describe(prop)},
            ],
            parse_proof,
            max_repairs=self.max_repairs,
            tag=prop.pid,
            ledger=self.ledger,
            kind="ground-parse",
        )


# ------------------------------------------------------------------------------ notebook
NOTEBOOK_PROMPT = """You prove a proposition by data analysis in a Jupyter notebook. Each reply is
EITHER one Python code cell in a ```python fenced block (it is executed and you see its output),
OR, when you are done, the final JSON object {"p_true": float in [0, 1], "key_factor": "...",
"proof": "..."}. Use only information available at the proposition's date."""

_CODE = re.compile(r"```(?:python|py)\s*\n(.*?)```", re.S)

_NO_NETWORK = """
import socket as _s
def _refuse(*a, **k):
    raise PermissionError("network access is disabled in this notebook")
_s.socket.connect = _refuse
_s.socket.connect_ex = _refuse
_s.create_connection = _refuse
_s.getaddrinfo = _refuse
del _s, _refuse
"""


class _Kernel:
    """A local IPython kernel in a scratch folder; executes cells with a timeout."""

    def __init__(self, kernel_name: str, workdir: Path, startup_timeout: float) -> None:
        manager = import_optional(
            "jupyter_client.manager",
            dist="iclr26-analytica",
            extra="notebook",
            purpose="NotebookGrounder",
        )
        if kernel_name == "python3":
            import_optional(
                "ipykernel", dist="iclr26-analytica", extra="notebook", purpose="NotebookGrounder"
            )
        self.km = manager.KernelManager(kernel_name=kernel_name)
        self.km.start_kernel(cwd=str(workdir))
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError:
            self.close()
            raise

    def execute(self, code: str, timeout: float) -> tuple[bool, str]:
        msg_id = self.kc.execute(code, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + timeout
        out: list[str] = []
        ok = True
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._interrupt()
                return False, "".join(
                    out
                ) + f"\nTimeoutError: cell ran past {timeout:g} s and was interrupted"
            try:
                msg = self.kc.get_iopub_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                out.append(str(content["data"].get("text/plain", "")) + "\n")
            elif kind == "error":
                ok = False
                out.append(f"{content['ename']}: {content['evalue']}\n")
            elif kind == "status" and content["execution_state"] == "idle":
                return ok, "".join(out)

    def _interrupt(self) -> None:
        self.km.interrupt_kernel()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return
        log.warning("kernel did not stop after an interrupt; restarting it")
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=60)

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


class NotebookGrounder:
    """The Jupyter Notebook prover (official ``programming`` prover type).

    The LLM alternates code cells and their outputs until it states the final JSON. Each leaf
    gets a fresh kernel in its own scratch folder (under ``workdir`` or a temporary folder).

    Args:
        client: the LLM.
        kernel_name: Jupyter kernel to start (``"python3"`` = ipykernel of this environment).
        max_steps: cells + answers per proof (official ``max_proof_steps`` = 20).
        max_debug: consecutive failing cells before giving up (official ``debug_max_retries`` = 5).
        cell_timeout: seconds per cell; a cell running longer is interrupted (the kernel is
            restarted if the interrupt does not stop it).
        workdir: parent folder of the per-proof scratch folders (temporary by default).
        allow_network: leave sockets usable inside the kernel (default: refused).
        setup_code: code run once before the first cell (e.g. load the user's data files).
        startup_timeout: seconds to wait for the kernel.

    Requires the ``[notebook]`` extra (``jupyter_client``, ``ipykernel``). The socket guard is a
    guard against accidents, not a sandbox: run untrusted models in a container.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        kernel_name: str = "python3",
        max_steps: int = 20,
        max_debug: int = 5,
        cell_timeout: float = 60.0,
        workdir: str | Path | None = None,
        allow_network: bool = False,
        setup_code: str = "",
        startup_timeout: float = 60.0,
        prompt: str = NOTEBOOK_PROMPT,
        max_output_chars: int = 4000,
    ) -> None:
        for name, value in (("max_steps", max_steps), ("max_debug", max_debug)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
        if not cell_timeout > 0:
            raise ValueError(f"cell_timeout must be > 0 seconds, got {cell_timeout!r}")
        self.client = client
        self.kernel_name = kernel_name
        self.max_steps = max_steps
        self.max_debug = max_debug
        self.cell_timeout = float(cell_timeout)
        self.workdir = None if workdir is None else Path(workdir)
        self.allow_network = allow_network
        self.setup_code = setup_code
        self.startup_timeout = startup_timeout
        self.prompt = prompt
        self.max_output_chars = max_output_chars
        self.calls = 0

    async def ground(self, prop: Proposition) -> Proof:
        self.calls += 1
        base = self.workdir
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"proof-{prop.pid}-", dir=base) as scratch:
            kernel = await asyncio.to_thread(
                _Kernel, self.kernel_name, Path(scratch), self.startup_timeout
            )
            try:
                if not self.allow_network:
                    await asyncio.to_thread(kernel.execute, _NO_NETWORK, 30.0)
                if self.setup_code:
                    ok, out = await asyncio.to_thread(
                        kernel.execute, self.setup_code, self.cell_timeout
                    )
                    if not ok:
                        raise GroundingError(f"setup code failed: {out[-300:]}")
                return await self._dialog(prop, kernel)
            finally:
                await asyncio.to_thread(kernel.close)

    async def _dialog(self, prop: Proposition, kernel: _Kernel) -> Proof:
        dialog = [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": _describe(prop)},
        ]
        cells: list[dict[str, Any]] = []
        failures = 0
        for _step in range(self.max_steps):
            reply = (await self.client.complete(dialog, tag=prop.pid)).text
            dialog.append({"role": "assistant", "content": reply})
            code = _CODE.search(reply)
            if code is not None:
                ok, output = await asyncio.to_thread(
                    kernel.execute, code.group(1), self.cell_timeout
                )
                output = output[-self.max_output_chars :]
                cells.append({"code": code.group(1), "output": output, "ok": ok})
                failures = 0 if ok else failures + 1
                if failures >= self.max_debug:
                    raise GroundingError(
                        f"{prop.pid}: {failures} failing cells in a row; last: {output[-300:]}"
                    )
                dialog.append(
                    {
                        "role": "user",
                        "content": f"Output:\n{output}"
                        if ok
                        else f"The cell failed:\n{output}\nFix it.",
                    }
                )
                continue
            try:
                proof = parse_proof(reply)
            except (ValueError, TypeError) as err:
                dialog.append(
                    {
                        "role": "user",
                        "content": f"Reply with a ```python cell or the final JSON ({err}).",
                    }
                )
                continue
            proof.meta["cells"] = cells
            return proof
        raise GroundingError(f"{prop.pid}: no final answer within {self.max_steps} steps")


# --------------------------------------------------------------------------- data frame
Rule = Callable[[pd.DataFrame, pd.Timestamp], float]


class DataFrameGrounder:
    """A deterministic, data-driven prover: ``rules[key](history, date) -> p_true``.

    ``history`` holds only the rows of ``frame`` dated at or before the proposition's date
    (minus ``publication_lag`` rows), so future rows do not exist for the rule. A rule that
    reaches past them (a future label, an index beyond the end, a ``shift(-k)`` that yields NaN)
    raises :class:`LookaheadError` instead of silently leaking the outcome.

    Args:
        frame: data with a sortable ``DatetimeIndex`` (e.g. quarterly macro series).
        rules: ``key -> rule``; a proposition's rule key is ``meta["rule"]``, else its pid,
            else its sentence.
        publication_lag: rows withheld at the end of history (data published after the period).
    """

    def __init__(
        self, frame: pd.DataFrame, rules: Mapping[str, Rule], *, publication_lag: int = 0
    ) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        if not isinstance(frame.index, pd.DatetimeIndex):
            raise TypeError("frame must have a DatetimeIndex")
        if frame.empty:
            raise ValueError("frame must not be empty")
        if not frame.index.is_monotonic_increasing:
            frame = frame.sort_index()
        if not rules:
            raise ValueError("rules must not be empty")
        for k, r in rules.items():
            if not callable(r):
                raise TypeError(f"rule {k!r} is not callable")
        if not isinstance(publication_lag, int) or publication_lag < 0:
            raise ValueError(f"publication_lag must be an integer ≥ 0, got {publication_lag!r}")
        self.frame = frame
        self.rules = dict(rules)
        self.publication_lag = publication_lag
        self.calls = 0

    def rule_for(self, prop: Proposition) -> tuple[str, Rule]:
        for key in (prop.meta.get("rule"), prop.pid, prop.sentence):
            if key is not None and key in self.rules:
                return key, self.rules[key]
        raise KeyError(f"no data rule for {prop.pid} ({prop.sentence!r})")

    def history(self, date: Any) -> pd.DataFrame:
        """The rows known at ``date``."""
        try:
            ts = pd.Timestamp(date)
        except (ValueError, TypeError) as err:
            raise ValueError(f"proposition date {date!r} is not a date") from err
        end = int(self.frame.index.searchsorted(ts, side="right"))  # rows dated ≤ ts
        return self.frame.iloc[: max(0, end - self.publication_lag)]

    def evaluate(self, prop: Proposition) -> float:
        if prop.date is None:
            raise ValueError(f"{prop.pid} has no date; a data rule needs one")
        key, rule = self.rule_for(prop)
        history = self.history(prop.date)
        if history.empty:
            raise LookaheadError(f"{prop.pid}: no data at or before {prop.date}")
        ts = pd.Timestamp(prop.date)
        try:
            value = rule(history, ts)
        except (KeyError, IndexError) as err:
            raise LookaheadError(
                f"rule {key!r} read data not available at {prop.date} ({type(err).__name__}: {err})"
            ) from err
        value = float(value)
        if math.isnan(value):
            raise LookaheadError(
                f"rule {key!r} returned NaN at {prop.date} (did it look past the query date?)"
            )
        return check_probability(value, f"rule {key!r} result")

    async def ground(self, prop: Proposition) -> Proof:
        self.calls += 1
        p = self.evaluate(prop)
        return Proof(
            p,
            f"data rule {self.rule_for(prop)[0]!r} at {prop.date}",
            meta={"grounder": "dataframe"},
        )


# ------------------------------------------------------------------------------- noise
def _stable_hash(*parts: Any) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


class NoisyGrounder:
    """Official ``noise_level``: each proof's ``p_true`` gets ``+ N(0, σ)``, clipped to [0, 1].

    Draws are keyed by ``(seed, pid, date, sentence, k)`` where ``k`` counts earlier calls for the
    same proposition, so results do not depend on the order concurrent calls finish in.
    ``sigma=0`` returns the inner proof unchanged.
    """

    def __init__(self, inner: Grounder, sigma: float, *, seed: int = 0) -> None:
        if not isinstance(sigma, int | float) or not math.isfinite(sigma) or not 0 <= sigma <= 1:
            raise ValueError(f"sigma must be in [0, 1], got {sigma!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be an integer ≥ 0, got {seed!r}")
        self.inner = inner
        self.sigma = float(sigma)
        self.seed = seed
        self._seen: dict[int, int] = {}
        self.calls = 0

    async def ground(self, prop: Proposition) -> Proof:
        self.calls += 1
        proof = await self.inner.ground(prop)
        if self.sigma == 0:
            return proof
        key = _stable_hash(prop.pid, prop.date, prop.sentence)
        k = self._seen.get(key, 0)
        self._seen[key] = k + 1
        rng = np.random.default_rng([self.seed, key, k])
        noisy = float(np.clip(proof.p_true + rng.normal(0.0, self.sigma), 0.0, 1.0))
        meta = {**proof.meta, "clean_p_true": proof.p_true, "noise_sigma": self.sigma}
        return Proof(noisy, proof.text, proof.key_factor, meta)
