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
    skip = pytest.mark.skip(reason="needs CUDA with >= 2 GPUs (run on the device machine)")
    for item in gpu_items:
        if gpus < 2:
            item.add_marker(skip)
