#!/usr/bin/env bash
# One call on a lent GPU machine (benchmarks/RESULTS.md, "MiniGrid-MemoryS7" and "On a GPU"): MiniGrid-Memory
# learned online from scratch (memory-online.yaml: transformer seeds 0 and 1, GRU, the `ff` control, and the
# transformer on MemoryS9, not tuned on), T-Maze's 1,600 corridor with 4,200 updates, and the GPU tests alongside.
#     bash benchmarks/minigrid/gpu.sh [seeds]
# `seeds`: a second call with seeds 2 / 1 / 1 of transformer / GRU / ff; GPU_DRY=1: toy sizes on the CPU, to check
# the script itself.
# Logs, metrics and evaluation reports go to $OUT (default runs/gpu-minigrid). Where the project is not installed,
# the wheels in .whl/ (README "On a GPU", plus minigrid and pygame-ce) go to /tmp/site first.
set -u
OUT=${OUT:-runs/gpu-minigrid}
ROOT=runs/gpu-mg/${1:-first}  # fresh per call: a finished stage of an earlier call would be skipped
LIMIT=${LIMIT:-450}
rm -rf "$ROOT"
mkdir -p "$OUT" "$ROOT"
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
if [ -d .whl ] && ! python3 -P -c "import amago_pipe, minigrid" 2>/dev/null; then  # build .whl from this tree
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site PYTHONSAFEPATH=1
fi
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start)) s] $*"; }
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
    python3 -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__,
        'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"
    nproc
    python3 -c "import amago_pipe; print('amago_pipe', amago_pipe.__file__)"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [ -n "${GPU_DRY:-}" ]; then
    LIMIT=${LIMIT:-200} EPOCHS=2 CORRIDOR=30 TM_EPOCHS=1
    SMALL=(--set stages.train.updates_per_epoch=3 --set stages.train.online.timesteps_per_epoch=200
           --set stages.evaluate.episodes=4 --set 'stages.train.validate.episodes=4')
else
    EPOCHS=20 CORRIDOR=1600 TM_EPOCHS=14 SMALL=()
fi
PIDS=()
online() {  # name, then --set overrides on memory-online.yaml
    local name=$1
    shift
    timeout "$LIMIT" python3 -m amago_pipe.cli run benchmarks/minigrid/memory-online.yaml --run-dir "$ROOT/$name" \
        --set "store.path=$ROOT/$name/store.zarr" --set "stages.train.epochs=$EPOCHS" ${SMALL[@]+"${SMALL[@]}"} "$@" \
        >"$ROOT/$name.log" 2>&1 &
    PIDS+=("$name:$!")
}
S9=minigrid:MiniGrid-MemoryS9-v0
stamp "cells start"
if [ "${1:-}" = seeds ]; then  # the second call: more seeds of the online cells, nothing else
    online tf-s2 --set seed=2
    online gru-s1 --set seed=1 --set 'stages.train.model.traj_encoder={type: gru, d_model: 64}'
    online ff-s1 --set seed=1 --set 'stages.train.model.traj_encoder={type: ff, d_model: 64}'
else
    online tf-s0
    online tf-s1 --set seed=1
    online gru-s0 --set 'stages.train.model.traj_encoder={type: gru, d_model: 64}'
    online ff-s0 --set 'stages.train.model.traj_encoder={type: ff, d_model: 64}'
    online tf-s9 --set "stages.train.online.env.id=$S9" --set "stages.train.validate.env.id=$S9" \
        --set "stages.evaluate.env.id=$S9"
    tm_env="{id: amago_pipe/TMaze-v0, kwargs: {corridor_length: $CORRIDOR}, n_envs: 25}"
    validate="{env: $tm_env, episodes: 25, every: 2}"
    timeout "$LIMIT" python3 benchmarks/bench_tmaze.py --root "$ROOT/tmaze" --record "$OUT/tmaze.jsonl" \
        --corridors "$CORRIDOR" --encoders transformer --set "stages.train.epochs=$TM_EPOCHS" \
        --set "stages.train.validate=$validate" --set stages.evaluate.env.n_envs=50 \
        --set stages.evaluate.checkpoint=best >"$ROOT/tmaze.log" 2>&1 &
    PIDS+=("tmaze:$!")

    timeout 240 python3 -P -m pytest -m gpu -q -o addopts="" -p no:cacheprovider \
        tests/unit/nets/test_nets_gpu.py tests/integration/test_train_gpu.py >"$OUT/pytest-gpu.log" 2>&1
    stamp "GPU tests: $(tail -1 "$OUT/pytest-gpu.log")"
fi
for cell in "${PIDS[@]}"; do  # a cell that failed or ran out of time says so here
    wait "${cell#*:}"
    stamp "${cell%%:*} exit $?"
done
stamp "cells done"
cp "$ROOT"/*.log "$OUT"/
python3 - "$ROOT" "$OUT" <<'PY'
import glob, json, shutil, sys
root, out = sys.argv[1:]
for f in sorted(glob.glob(f"{root}/**/stages/train/metrics.jsonl", recursive=True)):
    cell = f[len(root) + 1 :].split("/stages/")[0].replace("/", "_")
    shutil.copy(f, f"{out}/{cell}.metrics.jsonl")
    rows = [json.loads(line) for line in open(f)]
    val = [(r["step"], round(r["wall_time"]), round(r["val/return_mean"], 2)) for r in rows if "val/return_mean" in r]
    print(cell, "validation (update, s, return):", val)
for f in sorted(glob.glob(f"{root}/**/stages/evaluate/report.json", recursive=True)):
    cell = f[len(root) + 1 :].split("/stages/")[0].replace("/", "_")
    shutil.copy(f, f"{out}/{cell}.report.json")
    report = json.load(open(f))
    success = [e["success"] for e in report["episodes"] if e["success"] is not None]
    print(cell, "evaluate:", report["policy"], report["summary"], "success", success and sum(success) / len(success))
PY
stamp "done"
