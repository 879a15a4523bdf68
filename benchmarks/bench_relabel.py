"""Does hindsight relabeling help? `pipelines/goal-maze-relabel.yaml` with a relabeling strategy vs. the `none`
control (the same episodes copied with their original goals: same data, same partition weights, same updates).

    python benchmarks/bench_relabel.py --seeds 0 1 2 --jobs 2 --plot benchmarks/plots/goal-maze-relabel.png
    python benchmarks/bench_relabel.py --tasks maze --episodes 300 --jobs 2   # a smaller dataset

Tasks: `maze` (GoalMaze 9x9, four rooms, one goal; `future` k=8) and `maze-seq` (GoalMaze 7x7, four rooms, a
sequence of 2 goals; `all`). Each (task, strategy, seed) runs the whole pipeline in `runs/relabel/<...>/` with its
own store, one torch thread (OMP_NUM_THREADS=1). Prints a Markdown table of evaluation success rates (100
episodes each) and the ratio of means; `--plot` draws them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "goal-maze-relabel.yaml"
TASKS: dict[str, dict[str, Any]] = {
    "maze": {"kwargs": "{size: 9}", "strategy": "{type: future, k: 8}"},
    "maze-seq": {"kwargs": "{size: 7, n_goals: 2}", "strategy": "{type: all}"},
}


def run_one(task: str, relabel: bool, seed: int, root: Path, episodes: int | None) -> dict[str, Any]:
    spec = TASKS[task]
    name = f"{task}-{'relabel' if relabel else 'none'}-s{seed}" + (f"-e{episodes}" if episodes else "")
    run_dir = root / name
    kw = spec["kwargs"]
    overrides = [
        f"seed={seed}",
        f"store={run_dir / 'store.zarr'}",
        f"stages.collect.env.kwargs={kw}",
        f"stages.relabel.reward.env.kwargs={kw}",
        f"stages.evaluate.env.kwargs={kw}",
        f"stages.relabel.strategy={spec['strategy'] if relabel else '{type: none}'}",
    ]
    if episodes:
        overrides.append(f"stages.collect.policies=[{{policy: {{type: random}}, episodes: {episodes}}}]")
    cmd = [sys.executable, "-m", "amago_pipe.cli", "-q", "run", str(PIPELINE), "--run-dir", str(run_dir)]
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"task": task, "relabel": relabel, "seed": seed, "error": (proc.stderr or proc.stdout).strip()[-300:]}
    evaluate = json.loads((run_dir / "stages" / "evaluate" / "report.json").read_text())["summary"]
    relabeled = json.loads((run_dir / "stages" / "relabel" / "report.json").read_text())
    return {
        "task": task,
        "relabel": relabel,
        "seed": seed,
        "success": evaluate.get("success_rate", 0.0),
        "return": round(evaluate["return_mean"], 3),
        "length": round(evaluate["length_mean"], 1),
        "data_success": relabeled["success_rate_in"],
        "copies_success": relabeled["success_rate_out"],
        "seconds": round(time.perf_counter() - start, 1),
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Evaluation success rate per task: one bar per seed, relabeled vs. the `none` control."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in results})
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for i, relabel in enumerate((False, True)):
            rows = sorted(
                (r for r in results if r["task"] == task and r["relabel"] == relabel), key=lambda r: r["seed"]
            )
            xs = [i + 0.25 * (j - 1) for j in range(len(rows))]
            ax.bar(xs, [r["success"] for r in rows], width=0.22, color="tab:green" if relabel else "tab:grey")
        ax.set_xticks([0, 1], ["none (control)", TASKS[task]["strategy"]])
        ax.set_ylim(0, 1)
        ax.set_ylabel("evaluation success rate")
        ax.set_title(f"{task}: one bar per seed")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="pipelines run at once (one CPU core each)")
    parser.add_argument("--episodes", type=int, help="random walks collected (default: the pipeline's 1,000)")
    parser.add_argument("--root", type=Path, default=Path("runs/relabel"))
    parser.add_argument("--plot", type=Path, help="write the success rates to this PNG")
    args = parser.parse_args()
    jobs = [(t, r, s) for t in args.tasks for s in args.seeds for r in (True, False)]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda j: run_one(*j, args.root, args.episodes), jobs))
    print("| task | strategy | seed | eval success | eval return | eval length | data success | copies success | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        strategy = TASKS[r["task"]]["strategy"] if r["relabel"] else "{type: none}"
        if "error" in r:
            print(f"| {r['task']} | {strategy} | {r['seed']} | failed: {r['error']} |")
            continue
        print(
            f"| {r['task']} | {strategy} | {r['seed']} | {r['success']:.2f} | {r['return']} | {r['length']} | "
            f"{r['data_success']} | {r['copies_success']} | {r['seconds']} |"
        )
    ok = [r for r in results if "error" not in r]
    for task in args.tasks:
        means = {
            relabel: sum(r["success"] for r in ok if r["task"] == task and r["relabel"] == relabel)
            / max(1, sum(1 for r in ok if r["task"] == task and r["relabel"] == relabel))
            for relabel in (True, False)
        }
        ratio = means[True] / means[False] if means[False] else float("inf")
        print(f"{task}: mean success {means[True]:.2f} relabeled vs {means[False]:.2f} none -> {ratio:.1f}x")
    if args.plot and ok:
        plot(ok, args.plot)


if __name__ == "__main__":
    main()
