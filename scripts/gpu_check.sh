#!/usr/bin/env bash
# The runtime shim's GPU checks, for the H200 device machine (torch 2.11, NCCL, no network).
# From the repository root, each under the 10-minute limit of one command:
#
#     scripts/gpu_check.sh tests     # the GPU tests this machine's GPUs can run -> $OUT/gpu_tests.txt
#     scripts/gpu_check.sh bench     # benchmarks/runtime_overhead.py            -> $OUT/overhead_*.txt
#
# The benchmark runs on one GPU (per event in one process, then the smoke step on a one-rank
# NCCL world), or, with two GPUs or more, on two ranks as well.
#
# Wheels carried in .whl/ (megatron-core 0.16.1 for the Megatron test) go to /tmp/site. This
# checkout is installed editable, without dependencies or network, so that its start-up hook
# (commgroup_lint_runtime.pth) reaches the ranks the tests spawn. NVLink multicast stays off:
# on two GPUs or more, NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
# NVSHMEM_DISABLE_NVLS=1 are the machine's own settings; the script stops if one is missing
# and never changes them.
set -uo pipefail
what=${1:-tests}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
gpus=$(nvidia-smi -L | grep -c '^GPU')
if [ "$gpus" -ge 2 ]; then  # one GPU has no NVLink peer: nothing to keep off
    for var in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS; do
        if [ -z "${!var:-}" ]; then
            echo "error: $var is not set: refusing to run on $gpus GPUs (NVLink multicast must stay off)" >&2
            exit 2
        fi
    done
fi
export PYTHONUNBUFFERED=1
{
    nvidia-smi -L
    python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
                "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
    python3 -c 'import setuptools; print("setuptools", setuptools.__version__)'
} > "$OUT/env.txt" 2>&1
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -m pip install --no-index --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1; then
    cat "$OUT/install.txt"
    exit 1
fi
case "$what" in
    tests)
        timeout 540 python3 -m pytest tests/runtime/test_rt_gpu.py tests/runtime/test_rt_cuda.py -m gpu -v -rs -s \
            -p no:cacheprovider 2>&1 \
            | tee "$OUT/gpu_tests.txt"
        exit "${PIPESTATUS[0]}"
        ;;
    bench)
        timeout 150 python3 benchmarks/runtime_overhead.py --in-process --device cuda 2>&1 \
            | tee "$OUT/overhead_in_process.txt"
        status=${PIPESTATUS[0]}
        world=$(( gpus >= 2 ? 2 : 1 ))
        timeout 400 python3 benchmarks/runtime_overhead.py --device cuda --world "$world" 2>&1 \
            | tee "$OUT/overhead_cuda.txt"
        exit $(( status || PIPESTATUS[0] ))
        ;;
    *)
        echo "usage: $0 tests|bench" >&2
        exit 2
        ;;
esac
