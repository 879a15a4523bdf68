"""Memory: does the default agent recipe learn delayed recall offline from random data? Prints a Markdown table.

Each row trains one encoder on random-policy `amago_pipe/DelayedRecall-v0` data (the cue at t=0, the answer at
t=delay, 4 cues: chance is 0.25) and scores 200 episodes with greedy and with sampled actions (`--hide-rl2` hides
the previous action and reward, random in the data's waiting steps, from the model). `--probe` adds the supervised probe (the same
sequence model trained with cross-entropy to name the cue on the same batches); `--ablate` adds the critic trained
alone, with its loss on the answer step only and on every step (how much the TD loss elsewhere costs the memory).

    python benchmarks/bench_memory.py                                     # delay 30, std 0 and 0.5, 3 encoders + ff
    python benchmarks/bench_memory.py --delays 60 --stds 0 --encoders transformer ff --updates 1200
    python benchmarks/bench_memory.py --probe --encoders mamba --updates 400
    python benchmarks/bench_memory.py --probe --ablate --encoders gru --stds 0 --updates 1000
    python benchmarks/bench_memory.py --memory-recipe --stds 0.5 --encoders transformer ff --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    import torch

    from amago_pipe.testing.recall import (
        RecallRun,
        RecallTask,
        critic_ablation,
        memory_recipe,
        merged,
        supervised_probe,
        train_and_score,
    )

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--delays", type=int, nargs="+", default=[30])
    p.add_argument("--stds", type=float, nargs="+", default=[0.0, 0.5], help="distractor noise std after t=0")
    p.add_argument("--encoders", nargs="+", default=["transformer", "gru", "mamba", "ff"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--updates", type=int, default=1200)
    p.add_argument("--episodes", type=int, default=800, help="random-policy episodes in each dataset")
    p.add_argument("--probe", action="store_true", help="also train the supervised probe")
    p.add_argument("--ablate", action="store_true", help="also train the critic alone (answer step / every step)")
    p.add_argument(
        "--agent", type=json.loads, default={}, help='agent overrides as JSON, e.g. \'{"targets": {"n_step": 8}}\''
    )
    p.add_argument(
        "--memory-recipe", action="store_true", help="add the README's memory recipe (per encoder) to --agent"
    )
    p.add_argument(
        "--hide-rl2",
        nargs="?",
        const=True,
        default=False,
        choices=["action"],
        help="hide the previous action and reward from the model (`--hide-rl2 action`: the action only)",
    )
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-memory-"))
    extra = [" probe >=95% at |"] * args.probe + [" critic, answer step only | critic, every step |"] * args.ablate
    print("| encoder | delay | distractor std | seed | updates | success | sampled | train s |" + "".join(extra))
    print("|---|---|---|---|---|---|---|---|" + "---|" * (args.probe + 2 * args.ablate))
    for delay in args.delays:
        for std in args.stds:
            task = RecallTask(delay=delay, distractor_std=std, episodes=args.episodes)
            for encoder in args.encoders:
                for seed in args.seeds:
                    agent = merged(memory_recipe(encoder) if args.memory_recipe else {}, args.agent)
                    run = RecallRun(
                        encoder=encoder, updates=args.updates, seed=seed, agent=agent, hide_rl2=args.hide_rl2
                    )
                    r = train_and_score(task, run, workdir, sampled=True)
                    row = (
                        f"| {encoder} | {delay} | {std:g} | {seed} | {args.updates} | {r['success']:.2f} | "
                        f"{r['success_sampled']:.2f} | {r['train_s']:.0f} |"
                    )
                    if args.probe:
                        row += f" {supervised_probe(task, run, workdir)['probe_solved_at']} |"
                    if args.ablate:
                        for steps in ("answer", "all"):
                            r = critic_ablation(task, run, workdir, steps=steps)
                            row += f" {r[f'critic_{steps}_solved_at']} ({r[f'critic_{steps}_accuracy']:.2f}) |"
                    print(row, flush=True)


if __name__ == "__main__":
    main()
