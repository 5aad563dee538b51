"""Start N ranks of ``rt_worker.py`` on a FileStore rendezvous, with a hard timeout.

The ranks run in the smoke model's directory, so the runtime shim finds its
``commgroup-lint.toml`` there, as the linter does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from rt_seeded import SMOKE_DIR

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rt_worker.py")


def launch(scenario, world, tmp_path, *, device="cpu", attn_dp=2, timeout=120.0, env=None):
    tmp_path = str(tmp_path)
    init = "file://" + os.path.join(tmp_path, f"store-{scenario}-{world}")
    procs, outs = [], []
    child_env = dict(os.environ)
    for key in ("COMMGROUP_LINT_RUNTIME", "COMMGROUP_LINT_RUNTIME_LOG", "COMMGROUP_LINT_RUNTIME_PROFILE"):
        child_env.pop(key, None)
    child_env.setdefault("OMP_NUM_THREADS", "1")
    child_env.update(env or {})
    for rank in range(world):
        out = os.path.join(tmp_path, f"{scenario}-{world}-{rank}.json")
        log = open(os.path.join(tmp_path, f"{scenario}-{world}-{rank}.log"), "w")
        cmd = [sys.executable, WORKER, "--scenario", scenario, "--rank", str(rank), "--world", str(world),
               "--init", init, "--out", out, "--device", device, "--attn-dp", str(attn_dp)]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env, cwd=SMOKE_DIR), log))
        outs.append(out)
    deadline = time.monotonic() + timeout
    for proc, log in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p, _ in procs:
                p.kill()
            raise AssertionError(f"{scenario} on {world} ranks timed out; logs in {tmp_path}")
        finally:
            log.close()
    results = []
    for rank, out in enumerate(outs):
        logtext = open(os.path.join(tmp_path, f"{scenario}-{world}-{rank}.log")).read()
        if not os.path.exists(out):
            raise AssertionError(f"rank {rank} wrote no result:\n{logtext[-4000:]}")
        with open(out, encoding="utf-8") as fh:
            res = json.load(fh)
        if not res.get("ok"):
            raise AssertionError(f"rank {rank} failed:\n{res.get('error')}\n{logtext[-2000:]}")
        results.append(res)
    return results
