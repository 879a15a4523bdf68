#!/usr/bin/env bash
# One call on a lent GPU machine (benchmarks/RESULTS.md, "MiniGrid-MemoryS7" and "On a GPU"), in one of three modes:
#     bash benchmarks/minigrid/gpu.sh [seeds | pixels | pixels-seeds]
# (none): MiniGrid-Memory learned online from scratch (memory-online.yaml: transformer seeds 0 and 1, GRU, the `ff`
#   control, and the transformer on MemoryS9, not tuned on), T-Maze's 1,600 corridor with 4,200 updates, and the
#   GPU tests alongside; `seeds`: its second call, seeds 2 / 1 / 1 of transformer / GRU / ff.
# `pixels`: MiniGrid-Memory offline from looker data with the agent's view as RGB pixels (wrapped:make_rgb) through
#   the IMPALA CNN: MemoryS7 with and without `normalize_images`, the `ff` control, and MemoryS9 (not tuned on);
#   `pixels-seeds`: its second call.
# GPU_DRY=1: toy sizes on the CPU, to check the script itself. LIMIT: seconds per cell (450; dry 200).
set -u
OUT=${OUT:-runs/gpu-minigrid}
ROOT=runs/gpu-mg/${1:-first}  # fresh per call: a finished stage of an earlier call would be skipped
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
    LIMIT=${LIMIT:-200} EPOCHS=2 PX_EPOCHS=1 CORRIDOR=30 TM_EPOCHS=1
    SMALL=(--set stages.train.updates_per_epoch=3 --set stages.train.online.timesteps_per_epoch=200
           --set stages.evaluate.episodes=4 --set 'stages.train.validate.episodes=4')
    PX_SMALL=(--set stages.train.updates_per_epoch=3 --set stages.collect.policies.0.episodes=16
              --set stages.evaluate.episodes=4 --set 'stages.train.validate.episodes=4')
else
    LIMIT=${LIMIT:-450} EPOCHS=20 PX_EPOCHS=10 CORRIDOR=1600 TM_EPOCHS=14 SMALL=() PX_SMALL=()
fi
PIDS=()
cell() {  # pipeline, name, the store's key (store or store.path), then --set overrides
    local pipeline=$1 name=$2 key=$3
    shift 3
    timeout "$LIMIT" python3 -m amago_pipe.cli run "$pipeline" --run-dir "$ROOT/$name" \
        --set "$key=$ROOT/$name/store.zarr" "$@" >"$ROOT/$name.log" 2>&1 &
    PIDS+=("$name:$!")
}
online() {  # name, then --set overrides on memory-online.yaml
    local name=$1
    shift
    cell benchmarks/minigrid/memory-online.yaml "$name" store.path --set "stages.train.epochs=$EPOCHS" \
        ${SMALL[@]+"${SMALL[@]}"} "$@"
}
pixels() {  # name, env_id, then --set overrides on memory-offline.yaml with the RGB view through the IMPALA CNN
    local name=$1 env="{factory: \"wrapped:make_rgb\", kwargs: {env_id: $2}"
    shift 2
    PYTHONPATH="benchmarks/minigrid${PYTHONPATH:+:$PYTHONPATH}" cell benchmarks/minigrid/memory-offline.yaml "$name" \
        store --set "stages.collect.env=$env, n_envs: 8}" --set "stages.train.validate.env=$env, n_envs: 10}" \
        --set "stages.evaluate.env=$env, n_envs: 10}" --set "stages.train.epochs=$PX_EPOCHS" \
        --set 'stages.train.model.tstep_encoder={type: cnn, cnn: impala}' ${PX_SMALL[@]+"${PX_SMALL[@]}"} "$@"
}
S9=minigrid:MiniGrid-MemoryS9-v0
stamp "cells start"
if [ "${1:-}" = pixels ]; then  # offline from the RGB view
    pixels px-s7 MiniGrid-MemoryS7-v0
    pixels px-s7-nonorm MiniGrid-MemoryS7-v0 \
        --set 'stages.train.model.tstep_encoder={type: cnn, cnn: impala, normalize_images: false}'
    pixels px-s7-ff MiniGrid-MemoryS7-v0 --set 'stages.train.model.traj_encoder={type: ff, d_model: 64}'
    pixels px-s9 MiniGrid-MemoryS9-v0
elif [ "${1:-}" = pixels-seeds ]; then  # the second call: seed 1, and MemoryS9 without `normalize_images`
    nonorm='stages.train.model.tstep_encoder={type: cnn, cnn: impala, normalize_images: false}'
    pixels px-s7-seed1 MiniGrid-MemoryS7-v0 --set seed=1
    pixels px-s7-nonorm-seed1 MiniGrid-MemoryS7-v0 --set seed=1 --set "$nonorm"
    pixels px-s9-seed1 MiniGrid-MemoryS9-v0 --set seed=1
    pixels px-s9-nonorm MiniGrid-MemoryS9-v0 --set "$nonorm"
elif [ "${1:-}" = seeds ]; then  # the second call: more seeds of the online cells, nothing else
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
