"""Greedy vs sampled actions for every kept epoch of a train stage: finds epochs whose greedy policy fails
where sampling succeeds (e.g. a memory model reading its own constant greedy actions in rl2).

    python benchmarks/bench_greedy.py runs/online-gymnax-memorychain/stages/train \\
        --env '{id: gymnax/MemoryChain-bsuite, kwargs: {memory_length: 50}, n_envs: 16, mode: already_vectorized}'

Keep every epoch's weights with `--set stages.train.keep_last=100` when training. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import yaml

from amago_pipe.config.build import Problems, build
from amago_pipe.config.envs import EnvConfig
from amago_pipe.train.policy_loading import load_agent
from amago_pipe.train.validation import run_episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train_dir", type=Path, help="a train stage's output folder (holds policy/epoch_*.safetensors)")
    parser.add_argument("--env", required=True, help="the env as a YAML mapping (an EnvConfig)")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    torch.set_num_threads(1)
    problems = Problems()
    env_cfg = build(EnvConfig, yaml.safe_load(args.env), problems)
    problems.raise_if_any()
    print("| epoch | greedy return | sampled return |\n|---|---:|---:|")
    for path in sorted((args.train_dir / "policy").glob("epoch_*.safetensors")):
        agent, _ = load_agent(path)
        means = [
            run_episodes(
                agent, env_cfg, args.episodes, spec=agent.spec, greedy=greedy, seed=args.seed, where="bench"
            ).summary()["return_mean"]
            for greedy in (True, False)
        ]
        print(f"| {int(path.stem.split('_')[1])} | {means[0]:.2f} | {means[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
