import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    """The arrays in these tests are small: a multi-threaded BLAS only spins on 2 cores."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield
