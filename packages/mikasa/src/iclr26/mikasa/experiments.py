"""``reproduce`` and ``bench`` of MIKASA at CPU scale (kinematic backend, MuJoCo subset).

reproduce — the paper's claim that tasks needing memory defeat memoryless agents and are solved
by agents with memory, in four parts:

* O: scripted oracles on every tabletop task (memory ≥ 0.95, state-mode ≥ 0.95, cue-blind inside
  the binomial 99 % interval around its analytic chance level), scored by success at the end;
* L: the leak probe (memory observations after the cue ≤ chance + 0.05; cue and state ≈ 1);
* E1: behaviour cloning from memory-oracle demonstrations with MLP, frame-stack(4), GRU (+ LSTM
  and a causal transformer in the default run): memoryless ≈ chance or below, memory solves it;
* M: the memory oracle on the MuJoCo backend (the semantics transfer to physics);
* D: behaviour cloning on RememberColor3 with few and many demonstrations, state and memory mode;
* E2: PPO-MLP in state mode, PPO-MLP and PPO-GRU in memory mode on ShellGameTouch (the
  default run: 500,000 steps per run, three seeds for the two memory-mode agents);
* S: the moving-object tasks (ShellGamePush, Intercept*, TakeItBack): memory, state and
  memoryless oracles on the kinematic backend and the memory oracle on MuJoCo.

bench — environment steps per second: the batched kinematic backend (1,024 environments), the
MuJoCo backend against a bare ``mujoco.mj_step`` loop on the same model, and popgym / MiniGrid
memory tasks when the ``[peers]`` extra is installed.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from iclr26.mikasa.leakage import leak_probe
from iclr26.mikasa.oracles import evaluate, make_oracle
from iclr26.mikasa.tasks import TASKS, get_spec
from iclr26.shared import Report, timeit
from iclr26.shared import progress as progress_bar

__all__ = [
    "bench",
    "binomial_interval",
    "colour_diagnosis",
    "peer_experiment",
    "ppo_experiment",
    "reproduce",
]

PACKAGE = "iclr26-mikasa"
BACKENDS = ("gymnasium", "mujoco", "torch", "scikit-learn", "popgym", "minigrid")
CLAIM = (
    "Tasks that need memory defeat memoryless agents and are solved by agents with memory "
    "(MIKASA-style tasks re-implemented on a kinematic and a MuJoCo backend)."
)


def binomial_interval(p: float, n: int, level: float = 0.99) -> tuple[float, float]:
    """Central interval of Binomial(n, p)/n holding at least ``level`` of the mass (exact)."""
    pmf = np.array([math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)])
    cdf = np.cumsum(pmf)
    tail = (1 - level) / 2
    lo = int(np.searchsorted(cdf, tail + 1e-12, side="right"))
    hi = int(np.searchsorted(cdf, 1 - tail - 1e-12, side="left"))
    return lo / n, min(hi, n) / n


def _oracles(report: Report, n: int, seed: int, progress: bool) -> None:
    rows, ok_mem, ok_state, ok_blind = [], True, True, True
    for env_id in progress_bar(list(TASKS), desc="oracles", enabled=progress):
        spec = TASKS[env_id]
        r = {k: evaluate(env_id, make_oracle(k, spec, seed=seed), n, seed=seed) for k in
             ("memory", "state", "memoryless")}  # fmt: skip
        chance = spec.chance_success
        lo, hi = binomial_interval(chance, n)
        blind = r["memoryless"]["success_at_end"]
        inside = lo <= blind <= hi
        ok_mem &= r["memory"]["success_at_end"] >= 0.95
        ok_state &= r["state"]["success_at_end"] >= 0.95
        ok_blind &= inside
        rows.append({
            "task": spec.name, "T": spec.T, "act_start": spec.act_start,
            "memory oracle": r["memory"]["success_at_end"],
            "state oracle": r["state"]["success_at_end"],
            "cue-blind": blind, "cue-blind once": r["memoryless"]["success_once"],
            "chance": chance, "99% interval": f"[{lo:.3f}, {hi:.3f}]",
        })  # fmt: skip
    report.add_table(
        f"O: oracle success at the end of the episode ({n} episodes per task, kinematic backend)",
        rows,
    )
    report.check("memory oracle ≥ 0.95 on every task", ok_mem)
    report.check("state-mode oracle ≥ 0.95 on every task", ok_state)
    report.check(
        "cue-blind oracle inside the 99% binomial interval of chance on every task", ok_blind
    )
    report.metric("oracle_rows", rows)


def _spatial(
    report: Report, n: int, n_mujoco: int, seed: int, progress: bool, mujoco_all: bool = True
) -> None:
    """S: oracles on the moving-object tasks, kinematic; MuJoCo on all (or one per family)."""
    from iclr26.mikasa.spatial import SPATIAL_TASKS

    rows, ok_mem, ok_state, ok_blind, ok_mj = [], True, True, True, True
    ok_grab, families = True, set()
    for env_id in progress_bar(list(SPATIAL_TASKS), desc="moving-object tasks", enabled=progress):
        spec = SPATIAL_TASKS[env_id]
        metric = spec.success_metric
        r = {k: evaluate(env_id, make_oracle(k, spec, seed=seed), n, seed=seed)[metric] for k in
             ("memory", "state", "memoryless")}  # fmt: skip
        ok_mem &= r["memory"] >= 0.95
        ok_state &= r["state"] >= 0.95
        if spec.chance_success is not None:
            lo, hi = binomial_interval(spec.chance_success, n)
            ok_blind &= lo <= r["memoryless"] <= hi
        elif spec.family == "rotate":  # a fixed guess of the uniform initial yaw
            lo, hi = binomial_interval(2 * spec.goal_radius / (2 * np.pi), n)
            ok_blind &= lo <= r["memoryless"] <= hi
        elif spec.family == "intercept_grab":
            ok_grab &= r["memoryless"] <= r["memory"] - 0.3
        else:
            ok_blind &= r["memoryless"] <= r["memory"] - 0.3
        row = {
            "task": spec.name, "T": spec.T, "metric": metric, "memory oracle": r["memory"],
            "state oracle": r["state"], "memoryless": r["memoryless"],
            "chance": spec.chance_success if spec.chance_success is not None else "none",
            "MuJoCo memory oracle": "-", "MuJoCo episodes": 0, "MuJoCo seconds": "-",
        }  # fmt: skip
        if mujoco_all or spec.family not in families:
            families.add(spec.family)
            t0 = time.perf_counter()
            oracle = make_oracle("memory", spec)
            mj = evaluate(env_id, oracle, n_mujoco, seed=seed, backend="mujoco")[metric]
            ok_mj &= mj >= 0.75
            row.update({"MuJoCo memory oracle": mj, "MuJoCo episodes": n_mujoco,
                        "MuJoCo seconds": time.perf_counter() - t0})  # fmt: skip
        rows.append(row)
    report.add_table(
        f"S: moving-object tasks, oracles ({n} kinematic episodes; MuJoCo "
        f"{'every task' if mujoco_all else 'one task per family'})",
        rows,
    )
    report.check("moving-object tasks: memory and state oracles ≥ 0.95", ok_mem and ok_state)
    report.check(
        "moving-object tasks: memoryless oracle inside the 99% binomial interval of its level "
        "(ShellGame 1/3; Rotate 0.2/2π, a fixed guess of the initial yaw) or ≥ 0.3 below the "
        "memory oracle (Intercept, TakeItBack)",
        ok_blind,
    )
    report.check("InterceptGrab: memoryless oracle ≥ 0.3 below the memory oracle", ok_grab)
    report.check("moving-object tasks: memory oracle ≥ 0.75 on the MuJoCo backend", ok_mj)


def _leaks(report: Report, tasks: list[str], n: int, seed: int, progress: bool) -> None:
    rows, ok = [], True
    for env_id in progress_bar(tasks, desc="leak probe", enabled=progress):
        after = leak_probe(env_id, phase="after_cue", policy="random", n_episodes=n, seed=seed)
        cue = leak_probe(env_id, phase="cue", n_episodes=n, seed=seed)
        state = leak_probe(env_id, phase="after_cue", obs_mode="state", n_episodes=n, seed=seed)
        bound = max(after["chance"], after["majority"]) + 0.05
        good = after["accuracy"] <= bound and cue["accuracy"] >= 0.9 and state["accuracy"] >= 0.9
        ok &= good
        rows.append({
            "task": get_spec(env_id).name, "memory, after cue": after["accuracy"],
            "chance 1/K": after["chance"], "memory, cue": cue["accuracy"],
            "state, after cue": state["accuracy"], "held": good,
        })  # fmt: skip
    report.add_table(
        f"L: leak probe, held-out accuracy of predicting the target ({n} episodes)", rows
    )
    report.check("no target leak after the cue; the cue and the state mode reveal it", ok)


def _bc(
    report: Report, policies_of: dict[str, list[str]], seeds: list[int], n_demos: int,
    epochs: int, n_eval: int, progress: bool,
) -> tuple[dict, Any]:  # fmt: skip
    import torch

    from iclr26.mikasa.agents import BC
    from iclr26.mikasa.oracles import collect_demos

    torch.set_num_threads(1)
    results: dict[tuple[str, str], list[float]] = {}
    rows, keep = [], None
    jobs = [(t, p, s) for t, policies in policies_of.items() for s in seeds for p in policies]
    demos_cache: dict[tuple[str, int], Any] = {}
    for env_id, kind, s in progress_bar(jobs, desc="E1 behaviour cloning", enabled=progress):
        if (env_id, s) not in demos_cache:
            demos_cache[(env_id, s)] = collect_demos(env_id, "memory", n_demos, seed=1000 * s)
        t0 = time.perf_counter()
        bc = BC(kind, hidden=64, epochs=epochs, lr=3e-3, seed=s).fit(demos_cache[(env_id, s)])
        r = evaluate(env_id, bc, n_eval, seed=10_000 + 1000 * s)
        results.setdefault((env_id, kind), []).append(r["success_at_end"])
        rows.append({"task": get_spec(env_id).name, "policy": kind, "seed": s,
                     "success at end": r["success_at_end"], "success once": r["success_once"],
                     "train s": time.perf_counter() - t0})  # fmt: skip
        if kind == "gru" and keep is None:
            keep = (env_id, bc)
    summary = []
    for (env_id, kind), vals in results.items():
        spec = get_spec(env_id)
        summary.append({"task": spec.name, "policy": kind, "mean": float(np.mean(vals)),
                        "std": float(np.std(vals)), "seeds": len(vals),
                        "chance": spec.chance_success})  # fmt: skip
    report.add_table(
        f"E1: behaviour cloning from {n_demos} memory-oracle episodes, success at the end "
        f"({n_eval} evaluation episodes, mean ± std over seeds)",
        summary,
    )
    report.add_table("E1 per run", rows)
    return results, keep


def _e1_checks(report: Report, results: dict) -> None:
    sg = "MikasaLite/ShellGameTouch-v0"
    mlp, gru = np.mean(results[(sg, "mlp")]), np.mean(results[(sg, "gru")])
    report.check(
        "ShellGameTouch: BC-GRU beats BC-MLP by ≥ 0.3",
        gru >= mlp + 0.3, f"GRU {gru:.3f}, MLP {mlp:.3f}",
    )  # fmt: skip
    report.check(
        "ShellGameTouch: memoryless BC-MLP is no better than chance (1/3) + 0.1",
        mlp <= 1 / 3 + 0.1, f"MLP {mlp:.3f}",
    )  # fmt: skip
    for (env_id, kind), vals in results.items():
        if env_id != sg and kind == "gru":
            mlp_o = np.mean(results[(env_id, "mlp")])
            v = float(np.mean(vals))
            report.check(
                f"{get_spec(env_id).name}: BC-GRU beats BC-MLP by ≥ 0.3",
                v >= mlp_o + 0.3, f"GRU {v:.3f}, MLP {mlp_o:.3f}",
            )  # fmt: skip


def _mujoco(report: Report, tasks: list[str], n: int, seed: int) -> None:
    rows, ok = [], True
    for env_id in tasks:
        t0 = time.perf_counter()
        mem = evaluate(env_id, make_oracle("memory", env_id), n, seed=seed, backend="mujoco")
        blind = evaluate(env_id, make_oracle("memoryless", env_id, seed=seed), n, seed=seed,
                         backend="mujoco")  # fmt: skip
        ok &= mem["success_at_end"] >= 0.9
        rows.append({"task": get_spec(env_id).name, "memory oracle": mem["success_at_end"],
                     "cue-blind": blind["success_at_end"],
                     "chance": get_spec(env_id).chance_success,
                     "episodes": n, "seconds": time.perf_counter() - t0})  # fmt: skip
    report.add_table("M: oracles on the MuJoCo backend (physical gripper and contacts)", rows)
    report.check("memory oracle ≥ 0.9 on the MuJoCo backend", ok)


def colour_diagnosis(
    variants: tuple[tuple[str, str, int, int], ...] = (
        ("mlp", "state", 30, 300),
        ("mlp", "state", 20, 10_000),
    ),
    *,
    env_id: str = "MikasaLite/RememberColor3-v0",
    n_eval: int = 100,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Why behaviour cloning fails on a colour task: memory, matching colour to cube, or data?

    Trains BC on oracle demonstrations (``(policy, obs_mode, epochs, n_demos)`` per variant,
    batches of 32 episodes, learning rate 3e-3; ``state`` mode hands the policy the target
    colour, so no memory is needed) and reports, at the end of held-out episodes (seeds disjoint
    from the demonstrations'), the success, how often the cube nearest to the gripper is the
    target (chance 1/K if the policy picks a cube without knowing which) and the median
    gripper-target distance. Observations are standardised (:class:`iclr26.mikasa.agents.BC`'s
    default).
    """
    from iclr26.mikasa.agents import BC
    from iclr26.mikasa.kinematic import KinematicVectorEnv
    from iclr26.mikasa.oracles import collect_demos

    spec = get_spec(env_id)
    rows = []
    demos_of: dict[str, Any] = {}
    for kind, mode, epochs, n_demos in variants:
        if n_demos > 100_000:  # the held-out episodes start at seed + 100,000
            raise ValueError(f"n_demos must be <= 100,000, got {n_demos}")
        key = f"{mode}/{n_demos}"
        if key not in demos_of:
            demos_of[key] = collect_demos(env_id, "state" if mode == "state" else "memory",
                                          n_demos, seed=seed, obs_mode=mode)  # fmt: skip
        demos = demos_of[key]
        t0, c0 = time.perf_counter(), time.process_time()
        bc = BC(kind, hidden=64, epochs=epochs, lr=3e-3, seed=seed, obs_mode=mode).fit(demos)
        train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
        env = KinematicVectorEnv(spec, n_eval, obs_mode=mode)
        obs, _ = env.reset(seed=seed + 100_000)
        bc.reset(n_eval)
        for _ in range(spec.T):
            obs, _, _, _, info = env.step(bc.act(obs))
        b = env.batch
        d = np.linalg.norm(env.kin.tcp[:, None, :] - b.touch_points, axis=-1)
        target = b.targets[:, 0]
        d_t = d[np.arange(n_eval), target]
        rows.append({
            "task": spec.name, "policy": f"BC-{kind}", "obs_mode": mode,
            "demonstrations": n_demos, "epochs": epochs,
            "gradient steps": epochs * -(-n_demos // 32), "train s": train_s,
            "train CPU s": train_cpu,
            "training loss": bc.losses_[-1], "success at end": float(info["success"].mean()),
            "nearest cube is the target": float((d.argmin(-1) == target).mean()),
            "chance": spec.chance_success, "median distance to target (m)": float(np.median(d_t)),
        })  # fmt: skip
    return rows


def _e1_figure(results: dict) -> Any:
    tasks = sorted({t for t, _ in results})
    policies = [p for p in ("mlp", "framestack", "gru", "lstm", "transformer", "slot_gru")
                if any((t, p) in results for t in tasks)]  # fmt: skip
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.2), squeeze=False)
    for ax, t in zip(axes[0], tasks, strict=True):
        means = [np.mean(results.get((t, p), [np.nan])) for p in policies]
        stds = [np.std(results.get((t, p), [np.nan])) for p in policies]
        ax.bar(
            policies,
            means,
            yerr=stds,
            color=[
                {"mlp": "#bbb", "framestack": "#999", "transformer": "#37a"}.get(p, "#3a7")
                for p in policies
            ],
        )
        ax.axhline(get_spec(t).chance_success, color="r", ls="--", lw=1, label="chance")
        ax.set_ylim(0, 1.05)
        ax.set_title(get_spec(t).name)
        ax.set_ylabel("success at end")
        ax.legend(fontsize=8)
    fig.suptitle("E1: behaviour cloning from memory-oracle demonstrations")
    fig.tight_layout()
    return fig


