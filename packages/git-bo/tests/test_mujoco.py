"""Linear-policy search on gymnasium MuJoCo tasks, and the unit-cube adapter."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

from iclr26.git_bo import GITBO, MujocoPolicy, UnitCube  # noqa: E402


@pytest.fixture(scope="module")
def hopper():
    return MujocoPolicy("Hopper-v5", horizon=200, seed=3)


def test_dimensions():
    p = MujocoPolicy("Swimmer-v5", horizon=5)
    assert (p.obs_dim, p.act_dim, p.dim) == (8, 2, 16)
    assert p.bounds.shape == (2, 16)
    assert np.all(p.bounds[0] == -1)
    assert np.all(p.bounds[1] == 1)
    assert p.policy(np.arange(16.0)).shape == (2, 8)
    # row-major: row i of W holds the weights of action i
    assert np.all(p.policy(np.arange(16.0))[1] == np.arange(8.0, 16.0))


def test_seeded_returns_are_deterministic(hopper):
    x = np.random.default_rng(0).uniform(-1, 1, hopper.dim)
    assert hopper(x) == hopper(x)
    other = MujocoPolicy("Hopper-v5", horizon=200, seed=4)
    assert other(x) != hopper(x)  # another reset state, another return


def test_value_is_minus_the_return_of_an_independent_rollout(hopper):
    """The return recomputed here with gymnasium directly, action by action."""
    x = np.random.default_rng(1).uniform(-1, 1, hopper.dim)
    W = x.reshape(3, 11)
    env = gym.make("Hopper-v5")
    obs, _ = env.reset(seed=3)
    total = 0.0
    for _ in range(200):
        obs, r, term, trunc, _ = env.step(np.clip(W @ obs, -1.0, 1.0))
        total += r
        if term or trunc:
            break
    assert hopper(x) == pytest.approx(-total, rel=1e-12, abs=1e-12)


def test_episodes_average(hopper):
    two = MujocoPolicy("Hopper-v5", horizon=200, episodes=2, seed=3)
    x = np.random.default_rng(2).uniform(-1, 1, hopper.dim)
    r0, r1 = two.rollout(x, 3), two.rollout(x, 4)
    assert two(x) == pytest.approx(-(r0 + r1) / 2)


def test_horizon_caps_the_episode():
    p = MujocoPolicy("Swimmer-v5", horizon=3)
    # Swimmer never terminates: 3 steps of reward, each bounded in size
    assert abs(p(np.zeros(16))) < 1.0


def test_gitbo_improves_on_its_initial_design(hopper):
    f = UnitCube(hopper)
    res = GITBO(f.bounds, "rff", n_init=6, maximize=False, seed=0, n_candidates=200,
                origin="best").run(f, 12)  # fmt: skip
    assert res.n_evals == 12
    assert res.best_y <= float(np.min(res.y[:6]))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"env": "NoSuchEnv-v0"}, ValueError, "env"),
        ({"env": "CartPole-v1"}, ValueError, "continuous"),
        ({"env": 3}, TypeError, "env"),
        ({"horizon": 0}, ValueError, "horizon"),
        ({"horizon": 2.5}, TypeError, "horizon"),
        ({"episodes": 0}, ValueError, "episodes"),
        ({"seed": -1}, ValueError, "seed"),
    ],
)
def test_bad_construction(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MujocoPolicy(**{"horizon": 5, **kwargs})


@pytest.mark.parametrize("x", [np.zeros(15), np.full(16, np.nan)])
def test_bad_points(x):
    with pytest.raises(ValueError, match="x must"):
        MujocoPolicy("Swimmer-v5", horizon=2)(x)


class _Box:
    name, optimal_value = "box", None
    bounds = np.array([[-2.0, 10.0], [2.0, 20.0]])

    def __call__(self, x):
        return float(x[0] + x[1])


def test_unit_cube_maps_affinely():
    u = UnitCube(_Box())
    assert u.dim == 2
    assert u.name == "box"
    assert np.all(u.bounds == np.array([[0.0, 0.0], [1.0, 1.0]]))
    assert u.to_box([0.5, 0.25]) == pytest.approx([0.0, 12.5])
    assert u([0.0, 0.0]) == pytest.approx(8.0)
    assert u([1.0, 1.0]) == pytest.approx(22.0)


def test_unit_cube_bad_input():
    with pytest.raises(TypeError, match="callable"):
        UnitCube(3)

    class NoBounds:
        def __call__(self, x):
            return 0.0

    with pytest.raises(ValueError, match="bounds"):
        UnitCube(NoBounds())
    with pytest.raises(ValueError, match="u must"):
        UnitCube(_Box()).to_box([0.1, 0.2, 0.3])
