#!/usr/bin/env bash
# Everything that needs a CUDA GPU, as one call on a lent machine (benchmarks/RESULTS.md, "On a GPU"):
#   1. T-Maze at long corridors (8 cells of benchmarks/bench_tmaze.py at once on the one GPU), meanwhile
#      the GPU tests (pytest -m gpu: the CUDA scan and attention against CPU references, training in fp32,
#      bf16 and with torch.compile);
#   2. then, alone on the GPU, learner throughput in fp32 and bf16 and the long-context encoder tables.
#     bash benchmarks/gpu_session.sh [EPOCHS]      # T-Maze updates = EPOCHS x 300 (default 10)
# Logs and tables go to $OUT (default runs/gpu). Where the project is not installed (a bare GPU image),
# the wheels in .whl/ (the project's and its missing dependencies, README "On a GPU") go to /tmp/site first.
# GPU_DRY=1 runs every step at toy size on the CPU, to check the script itself.
set -u
EPOCHS=${1:-10}
OUT=${OUT:-runs/gpu}
ROOT=runs/gpu-tmaze
mkdir -p "$OUT" "$ROOT"
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
if [ -d .whl ] && ! python3 -P -c "import amago_pipe" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site PYTHONSAFEPATH=1  # the installed package, not the source folder in the working dir
fi
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
    python3 -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"
    nproc
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [ -n "${GPU_DRY:-}" ]; then  # toy sizes on the CPU
    TM_LIMIT=300 SIZES=(30 31 32) EPOCHS=1
    TM_SET=(--set stages.train.updates_per_epoch=3 --set stages.evaluate.episodes=4 --set stages.evaluate.env.n_envs=4
            --set stages.collect.policies.0.episodes=16)
    BENCH_DEVICE=(--device cpu) NETS=(--device cpu --quick)
else
    TM_LIMIT=300 SIZES=(400 800 1600)
    TM_SET=(--set stages.evaluate.env.n_envs=50)
    BENCH_DEVICE=(--device cuda) NETS=(--device cuda --gpu-only)
fi

cell() {  # name, corridor, then bench_tmaze arguments; validation every 2 epochs shows progress even if cut off
    local name=$1 corridor=$2
    shift 2
    local validate="{env: {id: amago_pipe/TMaze-v0, kwargs: {corridor_length: $corridor}, n_envs: 25}, episodes: 25, every: 2}"
    timeout "$TM_LIMIT" python3 benchmarks/bench_tmaze.py --root "$ROOT/$name" --record "$OUT/tmaze.jsonl" \
        --corridors "$corridor" --set "stages.train.epochs=$EPOCHS" --set "stages.train.validate=$validate" \
        "${TM_SET[@]}" "$@" >"$ROOT/$name.log" 2>&1 &
}
stamp "T-Maze cells start ($EPOCHS x 300 updates each)"
cell tf-c${SIZES[0]}-s0 "${SIZES[0]}" --encoders transformer
cell tf-c${SIZES[0]}-s1 "${SIZES[0]}" --encoders transformer --seeds 1
cell tf-c${SIZES[1]}-s0 "${SIZES[1]}" --encoders transformer
cell tf-c${SIZES[2]}-s0 "${SIZES[2]}" --encoders transformer
cell gru-c${SIZES[1]}-s0 "${SIZES[1]}" --encoders gru  # the default GRU solves up to 1600 on the CPU (1,200 updates)
cell gru-c${SIZES[2]}-s0 "${SIZES[2]}" --encoders gru
cell mamba-c200-s0 200 --encoders mamba  # the PyTorch scan (no mamba-ssm on the image): may be cut off
cell ff-c${SIZES[0]}-s0 "${SIZES[0]}" --encoders ff

stamp "GPU tests (alongside)"
timeout 240 python3 -P -m pytest -m gpu -q -o addopts="" -p no:cacheprovider \
    tests/unit/nets/test_nets_gpu.py tests/integration/test_train_gpu.py >"$OUT/pytest-gpu.log" 2>&1
stamp "GPU tests: $(tail -1 "$OUT/pytest-gpu.log")"
wait
stamp "T-Maze cells done"
{
    cat "$ROOT"/*.log
    echo "validation during training: (update, seconds, success)"
    python3 - "$ROOT" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/*/*/stages/train/metrics.jsonl")):
    rows = [json.loads(line) for line in open(f) if '"val/success_rate"' in line]
    print(f.split("/")[-4], [(r["step"], round(r["wall_time"]), r["val/success_rate"]) for r in rows])
PY
} >"$OUT/tmaze.log"
grep -h -e "^| [a-z]" -e "^[a-z].*-s[0-9] \[" "$OUT/tmaze.log" | grep -v "^| encoder"

stamp "learner throughput"
for precision in fp32 bf16; do
    flag=()
    [ "$precision" = bf16 ] && [ -z "${GPU_DRY:-}" ] && flag=(--bf16)
    timeout 90 python3 benchmarks/bench_learner.py "${BENCH_DEVICE[@]}" "${flag[@]}" --updates 20 --only \
        quickstart-tf64-L32 amago-defaults-discrete amago-defaults-continuous \
        tmaze-tf64-L1024 amago-defaults-L1024 >>"$OUT/bench_learner.md" 2>&1
done
cat "$OUT/bench_learner.md"
stamp "encoder tables"
timeout 100 python3 benchmarks/bench_nets.py "${NETS[@]}" >"$OUT/bench_nets.md" 2>&1
cat "$OUT/bench_nets.md"
stamp "done"
