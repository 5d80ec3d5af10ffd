import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny models and d x d products are faster on one thread on 2-core machines
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
