"""A user's project that never imports commgroup_lint: its own symmetric-memory context,
declared only in its pyproject.toml with the linter's keys, and a script starting two ranks
with multiprocessing's spawn method. The shim reaches the ranks through the environment
variable and the start-up hook alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PYPROJECT = textwrap.dedent(
    """\
    [tool.commgroup-lint.extend-profile.contexts."mypkg.alloc.symmetric"]
    param = "group"
    index = 0
    """
)

# torch is first imported here, while mypkg.alloc is being imported: the shim is installed
# then, before `symmetric` exists, and must still hook it.
ALLOC = textwrap.dedent(
    """\
    import contextlib

    import torch


    @contextlib.contextmanager
    def symmetric(group):
        \"\"\"The project's symmetric pool: memory allocated inside is registered with `group`.\"\"\"
        yield
    """
)

MAIN = textwrap.dedent(
    """\
    from mypkg.alloc import symmetric  # bound before any rank starts

    import multiprocessing
    import sys

    import torch
    import torch.distributed as dist


    def rank_main(rank, init, device):
        if device == "cuda":
            torch.cuda.set_device(rank)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=init, rank=rank, world_size=2)
        tp = dist.new_group([0, 1])
        ep = dist.new_group([0, 1])
        with symmetric(tp):  # CONTEXT
            buf = torch.ones(1024, device=device)  # ALLOCATION
        dist.all_reduce(buf, group=tp)  # RIGHT GROUP
        dist.all_reduce(buf, group=ep)  # WRONG GROUP
        dist.barrier()
        dist.destroy_process_group()


    if __name__ == "__main__":
        spawn = multiprocessing.get_context("spawn")
        ranks = [spawn.Process(target=rank_main, args=(r, sys.argv[1], sys.argv[2])) for r in range(2)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join(120)
        sys.exit(max(p.exitcode or 0 for p in ranks))
    """
)

# The same ranks under torchrun (env:// rendezvous, one process per rank).
TORCHRUN_MAIN = textwrap.dedent(
    """\
    import torch.distributed as dist

    from main import rank_main

    if __name__ == "__main__":
        dist.init_process_group("gloo")  # torchrun's environment; rank_main's own init is skipped
        rank_main(dist.get_rank(), None, "cpu")
    """
)

UNRELATED_TEST = "import torch\n\n\ndef test_unrelated():\n    assert torch.ones(2).sum().item() == 2.0\n"


def line_of(marker: str, source: str = MAIN) -> int:
    return next(i for i, text in enumerate(source.splitlines(), 1) if text.rstrip().endswith(f"# {marker}"))


def make_project(root: Path) -> Path:
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "alloc.py").write_text(ALLOC)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "main.py").write_text(MAIN)
    (root / "torchrun_main.py").write_text(TORCHRUN_MAIN)
    (root / "test_unrelated.py").write_text(UNRELATED_TEST)
    return root


# Megatron-Core's own NCCL allocator: a pool registered with a group (``register_mem_pool``) at
# the exit of ``nccl_mem(pool, group=...)``. Declared to the shim as a context (the Megatron
# profile's entry, written here as a user would); ``init()`` is never called (it turns NVLink
# multicast on).
MEGATRON_PYPROJECT = textwrap.dedent(
    """\
    [tool.commgroup-lint.extend-profile.contexts."megatron.core.nccl_allocator.nccl_mem"]
    param = "group"
    index = 3
    """
)

MEGATRON_MAIN = textwrap.dedent(
    """\
    import multiprocessing
    import sys

    import torch
    import torch.distributed as dist
    from megatron.core import nccl_allocator


    def rank_main(rank, init):
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=2,
                                device_id=torch.device("cuda", rank))
        dp = dist.new_group([0, 1])
        other = dist.new_group([0, 1])
        pool = nccl_allocator.create_nccl_mem_pool(symmetric=True)
        with nccl_allocator.nccl_mem(pool, group=dp):  # CONTEXT
            buf = torch.ones(1 << 20, device="cuda")  # ALLOCATION
        dist.all_reduce(buf, group=dp)  # RIGHT GROUP
        dist.all_reduce(buf, group=other)  # WRONG GROUP
        torch.cuda.synchronize()
        print(f"sum {buf[0].item()}\\n", end="", flush=True)  # one write: the ranks share stdout
        dist.barrier()
        dist.destroy_process_group()


    if __name__ == "__main__":
        spawn = multiprocessing.get_context("spawn")
        ranks = [spawn.Process(target=rank_main, args=(r, sys.argv[1])) for r in range(2)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join(300)
        sys.exit(max(p.exitcode or 0 for p in ranks))
    """
)


def make_megatron_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(MEGATRON_PYPROJECT)
    (root / "main.py").write_text(MEGATRON_MAIN)
    return root


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without the shim's variables (the GPU host's multicast settings are kept)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMGROUP_LINT_RUNTIME") and k != "RANK"}
    env.setdefault("OMP_NUM_THREADS", "1")
    return {**env, **extra}


def run_ranks(root: Path, log: Path, *argv: str, mode: str = "report", python: str = sys.executable,
              **env: str) -> subprocess.CompletedProcess[str]:
    """``python main.py INIT ARGV...`` in ``root``, the shim on through the environment only."""
    init = "file://" + str(root / "store")
    return subprocess.run(
        [python, "main.py", init, *argv], cwd=root, capture_output=True, text=True, timeout=540,
        env=clean_env(COMMGROUP_LINT_RUNTIME=mode, COMMGROUP_LINT_RUNTIME_LOG=str(log), **env),
    )
