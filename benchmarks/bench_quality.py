"""Quality runs: a whole pipeline (collect -> convert -> train -> evaluate) per seed, with time-to-solve.

    python benchmarks/bench_quality.py quickstart --seeds 0 1 2            # CartPole-v1, target 475
    python benchmarks/bench_quality.py pendulum-offline --seeds 0 1 2      # Pendulum-v1, target -200
    python benchmarks/bench_quality.py cartpole-random --seeds 0 1 2       # quickstart on 1,000 random episodes
    python benchmarks/bench_quality.py online-cartpole --seeds 0 1 2 --plot benchmarks/plots/online-cartpole.png
    python benchmarks/bench_quality.py offline-to-online --seeds 0 1 2     # random data -> offline -> online
    python benchmarks/bench_quality.py online-pendulum --seeds 0 1 2 --plot benchmarks/plots/online-pendulum.png
    python benchmarks/bench_quality.py online-acrobot --seeds 0 1 2       # the online CartPole recipe on Acrobot-v1

Each seed runs `amago-pipe run pipelines/<name>.yaml --set seed=<s>` in `runs/quality/<name>-s<s>/` (its own
store and Minari root there: seeds never share data, and an online train refuses a FIFO holding another run's), with
validation rollouts (10 episodes) after every epoch to time when the policy first
solves the task. One torch thread per run (OMP_NUM_THREADS=1). Prints a Markdown table; `--plot` draws the
validation return against the whole loop's wall time and (online) against env steps.
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
    "online-cartpole": {"env": "CartPole-v1", "target": 475.0},
    "online-pendulum": {"env": "Pendulum-v1", "target": -200.0},
    # the online CartPole recipe, unchanged, on a task it was not tuned on (Gymnasium's Acrobot threshold: -100)
    "online-acrobot": {
        "env": "Acrobot-v1",
        "target": -100.0,
        "pipeline": "online-cartpole",
        "overrides": ["stages.train.online.env.id=Acrobot-v1", "stages.evaluate.env.id=Acrobot-v1"],
    },
    "offline-to-online": {"env": "CartPole-v1", "target": 475.0, "train": "online"},
}


def store_override(pipeline: Path, store: Path) -> str:
    """`--set` value giving a run its own store: `store.path=...` where the pipeline's `store:` is a mapping (its
    partition settings, e.g. a FIFO capacity, stay), else `store=...`."""
    import yaml

    declared = yaml.safe_load(pipeline.read_text()).get("store")
    return f"store.path={store}" if isinstance(declared, dict) else f"store={store}"


def run_seed(name: str, seed: int, root: Path, extra: list[str]) -> dict[str, Any]:
    task = TASKS[name]
    run_dir = root / f"{name}-s{seed}"
    pipeline = REPO / "pipelines" / f"{task.get('pipeline', name)}.yaml"
    overrides = [
        f"seed={seed}",
        store_override(pipeline, run_dir / "store.zarr"),
        f"stages.{task.get('train', 'train')}.num_threads=1",
        f"stages.{task.get('train', 'train')}.validate={{env: {{id: {task['env']}, n_envs: 10}}, episodes: 10, every: 1}}",
        *task.get("overrides", []),
        *extra,
    ]
    cmd = [
        sys.executable,
        "-m",
        "amago_pipe.cli",
        "-q",
        "run",
        str(pipeline),
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
    train = task.get("train", "train")
    lock = json.loads((run_dir / "pipeline.lock.json").read_text())["stages"]
    report = json.loads((run_dir / "stages" / "evaluate" / "report.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "stages" / train / "metrics.jsonl").read_text().splitlines()]
    vals = [r for r in rows if r.get("val/return_mean") is not None]
    solved = [r for r in vals if r["val/return_mean"] >= task["target"]]
    curve = [(r["epoch"], round(r["val/return_mean"], 1)) for r in vals]
    before = report.get("baseline", {}).get("return_mean")
    return {
        "seed": seed,
        "eval_mean_return": round(report["summary"]["return_mean"], 1),
        "eval_episodes": report["summary"]["episodes"],
        "before": None if before is None else round(before, 1),
        "solved": report["summary"]["return_mean"] >= task["target"],
        "train_s": round(lock[train]["ended"] - lock[train]["started"], 1),
        "pipeline_s": round(total, 1),
        "time_to_solve_s": round(solved[0].get("time/elapsed_s", solved[0]["wall_time"]), 1) if solved else None,
        "env_steps_to_solve": solved[0].get("online/env_steps") if solved else None,
        "val_curve": curve,
        "points": [
            (r.get("time/elapsed_s", r["wall_time"]), r.get("online/env_steps"), r["val/return_mean"]) for r in vals
        ],
    }


def plot(results: list[dict[str, Any]], path: Path, title: str, target: float) -> None:
    """Validation return against the whole loop's wall time and (when online) against env steps, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    online = any(p[1] is not None for r in results for p in r["points"])
    fig, axes = plt.subplots(1, 2 if online else 1, figsize=(10 if online else 5, 3.6), squeeze=False)
    for r in results:
        xs = [p[0] for p in r["points"]]
        ys = [p[2] for p in r["points"]]
        axes[0][0].plot(xs, ys, marker=".", label=f"seed {r['seed']}")
        if online:
            axes[0][1].plot([p[1] for p in r["points"]], ys, marker=".", label=f"seed {r['seed']}")
    for ax, xlabel in zip(axes[0], ["seconds (collection + updates + validation)", "env steps"], strict=False):
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation mean return")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--root", type=Path, default=Path("runs/quality"))
    parser.add_argument("--set", dest="extra", action="append", default=[], help="extra --set overrides")
    parser.add_argument("--plot", type=Path, help="write the validation curves to this PNG")
    args = parser.parse_args()
    task = TASKS[args.pipeline]
    print(f"{args.pipeline}: {task['env']}, target mean return >= {task['target']}")
    print(
        "| seed | eval mean return | before | episodes | solved | train s | pipeline s | time-to-solve s | "
        "env steps to solve | validation curve (epoch, return) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for seed in args.seeds:
        r = run_seed(args.pipeline, seed, args.root, args.extra)
        if "error" in r:
            print(f"| {seed} | failed: {r['error']} |", flush=True)
            continue
        results.append(r)
        print(
            f"| {seed} | {r['eval_mean_return']} | {r['before']} | {r['eval_episodes']} | {r['solved']} | {r['train_s']} "
            f"| {r['pipeline_s']} | {r['time_to_solve_s']} | {r['env_steps_to_solve']} | {r['val_curve']} |",
            flush=True,
        )
    if args.plot and results:
        plot(results, args.plot, f"{args.pipeline}: {task['env']}", task["target"])


if __name__ == "__main__":
    main()
