"""Online collection throughput: env steps/s of a trained-size policy (transformer with its KV cache, or ff) in
CartPole-v1 at 8, 32 and 128 envs, acting eagerly or through the traced step (agents/traced_step.py) — sync, async, already_vectorized (gymnasium's numpy batch CartPole) and gymnax
(`gymnax/CartPole-v1`, one jitted JAX batch; needs the `gymnax` extra) — with the time of one vector step split into policy, env and
recording; and what collecting costs the learner (updates/s of an online epoch vs offline-only).

    python benchmarks/bench_online.py                 # both tables
    python benchmarks/bench_online.py --only collect  # the collection table only
    python benchmarks/bench_online.py --only collect --modes sync gymnax
    python benchmarks/bench_online.py --only collect --modes sync --n-envs 8 32 128 --acting eager traced

One torch thread (OMP_NUM_THREADS=1), as the pipelines use. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from amago_pipe.agents import traced_step
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.build import Problems, build
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import EpsilonGreedyConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.envs.exploration import ExploringPolicy, make_exploration
from amago_pipe.envs.stepper import Stepper
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.learner import Learner, LearnerHooks
from amago_pipe.train.runtime import build_agent

MODELS = {
    "transformer": {"tstep_encoder": {"type": "ff", "d_hidden": 128, "d_output": 64},
                    "traj_encoder": {"type": "transformer", "d_model": 64, "n_heads": 4, "n_layers": 2}},
    "ff": {"tstep_encoder": {"type": "ff", "d_hidden": 128, "d_output": 64}, "traj_encoder": {"type": "ff"}},
}  # fmt: skip


def train_config(model: str, online: bool, updates: int) -> TrainStageConfig:
    data: dict[str, Any] = {
        "type": "train", "max_seq_len": 32, "batch_size": 24, "epochs": 2, "updates_per_epoch": updates,
        "warmup_steps": 0, "model": MODELS[model], "num_threads": 1, "prefetch": 4,
        "agent": {"type": "agent", "actor": {"d_hidden": 128}, "critic": {"num_critics": 4, "d_hidden": 128}},
        "logging": {"plots": False, "log_interval": 10},
        "partitions": {"fifo": 1.0},
    }  # fmt: skip
    if online:
        data["online"] = {"env": {"id": "CartPole-v1", "n_envs": 8}, "timesteps_per_epoch": 1000}
    problems = Problems()
    cfg = build(TrainStageConfig, data, problems)
    problems.raise_if_any()
    return cfg


class Timed:
    """Wraps an object and adds the seconds spent in one of its methods to `self.seconds`."""

    def __init__(self, inner: Any, method: str):
        self.inner, self.method, self.seconds = inner, method, 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


MODES = {
    "sync": ("CartPole-v1", "sync"),
    "async": ("CartPole-v1", "async"),
    "already_vectorized": ("CartPole-v1", "already_vectorized"),
    "gymnax": ("gymnax/CartPole-v1", "already_vectorized"),
}
"""Collection case name -> (env id, EnvConfig mode)."""


def collection(steps: int, modes: list[str], env_counts: list[int], acting: list[str]) -> str:
    rows = []
    for model in MODELS:
        for mode in modes:
            env_id, env_mode = MODES[mode]
            for n_envs, how in ((n, a) for n in env_counts for a in acting):
                env = make_batched_env(EnvConfig(id=env_id, n_envs=n_envs, mode=env_mode))  # type: ignore[arg-type]
                cfg = train_config(model, online=False, updates=1)
                agent = build_agent(cfg.agent, cfg.model, env.spec, max_seq_len=cfg.max_seq_len).eval()
                policy = Timed(AgentPolicy(agent, greedy=False, traced=how == "traced"), "act")
                exploring = ExploringPolicy(
                    policy,  # type: ignore[arg-type]
                    make_exploration(EpsilonGreedyConfig(epsilon=0.1), env.spec, seed=0, where="bench"),  # type: ignore[call-arg]
                )
                timed_env = Timed(env, "step")
                stepper = Stepper(timed_env, exploring, seed=0)  # type: ignore[arg-type]
                stepper.run(traced_step.WARMUP_STEPS + 8, on_episode=lambda ep: None)  # warm up, the trace built
                policy.seconds = timed_env.seconds = 0.0
                start = time.perf_counter()
                result = stepper.run(steps, on_episode=lambda ep: None)
                total = time.perf_counter() - start
                env.close()
                per_step_ms = 1000 * total / steps
                rows.append([
                    model, mode, n_envs, how, f"{result.env_steps / total:,.0f}", f"{per_step_ms:.2f}",
                    f"{1000 * policy.seconds / steps:.2f}", f"{1000 * timed_env.seconds / steps:.2f}",
                    f"{per_step_ms - 1000 * (policy.seconds + timed_env.seconds) / steps:.2f}",
                ])  # fmt: skip
                print(rows[-1], flush=True)
    header = [
        "model",
        "mode",
        "n_envs",
        "acting",
        "env steps/s",
        "ms / vector step",
        "policy ms",
        "env ms",
        "recording ms",
    ]
    return table(header, rows)


def learner_cost(updates: int) -> str:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            for online in (False, True):
                store_path = Path(tmp) / f"{model}-{online}.zarr"
                with make_batched_env(EnvConfig(id="CartPole-v1", n_envs=8)) as env:
                    store = TrajectoryStore.create(store_path, env.spec)
                    if not online:  # offline: the same amount of data, collected beforehand
                        prefill = train_config(model, online=True, updates=1)
                        Learner(prefill, store, Path(tmp) / "prefill", seed=0, hooks=LearnerHooks(run_name="pre")).run()
                cfg = train_config(model, online=online, updates=updates)
                start = time.perf_counter()
                out = Learner(cfg, store, Path(tmp) / f"run-{model}-{online}", seed=1, hooks=LearnerHooks()).run()
                total = time.perf_counter() - start
                rows.append([
                    model, "online (1,000 env steps / epoch)" if online else "offline only", out["updates_per_s"],
                    f"{out['steps'] / total:.1f}",
                ])  # fmt: skip
                print(rows[-1], flush=True)
    return table(["model", "learner", "updates/s while updating", "updates/s of the whole loop"], rows)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["collect", "learner"])
    parser.add_argument("--steps", type=int, default=500, help="vector steps per collection case")
    parser.add_argument("--updates", type=int, default=200, help="updates per epoch in the learner cases")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="collection cases")
    parser.add_argument("--n-envs", nargs="+", type=int, default=[8, 32, 128], help="env counts per case")
    parser.add_argument("--acting", nargs="+", choices=["eager", "traced"], default=["traced"], help="acting paths")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.only in (None, "collect"):
        print(collection(args.steps, args.modes, args.n_envs, args.acting))
    if args.only in (None, "learner"):
        print(learner_cost(args.updates))


if __name__ == "__main__":
    main()
