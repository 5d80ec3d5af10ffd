"""Minari export round trip and episode frames / GIFs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import iclr26.mikasa as mk
from iclr26.mikasa import cli

minari = pytest.importorskip("minari")

# minari asks for a permalink, an author, an email and an algorithm name on every dataset
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _check_round_trip(ds, demos, seed, atol=1e-6):
    E, T = demos["obs"].shape[:2]
    assert ds.total_episodes == E
    assert ds.total_steps == E * T
    episodes = list(ds.iterate_episodes())
    assert [ep.id for ep in episodes] == list(range(E))
    for e, ep in enumerate(episodes):
        np.testing.assert_array_equal(ep.observations[:-1], demos["obs"][e])
        np.testing.assert_array_equal(ep.observations[-1], demos["final_obs"][e])
        np.testing.assert_array_equal(ep.actions, demos["action"][e])
        np.testing.assert_array_equal(ep.rewards, demos["reward"][e])
        np.testing.assert_array_equal(ep.terminations, demos["terminated"][e])
        np.testing.assert_array_equal(ep.truncations, demos["truncated"][e])
        np.testing.assert_array_equal(ep.infos["success"][1:], demos["success"][e])
        assert not ep.infos["success"][0]
    # the stored environment replays the stored episodes exactly (same seeds, same actions)
    env = ds.recover_environment()
    for e in (0, E - 1):
        ep = episodes[e]
        obs, _ = env.reset(seed=seed + e)
        np.testing.assert_array_equal(obs, ep.observations[0])
        for t in range(T):
            obs, r, term, trunc, info = env.step(ep.actions[t])
            # the one-environment path computes in Python floats, the batch in numpy: the two
            # agree to rounding (the touch tasks within 1e-6; pushed objects accumulate it)
            np.testing.assert_allclose(obs, ep.observations[t + 1], rtol=0, atol=atol)
            assert r == pytest.approx(ep.rewards[t], rel=0, abs=atol)
            assert (term, trunc) == (ep.terminations[t], ep.truncations[t])
        assert info["success"] == ep.infos["success"][-1]


def test_oracle_demos_round_trip_through_minari(tmp_path):
    demos = mk.collect_demos("ShellGameTouch-v0", "memory", 6, seed=3)
    assert demos["truncated"][:, -1].all()
    assert not demos["truncated"][:, :-1].any()
    assert not demos["terminated"].any()
    assert demos["success"][:, -1].all()  # the memory oracle solves every episode
    ds = mk.to_minari(demos, "mikasa/ShellGameTouch-memory-v0", env_id="ShellGameTouch-v0",
                      seed=3, root=tmp_path)  # fmt: skip
    _check_round_trip(ds, demos, 3)
    assert ds.spec.env_spec.kwargs["backend"] == "kinematic"
    # a second dataset with the same id is refused; load_dataset finds it under the root
    with pytest.raises(ValueError, match="already exists"):
        mk.to_minari(demos, "mikasa/ShellGameTouch-memory-v0", env_id="ShellGameTouch-v0",
                     root=tmp_path)  # fmt: skip


def test_state_mode_and_moving_task_round_trip(tmp_path):
    demos = mk.collect_demos("TakeItBack-v0", "state", 3, seed=11)
    ds = mk.to_minari(demos, "mikasa/TakeItBack-state-v0", env_id="TakeItBack-v0",
                      obs_mode="state", seed=11, root=tmp_path)  # fmt: skip
    _check_round_trip(ds, demos, 11, atol=1e-3)


def test_policy_object_rollouts_export(tmp_path):
    # any policy with reset/act can be rolled out and exported: here a cue-blind oracle instance
    policy = mk.MemorylessOracle("RememberColor3-v0", seed=4)
    demos = mk.collect_demos("RememberColor3-v0", policy, 5, seed=40)
    ds = mk.to_minari(demos, "mikasa/RememberColor3-blind-v0", env_id="RememberColor3-v0",
                      seed=40, root=tmp_path)  # fmt: skip
    _check_round_trip(ds, demos, 40)


@pytest.mark.slow
def test_bc_rollouts_export(tmp_path):
    pytest.importorskip("torch")
    train = mk.collect_demos("RememberColor3-v0", "memory", 8, seed=0)
    bc = mk.BC("mlp", hidden=16, epochs=2, seed=0).fit(train)
    demos = mk.collect_demos("RememberColor3-v0", bc, 4, seed=500)
    assert demos["obs"].shape == train["obs"][:4].shape
    ds = mk.to_minari(demos, "mikasa/RememberColor3-bc-mlp-v0", env_id="RememberColor3-v0",
                      seed=500, root=tmp_path)  # fmt: skip
    _check_round_trip(ds, demos, 500)


BAD_EXPORTS = [
    (lambda d: {k: v for k, v in d.items() if k != "final_obs"}, {}, ValueError, "final_obs"),
    (lambda d: d, {"obs_mode": "state"}, ValueError, "obs_mode"),
    (lambda d: d, {"env_id": "RememberColor3-v0"}, ValueError, "T = 90"),
    (lambda d: d, {"env_id": "Nope-v0"}, ValueError, "valid ids"),
    (lambda d: d, {"dataset_id": "no version"}, ValueError, "dataset_id"),
    (lambda d: {**d, "action": d["action"][:, :, :2]}, {}, ValueError, "action"),
    (lambda d: {**d, "reward": np.full_like(d["reward"], np.nan)}, {}, ValueError, "NaN"),
    (lambda d: {**d, "done": ~d["done"]}, {}, ValueError, "done"),
    (lambda d: {**d, "truncated": np.ones_like(d["truncated"]), "done": np.ones_like(d["done"])},
     {}, ValueError, "last step"),
    (lambda d: [1, 2], {}, TypeError, "mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "kw", "exc", "needle"), BAD_EXPORTS,
                         ids=[str(i) for i in range(len(BAD_EXPORTS))])  # fmt: skip
def test_to_minari_refuses_bad_input(edit, kw, exc, needle, tmp_path):
    demos = mk.collect_demos("ShellGameTouch-v0", "memory", 2, seed=0)
    args = {"dataset_id": "mikasa/Bad-v0", "env_id": "ShellGameTouch-v0", "root": tmp_path, **kw}
    with pytest.raises(exc, match=needle):
        mk.to_minari(edit(demos), args.pop("dataset_id"), **args)
    assert not (tmp_path / "mikasa" / "Bad-v0").exists()  # nothing half-written


def test_early_termination_is_refused(tmp_path):
    demos = mk.collect_demos("RememberColor3-v0", "memory", 2, seed=0, terminate_on_success=True)
    assert demos["terminated"][:, :-1].any()  # the memory oracle succeeds before T
    with pytest.raises(ValueError, match="terminate_on_success"):
        mk.to_minari(demos, "mikasa/Early-v0", env_id="RememberColor3-v0", root=tmp_path)


def _has_colour(frame, rgb, tol=40):
    return bool((np.abs(frame.astype(int) - rgb).max(-1) < tol).sum() >= 10)


def test_kinematic_frames_show_the_cue_then_hide_it(tmp_path):
    oracle = mk.make_oracle("memory", "ShellGameTouch-v0")
    T = mk.get_spec("ShellGameTouch-v0").T
    steps = [0, 10, 40, T]
    frames = mk.episode_frames("ShellGameTouch-v0", oracle, seed=0, size=96, steps=steps)
    assert frames.shape == (4, 96, 96, 3)
    assert frames.dtype == np.uint8
    red = np.array([255, 0, 0])  # the ball (colour index 0), visible only during the cue
    assert _has_colour(frames[0], red)
    assert not _has_colour(frames[-1], red)
    assert not np.array_equal(frames[1], frames[2])  # the gripper moves
    path = mk.write_gif(frames, tmp_path / "ep.gif", fps=20)
    from PIL import Image

    with Image.open(path) as im:
        assert im.n_frames == 4
        assert im.size == (96, 96)
        assert im.info["duration"] == 50
        im.seek(0)
        first = np.asarray(im.convert("RGB"))
    assert _has_colour(first, red)


def _mujoco_renders() -> bool:
    try:
        env = mk.make("RememberColor3-v0", render_mode="rgb_array")
        env.reset(seed=0)
        env.render()
        env.close()
        return True
    except Exception:  # no OpenGL context on this machine
        return False


@pytest.mark.slow
def test_mujoco_frames(tmp_path):
    if not _mujoco_renders():
        pytest.skip("MuJoCo cannot render here (no OpenGL context)")
    oracle = mk.make_oracle("memory", "RememberColor3-v0")
    frames = mk.episode_frames("RememberColor3-v0", oracle, seed=0, backend="mujoco", size=64)
    assert frames.shape == (61, 64, 64, 3)
    assert frames.dtype == np.uint8
    assert not np.array_equal(frames[0], frames[-1])  # the cue cube is hidden, three appear


def test_cli_collect_and_gif(tmp_path, capsys):
    root = tmp_path / "datasets"
    npz = tmp_path / "demos.npz"
    argv = ["collect", "RememberColor3-v0", "--episodes", "3", "--seed", "5", "--npz", str(npz),
            "--minari-id", "mikasa/RC3-v0", "--minari-root", str(root)]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "success at end 1.000" in out
    assert "3 episodes, 180 steps" in out
    demos = mk.load_demos(npz)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from minari import MinariDataset

        ds = MinariDataset(root / "mikasa" / "RC3-v0" / "data")
    _check_round_trip(ds, demos, 5)
    assert cli.main(argv) == 2  # the id exists now: refused before collecting
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["collect", "RememberColor3-v0"]) == 2
    assert "--npz" in capsys.readouterr().err
    gif = tmp_path / "ep.gif"
    assert cli.main(["play", "RememberColor3-v0", "--episodes", "1", "--gif", str(gif),
                     "--size", "48"]) == 0  # fmt: skip
    assert "61 frames" in capsys.readouterr().out
    assert gif.stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["play", "RememberColor3-v0", "--gif", "a.gif", "--fps", "0"], "argument --fps"),
        (["play", "RememberColor3-v0", "--gif", "a.gif", "--size", "4"], "argument --size"),
        (["collect", "RememberColor3-v0", "--episodes", "0"], "argument --episodes"),
        (["collect", "RememberColor3-v0", "--policy", "random"], "argument --policy"),
    ],
)
def test_new_cli_arguments_fail_at_parse_time(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_a_gif_path_without_the_gif_suffix_is_refused_before_any_episode(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    assert cli.main(["play", "RememberColor3-v0", "--gif", str(target)]) == 2
    assert "must end in .gif" in capsys.readouterr().err
    assert target.read_text() == "keep me"
