import pytest
import torch
from threadpoolctl import threadpool_limits

from helpers import TINY, make_confounded


@pytest.fixture
def tiny():
    return dict(TINY)


@pytest.fixture
def data():
    return make_confounded()


@pytest.fixture(scope="session", autouse=True)
def _torch_threads():
    # Tiny networks gain nothing from intra-op threads, and on a busy 2-core machine OpenMP
    # spinning makes them many times slower: tests run torch single-threaded. Session scope, so
    # that module-scoped fixtures that fit models run single-threaded too.
    torch.set_num_threads(1)
    with threadpool_limits(1):  # likewise OpenMP in scikit-learn's gradient boosting
        yield
