"""Quality runs: a whole pipeline (collect -> convert -> train -> evaluate) per seed, with time-to-solve.

    python benchmarks/bench_quality.py quickstart --seeds 0 1 2            # CartPole-v1, target 475
    python benchmarks/bench_quality.py pendulum-offline --seeds 0 1 2      # Pendulum-v1, target -200
    python benchmarks/bench_quality.py cartpole-random --seeds 0 1 2       # quickstart on 1,000 random episodes

Each seed runs `amago-pipe run pipelines/<name>.yaml --set seed=<s>` in `runs/quality/<name>-s<s>/` (its own
Minari root there), with validation rollouts (10 episodes) after every epoch to time when the policy first
solves the task. One torch thread per run (OMP_NUM_THREADS=1). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TASKS: dict[str, dict[str, Any]] = {
    "quickstart": {"env": "CartPole-v1", "target": 475.0},
    "pendulum-offline": {"env": "Pendulum-v1", "target": -200.0},
    # offline RL that must improve on its data: 1,000 uniformly random CartPole episodes (behaviour return ~22)
    "cartpole-random": {
        "env": "CartPole-v1",
        "target": 193.0,
        "pipeline": "quickstart",
        "overrides": ["stages.collect.policies=[{policy: {type: random}, episodes: 1000}]", "stages.train.epochs=10"],
    },
}


def run_seed(name: str, seed: int, root: Path, extra: list[str]) -> dict[str, Any]:
    task = TASKS[name]
    run_dir = root / f"{name}-s{seed}"
    overrides = [
        f"seed={seed}",
        "stages.train.num_threads=1",
        f"stages.train.validate={{env: {{id: {task['env']}, n_envs: 10}}, episodes: 10, every: 1}}",
        *task.get("overrides", []),
        *extra,
    ]
    cmd = [
        sys.executable,
        "-m",
        "amago_pipe.cli",
        "-q",
        "run",
        str(REPO / "pipelines" / f"{task.get('pipeline', name)}.yaml"),
        "--run-dir",
        str(run_dir),
    ]
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ, OMP_NUM_THREADS="1", MINARI_DATASETS_PATH=str(run_dir / "minari"), WANDB_MODE="disabled")
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    total = time.perf_counter() - start
    if proc.returncode != 0:
        return {"seed": seed, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    lock = json.loads((run_dir / "pipeline.lock.json").read_text())["stages"]
    report = json.loads((run_dir / "stages" / "evaluate" / "report.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "stages" / "train" / "metrics.jsonl").read_text().splitlines()]
    solved = [r for r in rows if r.get("val/return_mean") is not None and r["val/return_mean"] >= task["target"]]
    curve = [(r["epoch"], round(r["val/return_mean"], 1)) for r in rows if r.get("val/return_mean") is not None]
    return {
        "seed": seed,
        "eval_mean_return": round(report["summary"]["return_mean"], 1),
        "eval_episodes": report["summary"]["episodes"],
        "solved": report["summary"]["return_mean"] >= task["target"],
        "train_s": round(lock["train"]["ended"] - lock["train"]["started"], 1),
        "pipeline_s": round(total, 1),
        "time_to_solve_s": round(solved[0]["wall_time"], 1) if solved else None,
        "steps_to_solve": solved[0]["step"] if solved else None,
        "val_curve": curve,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--root", type=Path, default=Path("runs/quality"))
    parser.add_argument("--set", dest="extra", action="append", default=[], help="extra --set overrides")
    args = parser.parse_args()
    task = TASKS[args.pipeline]
    print(f"{args.pipeline}: {task['env']}, target mean return >= {task['target']}")
    print(
        "| seed | eval mean return | episodes | solved | train s | pipeline s | time-to-solve s (train) | steps | validation curve (epoch, return) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        r = run_seed(args.pipeline, seed, args.root, args.extra)
        if "error" in r:
            print(f"| {seed} | failed: {r['error']} |", flush=True)
            continue
        print(
            f"| {seed} | {r['eval_mean_return']} | {r['eval_episodes']} | {r['solved']} | {r['train_s']} | {r['pipeline_s']} "
            f"| {r['time_to_solve_s']} | {r['steps_to_solve']} | {r['val_curve']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
