from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Run these tests with one intra-op thread, restoring the previous setting afterwards.

    On the shared 2-core machine, two OpenMP threads contending with other processes made the
    tiny (M ≤ 20) ops of these tests ~50× slower. The library itself never changes this setting.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
