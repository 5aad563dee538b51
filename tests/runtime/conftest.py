import os
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)  # the smoke model: ``import smoke_model``


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        gpus = 0
    for item in gpu_items:
        needed = item.get_closest_marker("gpu").kwargs.get("devices", 2)
        if gpus < needed:
            item.add_marker(pytest.mark.skip(reason=f"needs CUDA with >= {needed} GPUs (run on the device machine)"))


@pytest.fixture(autouse=True)
def _no_registered_segments_left():
    """Segments a test registered (a stand-in pool's CPU tensors) stay registered after the test
    frees their memory, and the allocator hands those addresses to later tests' buffers: forget
    them after each test, as a real pool's deregistration would."""
    yield
    table = sys.modules.get("commgroup_lint.runtime._table")  # only where a test imported the shim
    if table is not None:
        table.TABLE.segments.clear()


@pytest.fixture(scope="session")
def groups(tmp_path_factory):
    """A gloo world of one rank and two groups over it, labelled ``a`` and ``b``: the same
    ranks, two groups (the shim tells them apart by identity, not membership)."""
    import torch.distributed as dist

    from commgroup_lint import runtime

    if not dist.is_initialized():
        store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    a = dist.new_group([0], group_desc="group_a")
    b = dist.new_group([0], group_desc="group_b")
    yield runtime.name_group(a, "a"), runtime.name_group(b, "b")
    dist.destroy_process_group()
