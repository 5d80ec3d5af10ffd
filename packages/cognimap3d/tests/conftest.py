import numpy as np
import pytest

from iclr26.cognimap3d.data import RevisitWorld, make_visits


@pytest.fixture(scope="session")
def world():
    return RevisitWorld(seed=0)


@pytest.fixture(scope="session")
def visits(world):
    return make_visits(world, 2, 24)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
