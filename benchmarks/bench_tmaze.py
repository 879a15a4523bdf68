"""T-Maze success against corridor length, by trajectory encoder: `pipelines/tmaze-memory.yaml` per cell.

    python benchmarks/bench_tmaze.py --corridors 30 100 200 --encoders transformer gru ff --seeds 0 \
        --record benchmarks/plots/tmaze-corridor.jsonl --plot benchmarks/plots/tmaze-corridor.png
    python benchmarks/bench_tmaze.py --encoders gru mamba --corridors 200 400 --series "model_lr_scale 10" --record ...
    python benchmarks/bench_tmaze.py --plot-only benchmarks/plots/tmaze-corridor.jsonl --plot ...png

Each cell runs the whole pipeline (collect walker data, train offline, evaluate 100 episodes) in
`runs/tmaze/<encoder>-<recipe>-c<corridor>-s<seed>/` with its own store; collect `max_steps` and
`max_seq_len` are about twice the corridor (60 / 128 / 256 / 512) so the data's episodes reach the junction.
Encoders: the pipeline's transformer, `gru` (default gates), `gru-chrono`, `mamba`, `ff` (d_model 64).
`--recipe memory` adds the README's memory recipe (`amago_pipe.testing.recall.memory_recipe`). One torch
thread per run. Prints a Markdown table; `--record` appends one JSON line per cell; `--plot` draws success
against corridor length (mean over seeds, one line per encoder and recipe) from everything recorded.
Recorded rows with a `series` label (e.g. the longer GPU runs of `benchmarks/gpu_session.sh`) get lines of
their own; other rows run with extra overrides are left out of the plot.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from amago_pipe.testing.recall import memory_recipe

REPO = Path(__file__).resolve().parents[1]
ENCODERS = {
    "transformer": None,  # the pipeline's own: d_model 64 x 2 layers
    "gru": "{type: gru, d_model: 64}",  # the default (`mixed`) gates
    "gru-chrono": "{type: gru, d_model: 64, gate_init: chrono}",
    "mamba": "{type: mamba, d_model: 64, n_layers: 2}",
    "ff": "{type: ff, d_model: 64}",
}


def dotted(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested keys as dotted `--set` keys: `{targets: {correction: x}}` -> `{targets.correction: x}`."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def window(corridor: int) -> int:
    """Collect `max_steps` and `max_seq_len` for a corridor: 60 for 30, else the power of two >= 1.25 x corridor."""
    if corridor <= 30:
        return 2 * corridor
    size = 2
    while size < 1.25 * corridor:
        size *= 2
    return size


def run_cell(
    encoder: str, recipe: str, corridor: int, seed: int, root: Path, extra: list[str], series: str | None
) -> dict[str, Any]:
    name = f"{encoder}-{recipe}-c{corridor}-s{seed}"
    label = {"series": series} if series else {}
    run_dir = root / name
    steps = window(corridor)
    overrides = [
        f"seed={seed}",
        f"store={run_dir / 'store.zarr'}",
        f"stages.collect.env.kwargs.corridor_length={corridor}",
        f"stages.collect.env.kwargs.max_steps={steps}",
        f"stages.train.max_seq_len={steps}",
        f"stages.evaluate.env.kwargs.corridor_length={corridor}",
    ]
    if ENCODERS[encoder] is not None:
        overrides.append(f"stages.train.model.traj_encoder={ENCODERS[encoder]}")
    if recipe == "memory":
        overrides += [f"stages.train.agent.{key}={value}" for key, value in dotted(memory_recipe(encoder)).items()]
    cmd = [sys.executable, "-m", "amago_pipe.cli", "-q", "run", str(REPO / "pipelines" / "tmaze-memory.yaml")]
    cmd += ["--run-dir", str(run_dir)]
    for item in [*overrides, *extra]:
        cmd += ["--set", item]
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    cell = {"encoder": encoder, "recipe": recipe, "corridor": corridor, "seed": seed, "extra": extra, **label}
    if proc.returncode != 0:
        return {**cell, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    lock = json.loads((run_dir / "pipeline.lock.json").read_text())["stages"]
    summary = json.loads((run_dir / "stages" / "evaluate" / "report.json").read_text())["summary"]
    return {
        **cell,
        "success": round(summary["success_rate"], 3),
        "return_mean": round(summary["return_mean"], 3),
        "train_s": round(lock["train"]["ended"] - lock["train"]["started"], 1),
        "pipeline_s": round(time.perf_counter() - start, 1),
        "date": time.strftime("%Y-%m-%d"),
    }


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Success against corridor length: mean over seeds (dots: single seeds), one line per encoder and recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if "success" in row and (row.get("series") or not row.get("extra")):
            groups[(row["encoder"], row["recipe"], row.get("series", ""))][row["corridor"]].append(row["success"])
    colors = {
        "transformer": "tab:blue",
        "gru": "tab:orange",
        "gru-chrono": "tab:red",
        "mamba": "tab:green",
        "ff": "tab:grey",
    }
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    corridors: set[int] = set()
    for i, ((encoder, recipe, series), by_corridor) in enumerate(sorted(groups.items())):
        xs = sorted(by_corridor)
        corridors.update(xs)
        lift = 0.006 * (i - len(groups) / 2)  # overlapping lines stay visible (at most +-0.04)
        means = [sum(by_corridor[x]) / len(by_corridor[x]) + lift for x in xs]
        style = ":" if series else "-" if recipe == "default" else "--"
        color = colors.get(encoder)
        label = f"{encoder}, {recipe} recipe" + (f", {series}" if series else "")
        ax.plot(xs, means, style, marker="s" if series else "o", color=color, label=label)
        for x in xs:
            ax.scatter([x] * len(by_corridor[x]), [v + lift for v in by_corridor[x]], s=12, color=color, alpha=0.5)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="memory-free guess")
    ax.set_xscale("log")
    ax.set_xticks(sorted(corridors), [str(c) for c in sorted(corridors)])
    ax.minorticks_off()
    ax.set_xlabel("corridor length (steps from the cue to the junction)")
    ax.set_ylabel("success (100 greedy episodes)")
    ax.set_ylim(-0.08, 1.08)
    ax.set_title("Passive T-Maze offline from walker data\n1,200 updates on 2 CPU cores unless labelled", fontsize=9)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corridors", type=int, nargs="+", default=[30, 100, 200])
    parser.add_argument("--encoders", nargs="+", choices=sorted(ENCODERS), default=["transformer", "gru", "ff"])
    parser.add_argument("--recipe", choices=["default", "memory"], default="default")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--root", type=Path, default=Path("runs/tmaze"))
    parser.add_argument("--set", dest="extra", action="append", default=[], help="extra --set overrides")
    parser.add_argument("--series", help="label the recorded cells: the plot draws them as a line of their own")
    parser.add_argument("--record", type=Path, help="append one JSON line per cell to this file")
    parser.add_argument("--plot", type=Path, help="draw success against corridor length to this PNG")
    parser.add_argument("--plot-only", type=Path, help="run nothing: plot the cells recorded in this file")
    args = parser.parse_args()
    if args.plot_only:
        rows = [json.loads(line) for line in args.plot_only.read_text().splitlines() if line.strip()]
        plot(rows, args.plot or args.plot_only.with_suffix(".png"))
        return
    print("| encoder | recipe | corridor | seed | success | mean return | train s | pipeline s |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for corridor in args.corridors:
        for encoder in args.encoders:
            for seed in args.seeds:
                row = run_cell(encoder, args.recipe, corridor, seed, args.root, args.extra, args.series)
                rows.append(row)
                if "error" in row:
                    print(f"| {encoder} | {args.recipe} | {corridor} | {seed} | failed: {row['error']} |", flush=True)
                    continue
                print(
                    f"| {encoder} | {args.recipe} | {corridor} | {seed} | {row['success']} | {row['return_mean']} "
                    f"| {row['train_s']} | {row['pipeline_s']} |",
                    flush=True,
                )
                if args.record:
                    with args.record.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    if args.plot:
        recorded = rows
        if args.record and args.record.exists():
            recorded = [json.loads(line) for line in args.record.read_text().splitlines() if line.strip()]
        plot(recorded, args.plot)


if __name__ == "__main__":
    main()
