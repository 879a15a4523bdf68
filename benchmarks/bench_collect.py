"""Benchmark the environment side: scripted-controller quality, rollout throughput (sync/async), collect time.

Run: python benchmarks/bench_collect.py [--quick]. Prints Markdown tables (to publish one: add a record of
`kind: benchmark` with its `table` under benchmarks/records/ and re-run benchmarks/make_results.py).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np

from amago_pipe.cli.collect_cmds import build_config
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import policy_config
from amago_pipe.envs.collect import run_collect
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def exploration(env_id: str, noise: float) -> dict[str, Any]:
    """The rows' `noise`: a Gaussian std on Pendulum's continuous actions, else an epsilon."""
    if noise == 0:
        return {"type": "none"}
    return {"type": "gaussian", "std": noise} if env_id == "Pendulum-v1" else {"type": "egreedy", "epsilon": noise}


def controller_quality(episodes: int) -> str:
    rows = []
    cases = [("CartPole-v1", "cartpole-pd", (0.0, 0.1, 0.3, 0.5)), ("CartPole-v1", "random", (0.0,)),
             ("Pendulum-v1", "pendulum-energy", (0.0, 0.1, 0.3)), ("Pendulum-v1", "random", (0.0,))]  # fmt: skip
    for env_id, policy, noises in cases:
        for noise in noises:
            with make_batched_env(EnvConfig(id=env_id, n_envs=10)) as env:
                ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0, env_name=env_id)
                config = policy_config({"type": policy, "exploration": exploration(env_id, noise)})
                res = rollout(env, make_policy(config, ctx), episodes, seed=0, keep_episodes=False)
            r = np.array([s.episode_return for s in res.stats])
            rows.append(
                [
                    env_id,
                    policy,
                    noise,
                    episodes,
                    f"{r.mean():.1f}",
                    f"{r.std():.1f}",
                    f"{r.min():.1f}",
                    f"{r.max():.1f}",
                ]
            )
    return table(["env", "policy", "noise", "episodes", "mean return", "std", "min", "max"], rows)


def throughput(seconds_per_case: float) -> str:
    rows = []
    for mode in ("sync", "async"):
        for n_envs in (1, 8, 32):
            with make_batched_env(EnvConfig(id="CartPole-v1", n_envs=n_envs, mode=mode)) as env:
                ctx = PolicyContext(spec=env.spec, n_envs=n_envs, seed=0, env_name="CartPole-v1")
                policy = make_policy(policy_config({"type": "cartpole-pd", "exploration": exploration("", 0.3)}), ctx)
                steps = recorded = 0
                start = time.perf_counter()
                while time.perf_counter() - start < seconds_per_case:
                    res = rollout(env, policy, n_envs * 2, seed=0, keep_episodes=False)
                    steps += res.env_steps
                    recorded += sum(s.length for s in res.stats)
                elapsed = time.perf_counter() - start
            rows.append([mode, n_envs, f"{steps / elapsed:,.0f}", f"{recorded / elapsed:,.0f}"])
    return table(["mode", "n_envs", "env steps/s", "recorded steps/s"], rows)


def collect_times() -> str:
    rows = []
    mix = [
        {"policy": {"type": "random"}, "episodes": 150},
        {"policy": {"type": "cartpole-pd", "exploration": exploration("", 0.3)}, "episodes": 150},
    ]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MINARI_DATASETS_PATH"] = os.path.join(tmp, "minari")
        for output in ("store", "minari"):
            extra = {"dataset_id": "bench/mixed-v0"} if output == "minari" else {}
            cfg = build_config({"env": {"id": "CartPole-v1", "n_envs": 8}, "policies": mix, "output": output, **extra})
            start = time.perf_counter()
            report = run_collect(cfg, store_url=os.path.join(tmp, "s.zarr") if output == "store" else None, seed=0)
            sec = time.perf_counter() - start
            rows.append([output, report["total"]["episodes"], report["timesteps"], f"{sec:.2f}",
                         f"{report['timesteps'] / sec:,.0f}", f"{report['total']['return_mean']:.1f}"])  # fmt: skip
    return table(["output", "episodes", "timesteps", "seconds", "timesteps/s", "mean return"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter throughput cases")
    args = parser.parse_args()
    print("### Scripted controllers (20 episodes, seeds 0..19)\n")
    print(controller_quality(20))
    print("\n### Rollout throughput, CartPole-v1, cartpole-pd + noise 0.3 (includes policy time)\n")
    print(throughput(0.5 if args.quick else 2.0))
    print("\n### collect: 150 random + 150 cartpole-pd(noise 0.3) episodes, 8 sync envs\n")
    print(collect_times())


if __name__ == "__main__":
    main()