D_DEMOS = 10_000  # part D: demonstrations for BC on RememberColor3


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Run O, S, L, E1, D, M and E2; ``quick`` shrinks every part to fit in about two minutes."""
    cpu0 = time.process_time()
    report = Report(
        PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS,
        config={"quick": quick, "backend": "kinematic (E1, E2, O, L) and mujoco (M)",
                "e2_steps": 5_760 if quick else E2_STEPS},
    )  # fmt: skip
    cpu_rows: list[dict[str, Any]] = []

    def lap(part: str) -> None:
        done = sum(r["CPU s"] for r in cpu_rows)
        cpu_rows.append({"part": part, "CPU s": time.process_time() - cpu0 - done})

    n_oracle = 100 if quick else 200
    _oracles(report, n_oracle, seed, progress)
    lap("O: oracles")
    _spatial(report, n_oracle, 10 if quick else 20, seed, progress, mujoco_all=not quick)
    lap("S: moving-object oracles")
    leak_tasks = (
        ["MikasaLite/ShellGameTouch-v0", "MikasaLite/RememberColor3-v0"]
        if quick
        else [
            "MikasaLite/ShellGameTouch-v0", "MikasaLite/RememberColor3-v0",
            "MikasaLite/RememberColor9-v0", "MikasaLite/RememberShapeAndColor3x2-v0",
            "MikasaLite/BunchOfColors3-v0", "MikasaLite/ChainOfColors5-v0",
        ]
    )  # fmt: skip
    _leaks(report, leak_tasks, 300 if quick else 600, seed, progress)
    lap("L: leak probe")
    sg, rc3 = "MikasaLite/ShellGameTouch-v0", "MikasaLite/RememberColor3-v0"
    if quick:
        policies_of = {sg: ["mlp", "framestack", "gru"]}
        seeds, n_demos, epochs, n_eval = [seed], 300, 30, 100
    else:
        # RememberColor3 keeps MLP and GRU only (its check): part D shows that with 300
        # demonstrations every policy fails there for want of data, memory or not
        policies_of = {
            sg: ["mlp", "framestack", "gru", "lstm", "transformer", "slot_gru"],
            rc3: ["mlp", "gru"],
        }
        seeds, n_demos, epochs, n_eval = [seed, seed + 1], 300, 30, 200
    results, keep = _bc(report, policies_of, seeds, n_demos, epochs, n_eval, progress)
    _e1_checks(report, results)
    report.add_figure("e1_behaviour_cloning", _e1_figure(results))
    if keep is not None:
        from iclr26.mikasa.render import episode_strip

        report.add_figure("episode_strip_gru", episode_strip(keep[0], keep[1], seed=seed + 77))
    lap("E1: behaviour cloning")
    # few demonstrations against many: in state mode the target colour is given, so BC-MLP
    # fails there only for want of data; with enough, memory mode compares MLP and GRU
    d_variants = (("mlp", "state", 30, 300), ("mlp", "state", 20, D_DEMOS))
    if not quick:
        d_variants += (("mlp", "memory", 20, D_DEMOS), ("gru", "memory", 20, D_DEMOS))
    diag = colour_diagnosis(d_variants, seed=seed)
    report.add_table(
        "D: behaviour cloning on RememberColor3 (100 held-out episodes): does it fail to "
        "remember, or to match the colour to a cube from too few demonstrations?",
        diag,
    )
    got = {(r["policy"], r["obs_mode"], r["demonstrations"]): r["success at end"] for r in diag}
    state_mlp = got[("BC-mlp", "state", D_DEMOS)]
    report.check(
        f"RememberColor3, state mode (target colour given): BC-MLP from {D_DEMOS:,} "
        "demonstrations ≥ 0.8",
        state_mlp >= 0.8, f"{state_mlp:.3f} (300 demonstrations: "
        f"{got[('BC-mlp', 'state', 300)]:.3f})",
    )  # fmt: skip
    if not quick:
        mem_mlp, mem_gru = got[("BC-mlp", "memory", D_DEMOS)], got[("BC-gru", "memory", D_DEMOS)]
        report.check(
            f"RememberColor3, memory mode, {D_DEMOS:,} demonstrations: BC-GRU beats BC-MLP by "
            "≥ 0.3",
            mem_gru >= mem_mlp + 0.3, f"GRU {mem_gru:.3f}, MLP {mem_mlp:.3f}",
        )  # fmt: skip
    lap("D: colour diagnosis")
    m_tasks = [sg, rc3]
    if not quick:
        m_tasks += ["MikasaLite/RememberShape5-v0", "MikasaLite/BunchOfColors3-v0",
                    "MikasaLite/ChainOfColors3-v0"]  # fmt: skip
    _mujoco(report, m_tasks, 5 if quick else 20, seed)
    lap("M: MuJoCo oracles")
    if quick:  # two rollouts of 32 environments: the agents train end to end, no checks
        _e2(report, (sg,), tuple((k, m, 1) for k, m, _ in E2_RUNS), 5_760, 32, seed, progress,
            checks=False)  # fmt: skip
    else:
        _e2(report, (sg,), E2_RUNS, E2_STEPS, 128, seed, progress)
    lap("E2: PPO")
    report.add_table("CPU seconds per part (this process)", cpu_rows)
    report.metric("cpu_seconds", time.process_time() - cpu0)
    report.note(
        f"CPU time of this process: {time.process_time() - cpu0:.0f} s (wall time is larger "
        "when the machine is shared)."
    )
    if quick:
        report.note(
            "E2 in the quick run trains each PPO agent for two rollouts (5,760 steps): it shows "
            "that the agents train and act end to end, far too short to learn the task, "
            "so it has no checks; the default run trains for 500,000 steps per run."
        )
    report.note(
        "A re-implementation of MIKASA's task semantics with a floating gripper; the numbers "
        "are not MIKASA-Robo numbers. Actions are ignored until the act phase (hold_until_act), "
        "so no policy can store the cue in its gripper pose; success is scored at the end."
    )
    return report


# --- E2: PPO -----------------------------------------------------------------------------------
E2_VARIANTS = (("mlp", "state"), ("mlp", "memory"), ("gru", "memory"), ("transformer", "memory"))
# E2 in the default reproduce: the spec's three agents (PPO-MLP in state and memory mode,
# PPO-GRU in memory mode) at 500,000 steps per run, three seeds for the two the memory gap is
# about; the transformer (not in the spec's E2, 300 CPU s per 1 M steps) stays in `ppo`
E2_STEPS = 500_000
E2_RUNS = (("mlp", "state", 1), ("mlp", "memory", 3), ("gru", "memory", 3))


def _policy_name(kind: str) -> str:
    return f"PPO-{kind.upper() if len(kind) < 5 else kind}"


def _e2(
    report: Report, tasks: tuple[str, ...], runs: tuple[tuple[str, str, int], ...], n_steps: int,
    n_envs: int, seed: int, progress: bool, checks: bool = True,
) -> None:  # fmt: skip
    """Train and evaluate PPO for each ``(policy, obs_mode, n_seeds)`` in ``runs`` on ``tasks``.

    Run i of a variant uses seed ``seed + i`` for training and ``seed + i + 10,000`` for the 200
    evaluation episodes; the checks compare the means over seeds.
    """
    import torch

    from iclr26.mikasa.ppo import PPO

    torch.set_num_threads(1)
    rows, summary, curves = [], [], {}
    for env_id in tasks:
        spec = get_spec(env_id)
        got = {}
        for kind, mode, n_seeds in runs:
            vals = []
            for i in range(n_seeds):
                c0 = time.process_time()
                agent = PPO(kind, obs_mode=mode, num_envs=n_envs, minibatches=max(1, n_envs // 32),
                            total_steps=n_steps, seed=seed + i)  # fmt: skip
                agent.fit(env_id, progress=progress)
                cpu = time.process_time() - c0
                res = evaluate(env_id, agent, 200, seed=seed + i + 10_000)
                vals.append(res["success_at_end"])
                curves[(spec.name, kind, mode, seed + i)] = [
                    (h["env_steps"], h["success_at_end"]) for h in agent.history_
                ]
                last = agent.history_[-1]
                rows.append({
                    "task": spec.name, "policy": _policy_name(kind), "obs_mode": mode,
                    "seed": seed + i, "env steps": last["env_steps"],
                    "success at end": res["success_at_end"], "success once": res["success_once"],
                    "chance": spec.chance_success, "train seconds": last["seconds"],
                    "train CPU s": cpu, "env steps per CPU s": last["env_steps"] / cpu,
                })  # fmt: skip
            got[(kind, mode)] = float(np.mean(vals))
            summary.append({
                "task": spec.name, "policy": _policy_name(kind), "obs_mode": mode,
                "mean": float(np.mean(vals)), "std": float(np.std(vals)), "seeds": n_seeds,
                "chance": spec.chance_success,
            })  # fmt: skip
        if not checks:
            continue
        chance = spec.chance_success or 0.0
        if ("mlp", "state") in got:
            report.check(
                f"{spec.name}: PPO-MLP in state mode ≥ 0.8", got[("mlp", "state")] >= 0.8,
                f"{got[('mlp', 'state')]:.3f}",
            )  # fmt: skip
        if ("mlp", "memory") in got:
            mlp = got[("mlp", "memory")]
            report.check(f"{spec.name}: PPO-MLP in memory mode ≤ chance + 0.1",
                         mlp <= chance + 0.1, f"{mlp:.3f}")  # fmt: skip
            for kind in ("gru", "lstm", "transformer"):
                if (kind, "memory") in got:
                    name = _policy_name(kind)[4:]
                    v = got[(kind, "memory")]
                    report.check(
                        f"{spec.name}: PPO-{name} in memory mode beats PPO-MLP by ≥ 0.2",
                        v >= mlp + 0.2, f"{name} {v:.3f}, MLP {mlp:.3f}",
                    )  # fmt: skip
    what = (
        f"{n_steps:,} steps per run, {n_envs} environments, kinematic backend; 200 evaluation "
        "episodes, deterministic policy"
    )
    report.add_table(f"E2: PPO, success at the end ({what}; mean ± std over seeds)", summary)
    report.add_table("E2 per run", rows)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for (task, kind, mode, s), pts in curves.items():
        x, y = zip(*pts, strict=True)
        ax.plot(x, y, label=f"{task} {kind}/{mode} seed {s}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("training success at end (stochastic policy)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    report.add_figure("e2_ppo_learning_curves", fig)
    report.note(
        f"E2: the official runs use 50 M steps on 1,024 GPU environments; these runs are about "
        f"{50e6 / n_steps:,.0f}× shorter, so a check that does not hold here says 'not at "
        "this budget'. Training success is of the sampled (stochastic) policy, which rarely "
        "holds still enough to count; the tables score the deterministic policy (the mean)."
    )


def ppo_experiment(
    *,
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    steps: int | None = None,
    tasks: tuple[str, ...] | None = None,
    variants: tuple[tuple[str, str], ...] = E2_VARIANTS,
    seeds: int = 1,
) -> Report:
    """E2 on its own: PPO-MLP in state mode, PPO-MLP, PPO-GRU and PPO-transformer in memory mode.

    ``variants``: the (policy, obs_mode) runs, all four by default; a subset (e.g. one per
    process, to run them side by side) reports the checks whose runs it holds. ``seeds``: runs
    per variant (seeds ``seed``, ``seed + 1``, ...).

    The spec's expectation: state-mode MLP solves the task (it is an MDP there), memory-mode MLP
    stays at chance, memory-mode GRU (and transformer) succeeds on ShellGameTouch. ``steps``
    environment steps per run (default 1,000,000 on 128 environments; quick 30,000 on 32),
    minibatches of 32 whole episodes as upstream (1,024 environments / 32 minibatches), the
    official PPO defaults, observations normalised by running statistics. The default
    ``reproduce`` runs :data:`E2_RUNS` (three of the four agents, some with three seeds) at
    :data:`E2_STEPS` steps.
    """
    from iclr26.mikasa.ppo import PPO_POLICIES

    variants = tuple(tuple(v) for v in variants)
    if not variants or any(
        len(v) != 2 or v[0] not in PPO_POLICIES or v[1] not in ("memory", "state") for v in variants
    ):
        raise ValueError(
            f"variants must be (policy, obs_mode) pairs with policy in {PPO_POLICIES} and "
            f"obs_mode 'memory' or 'state'; got {variants!r}"
        )
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be an int >= 1, got {seeds!r}")
    n_steps = steps if steps is not None else (30_000 if quick else 1_000_000)
    n_envs = 32 if quick else 128
    tasks = tasks or ("MikasaLite/ShellGameTouch-v0",)
    report = Report(
        PACKAGE, "reproduce",
        "E2: PPO-MLP solves the task in state mode, stays at chance in memory mode, and "
        "PPO-GRU and PPO-transformer in memory mode do better than PPO-MLP (the memory gap "
        "under online RL).",
        seed=seed, backends=BACKENDS,
        config={"quick": quick, "steps": n_steps, "num_envs": n_envs, "seeds": seeds,
                "backend": "kinematic"},
    )  # fmt: skip
    runs = tuple((kind, mode, seeds) for kind, mode in variants)
    _e2(report, tasks, runs, n_steps, n_envs, seed, progress)
    return report


PEER_CHANCE = {"popgym-RepeatPreviousEasy-v0": 0.25, "MiniGrid-MemoryS7-v0": 0.5}


def peer_experiment(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """The memory-agent table on popgym RepeatPreviousEasy and MiniGrid-MemoryS7 (extra
    ``[peers]``): BC with MLP, frame-stack(4) and GRU from scripted experts, as E1 on our tasks.

    Default: 300 demonstrations, 60 epochs (16 episodes a batch), 200 evaluation episodes;
    quick: 100 demonstrations, 60 epochs, 50 episodes.
    """
    import torch

    from iclr26.mikasa.agents import BC
    from iclr26.mikasa.peers import PEERS, evaluate_peer, peer_demos

    torch.set_num_threads(1)
    n_demos, epochs, n_eval = (100, 60, 50) if quick else (300, 60, 200)
    kinds = ("mlp", "framestack", "gru")
    report = Report(
        PACKAGE, "reproduce",
        "On established memory benchmarks (popgym RepeatPreviousEasy, MiniGrid-MemoryS7) the "
        "same behaviour-cloning baselines show the memory gap seen on our tasks: the memoryless "
        "MLP stays near chance and the GRU solves the task.",
        seed=seed, backends=BACKENDS,
        config={"quick": quick, "demos": n_demos, "epochs": epochs, "eval_episodes": n_eval},
    )  # fmt: skip
    rows, got = [], {}
    for name in PEERS:
        t0 = time.perf_counter()
        demos = peer_demos(name, n_demos, seed=seed)
        collect_s = time.perf_counter() - t0
        for kind in kinds:
            t0 = time.perf_counter()
            bc = BC(kind, hidden=64, epochs=epochs, batch_size=16, seed=seed)
            bc.fit(demos, progress=progress)
            score = evaluate_peer(name, bc, n_eval, seed=seed + 100_000)
            got[(name, kind)] = score
            rows.append({
                "task": name, "policy": f"BC-{kind}", "score": score,
                "chance": PEER_CHANCE[name], "training loss": bc.losses_[-1],
                "seconds": time.perf_counter() - t0, "expert demos seconds": collect_s,
            })  # fmt: skip
    for name in PEERS:
        mlp, gru = got[(name, "mlp")], got[(name, "gru")]
        report.check(f"{name}: BC-MLP ≤ chance + 0.1", mlp <= PEER_CHANCE[name] + 0.1,
                     f"{mlp:.3f}")  # fmt: skip
        report.check(f"{name}: BC-GRU beats BC-MLP by ≥ 0.3", gru >= mlp + 0.3,
                     f"GRU {gru:.3f}, MLP {mlp:.3f}")  # fmt: skip
    report.add_table(
        f"Memory baselines on peer benchmarks ({n_demos} expert demonstrations, {epochs} epochs "
        "of 16-episode batches, hidden 64, "
        f"{n_eval} evaluation episodes; score: RepeatPrevious accuracy, MiniGrid success)",
        rows,
    )
    fig, ax = plt.subplots(figsize=(6, 3.2))
    width = 0.25
    for i, kind in enumerate(kinds):
        ax.bar(np.arange(len(PEERS)) + (i - 1) * width, [got[(n, kind)] for n in PEERS], width,
               label=f"BC-{kind}")  # fmt: skip
    for j, name in enumerate(PEERS):
        ax.hlines(PEER_CHANCE[name], j - 0.4, j + 0.4, colors="k", linestyles="--", lw=0.8)
    ax.set_xticks(range(len(PEERS)), [n.split("-")[1] for n in PEERS])
    ax.set_ylabel("score (dashed: chance)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    fig.tight_layout()
    report.add_figure("peer_memory_baselines", fig)
    report.note(
        "Discrete actions are regressed as fixed 3-d codes and decoded by the nearest code (BC "
        "regresses 3-d actions). MiniGrid demonstrations turn left until the cue is in view, "
        "then take the shortest path to the matching object (padding after the episode is "
        "masked out of the loss); evaluation stops at 60 steps."
    )
    return report


# --- bench ------------------------------------------------------------------------------------
def _steps_per_second(step, n_steps: int, batch: int, repeats: int) -> dict[str, float]:
    timing = timeit(lambda: [step() for _ in range(n_steps)], repeats=repeats, warmup=1)
    sps = batch * n_steps / timing.median
    spread = batch * n_steps / np.array([timing.max, timing.min])
    return {"steps/s": sps, "steps/s (slowest run)": spread[0], "steps/s (fastest run)": spread[1]}


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Environment steps per second of both backends and of popgym / MiniGrid memory tasks."""
    import gymnasium as gym
    import mujoco

    from iclr26.mikasa.kinematic import KinematicVectorEnv
    from iclr26.mikasa.physics import MujocoEnv

    report = Report(
        PACKAGE, "bench",
        "The batched kinematic backend steps ≥ 100,000 environments per second with 1,024 "
        "environments on one core, and the MuJoCo wrapper costs within 1.5× of a bare mj_step loop.",
        seed=seed, backends=BACKENDS, config={"quick": quick},
    )  # fmt: skip
    repeats = 3 if quick else 7
    rows = []
    rng = np.random.default_rng(seed)
    for env_id in ("MikasaLite/RememberColor3-v0", "MikasaLite/ChainOfColors7-v0"):
        spec = get_spec(env_id)
        for n in (1, 1024):
            env = KinematicVectorEnv(spec, n)
            env.reset(seed=seed)
            a = rng.uniform(-1, 1, size=(n, 3))
            r = _steps_per_second(
                lambda env=env, a=a: env.step(a), 50 if n > 1 else 500, n, repeats
            )
            rows.append({"environment": f"{spec.name} kinematic", "num_envs": n, **r})
    kin_1024 = rows[1]["steps/s"]
    # the resets alone (every environment starts over every T steps): environments reset per second
    reset_env = KinematicVectorEnv(get_spec("MikasaLite/RememberColor3-v0"), 1024)
    reset_env.reset(seed=seed)
    r = _steps_per_second(lambda env=reset_env: env.reset(), 5, 1024, repeats)
    rows.append({"environment": "RememberColor3 kinematic, reset() only (envs reset/s)",
                 "num_envs": 1024, **r})  # fmt: skip
    mj_rows, ratio_rows = [], []
    for env_id in ("MikasaLite/ShellGameTouch-v0", "MikasaLite/RememberColor3-v0"):
        spec = get_spec(env_id)
        env = MujocoEnv(spec)
        env.reset(seed=seed)
        a = np.zeros(3)

        def wrapped(env=env, a=a):
            if env._done:
                env.reset()
            env.step(a)

        m, d = env.model, mujoco.MjData(env.model)
        r_env = _steps_per_second(wrapped, 200, 1, repeats)
        r_bare = _steps_per_second(lambda m=m, d=d: mujoco.mj_step(m, d, nstep=20), 200, 1, repeats)
        # the ratio: wrapper and bare loop timed back to back, median over many pairs, so a
        # change of machine load between the two blocks above does not enter it
        pairs = []
        for _ in range(3 * repeats):
            t0 = time.perf_counter()
            for _ in range(100):
                wrapped()
            t1 = time.perf_counter()
            for _ in range(100):
                mujoco.mj_step(m, d, nstep=20)
            pairs.append((t1 - t0) / (time.perf_counter() - t1))
        ratio = float(np.median(pairs))
        ratio_rows.append({
            "task": spec.name, "wrapper/bare (median)": ratio,
            "25th percentile": float(np.percentile(pairs, 25)),
            "75th percentile": float(np.percentile(pairs, 75)), "pairs": len(pairs),
        })  # fmt: skip
        rows.append({"environment": f"{spec.name} MuJoCo env", "num_envs": 1, **r_env})
        rows.append({"environment": f"{spec.name} bare mj_step × 20", "num_envs": 1, **r_bare})
        mj_rows.append(ratio)
    for module, env_id, kw in (
        ("popgym", "popgym-RepeatPreviousEasy-v0", {}),
        ("popgym", "popgym-RepeatFirstEasy-v0", {}),
        ("minigrid", "MiniGrid-MemoryS7-v0", {}),
    ):
        if importlib.util.find_spec(module) is None:
            report.note(f"{env_id}: not measured ({module} is not installed; extra [peers])")
            continue
        __import__(module)
        env = gym.make(env_id, **kw)
        env.reset(seed=seed)
        space = env.action_space
        space.seed(seed)

        def peer(env=env, space=space):
            _, _, term, trunc, _ = env.step(space.sample())
            if term or trunc:
                env.reset()

        rows.append({"environment": env_id, "num_envs": 1,
                     **_steps_per_second(peer, 300, 1, repeats)})  # fmt: skip
    report.add_table("Environment steps per second (one process, median of repeats)", rows)
    report.add_table(
        "MuJoCo wrapper over a bare mj_step × 20 loop (100 steps each, timed back to back)",
        ratio_rows,
    )
    report.check("kinematic backend ≥ 100,000 env steps/s at 1,024 envs", kin_1024 >= 1e5,
                 f"{kin_1024:,.0f} steps/s")  # fmt: skip
    worst = max(mj_rows)
    report.check("MuJoCo wrapper within 1.5× of a bare mj_step loop", worst <= 1.5,
                 f"wrapper/bare time ratio {worst:.2f} (worst task)")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    report.note(
        f"Load average at the end of the run: {load:.1f} on {os.cpu_count()} CPUs (the rates "
        "are wall-clock; other jobs on the machine lower them). The 1,024-environment rates "
        "include the resets: every environment starts a new episode every T steps."
    )
    report.metric("load_average", load)
    report.metric("kinematic_steps_per_s_1024", kin_1024)
    report.metric("mujoco_wrapper_over_bare", worst)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [f"{r['environment']} ×{r['num_envs']}" for r in rows]
    ax.barh(names, [r["steps/s"] for r in rows], color="#37a")
    ax.set_xscale("log")
    ax.set_xlabel("environment steps per second")
    fig.tight_layout()
    report.add_figure("steps_per_second", fig)
    return report
