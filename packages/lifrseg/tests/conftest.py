import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny ops: one thread is much faster than two on a shared 2-core machine
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
