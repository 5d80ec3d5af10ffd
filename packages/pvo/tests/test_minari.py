"""minari import/export: a round trip, and clear errors for data the agents cannot use."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26.pvo.data import OfflineDataset, load_minari, make_dataset, save_minari

minari = pytest.importorskip("minari")
pytest.importorskip("h5py")
pytest.importorskip("PIL")


def _raw(root, dataset_id, episodes, monkeypatch):
    """A minari dataset written by minari itself (episodes: list of (obs, act, reward))."""
    from minari.data_collector import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    bufs = []
    for i, (obs, act, rew) in enumerate(episodes):
        t = len(act)
        bufs.append(EpisodeBuffer(id=i, observations=obs, actions=act, rewards=rew,
                                  terminations=np.zeros(t, bool), truncations=np.r_[np.zeros(t - 1, bool), True]))  # fmt: skip
    minari.create_dataset_from_buffers(dataset_id, bufs, env="Pendulum-v1", eval_env="Pendulum-v1")
    monkeypatch.delenv("MINARI_DATASETS_PATH")


def _episode(rng, t, d=3, k=1, nan=False):
    rew = rng.normal(size=t)
    if nan:
        rew[1] = np.nan
    return (rng.normal(size=(t + 1, d)).astype(np.float32),
            rng.uniform(-2, 2, (t, k)).astype(np.float32), rew)  # fmt: skip


def test_round_trip_by_id_and_by_folder(tmp_path):
    ds = make_dataset("medium", 4, seed=0)
    folder = save_minari(ds, "pendulum/medium-v0", root=tmp_path)
    for source in ("pendulum/medium-v0", folder):
        back = load_minari(source, root=tmp_path)
        np.testing.assert_allclose(back.obs, ds.obs, atol=1e-6)
        np.testing.assert_allclose(back.act, ds.act, atol=1e-6)
        np.testing.assert_allclose(back.reward, ds.reward, atol=1e-5)
        np.testing.assert_array_equal(back.done, ds.done)
    with pytest.raises(ValueError, match="already exists"):
        save_minari(ds, "pendulum/medium-v0", root=tmp_path)
    with pytest.raises(ValueError, match="namespace/name-v0"):
        save_minari(ds, "pendulum/medium", root=tmp_path)


def test_unequal_episodes_need_a_length_and_are_cropped(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    _raw(
        tmp_path,
        "pendulum/uneven-v0",
        [_episode(rng, 6), _episode(rng, 4), _episode(rng, 8)],
        monkeypatch,
    )
    with pytest.raises(ValueError, match="episode_length"):
        load_minari("pendulum/uneven-v0", root=tmp_path)
    ds = load_minari("pendulum/uneven-v0", episode_length=5, root=tmp_path)
    assert ds.act.shape == (2, 5, 1)
    assert ds.obs.shape == (2, 6, 3)
    with pytest.raises(ValueError, match="no episode has 9 steps"):
        load_minari("pendulum/uneven-v0", episode_length=9, root=tmp_path)


def test_bad_datasets_are_refused_naming_the_problem(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    _raw(tmp_path, "pendulum/nan-v0", [_episode(rng, 5, nan=True)], monkeypatch)
    with pytest.raises(ValueError, match="NaN"):
        load_minari("pendulum/nan-v0", root=tmp_path)
    wide = OfflineDataset("wide", rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 5, 1)),
                          np.zeros((2, 5)), np.zeros((2, 5)))  # fmt: skip
    save_minari(wide, "pendulum/wide-v0", root=tmp_path)
    with pytest.raises(ValueError, match="observation dim 4"):
        load_minari("pendulum/wide-v0", root=tmp_path)
    with pytest.raises(ValueError, match="no local minari dataset"):
        load_minari("pendulum/missing-v0", root=tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a minari dataset folder"):
        load_minari(tmp_path / "empty", root=tmp_path)
    with pytest.raises(TypeError, match="OfflineDataset"):
        save_minari({"obs": 1}, "pendulum/x-v0", root=tmp_path)
