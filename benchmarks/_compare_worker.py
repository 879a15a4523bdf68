"""Worker of `compare_commits.py`: builds benchmark configs with whichever `amago_pipe` PYTHONPATH names and runs
timed windows of them on request, measuring work units per CPU-second of this process.

It uses only public APIs that have been stable since f691b07 (YAML-shaped train-stage configs through
`config.build`, `build_agent`, `make_optimizer`, `BatchLoader`, `AgentPolicy`, `Stepper`, `make_batched_env`,
`TrajectoryStore`), so one copy of it drives both commits. Protocol: JSON lines prefixed `@@ ` on stdout;
`run NAME SECONDS` and `quit` on stdin.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

AMAGO_GAMMAS = [0.1, 0.9, 0.95, 0.97, 0.99, 0.995]
"""AMAGO's extra discount factors (with gamma 0.999: 7 in all)."""
MATCHED = {"samples": {"value": 1, "target": 1}, "history_coeff": 0.0, "targets": {"n_step": 1}, "policy_average": 0.0}
"""The update matched to AMAGO's: the costly options AMAGO lacks turned off (one policy sample for V(s), no history
objective, one-step targets, no policy average)."""
LEARNER = {
    # name: d_model, max_seq_len, action kind, agent options (None: the commit's defaults)
    "learner-d128-L64-discrete": (128, 64, "discrete", MATCHED),
    "learner-d256-L128-discrete": (256, 128, "discrete", MATCHED),
    "learner-d128-L64-continuous": (128, 64, "continuous", MATCHED),
    "learner-d128-L64-continuous-defaults": (128, 64, "continuous", None),
    "learner-d256-L128-continuous": (256, 128, "continuous", MATCHED),
    "learner-d256-L128-continuous-defaults": (256, 128, "continuous", None),
}
OTHERS = {
    "rollout-sync8-tf128x3": ("rollout", "env steps"),
    "store-sample": ("store", "windows"),
    "store-append": ("store", "timesteps"),
}
DEFAULT_SET = [*list(LEARNER)[:4], *OTHERS]
"""What a plain run measures (the d256 continuous rows only when named in --only)."""
BATCH, STORE_SEQ_LEN = 24, 128


def describe(name: str) -> tuple[str, str]:
    """(group, unit) of a config name."""
    return ("learner", "updates") if name in LEARNER else OTHERS[name]


def stage_config(d: int, L: int, agent: dict[str, Any] | None, quick: bool) -> Any:
    """A train-stage config built the way YAML is (unknown keys at this commit fail with the config's message)."""
    from amago_pipe.config.build import Problems, build
    from amago_pipe.config.train import TrainStageConfig

    hidden = 32 if quick else 256
    data = {
        "type": "train", "max_seq_len": L, "batch_size": 4 if quick else BATCH,
        "model": {"tstep_encoder": {"type": "ff", **({"d_hidden": 32, "d_output": 32} if quick else {})},
                  "traj_encoder": {"type": "transformer", "d_model": d, "n_heads": 8, "n_layers": 3}},
        "agent": {"type": "agent", "gamma": 0.999, "gammas": AMAGO_GAMMAS, "reward_multiplier": 10.0,
                  "actor": {"d_hidden": hidden}, "critic": {"num_critics": 4, "d_hidden": hidden}, **(agent or {})},
    }  # fmt: skip
    data["agent"] = flat_before_blocks(data["agent"])
    problems = Problems()
    cfg = build(TrainStageConfig, data, problems)
    problems.raise_if_any()
    return cfg


FLAT_NAMES = {
    ("samples", "value"): "value_samples",
    ("samples", "target"): "target_samples",
    ("targets", "n_step"): "n_step",
}
"""The flat agent keys of commits before the typed blocks (`samples:`, `targets:`) for the block keys used here."""


def flat_before_blocks(agent: dict[str, Any]) -> dict[str, Any]:
    """`agent` for this commit: its block keys as the flat keys of a commit that has no `targets:` block yet."""
    import dataclasses

    from amago_pipe.config.train import AgentConfig

    if "targets" in {f.name for f in dataclasses.fields(AgentConfig)}:
        return agent
    flat = {k: v for k, v in agent.items() if k not in ("samples", "targets")}
    for block in ("samples", "targets"):
        flat.update({FLAT_NAMES[(block, k)]: v for k, v in agent.get(block, {}).items()})
    return flat


def synthetic_store(path: Path, kind: str, episodes: int, length: int, obs_dim: int, act_dim: int = 1) -> Any:
    """A store of random episodes: CartPole-like (2 actions) when discrete, else `act_dim` actions in [-1, 1]."""
    from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
    from amago_pipe.store import TrajectoryStore

    if kind == "discrete":
        action = ActionSpec("discrete", (), n=2)
    else:
        action = ActionSpec("continuous", (act_dim,), low=(-1.0,) * act_dim, high=(1.0,) * act_dim)
    store = TrajectoryStore.create(path, DataSpec({"observation": ArraySpec((obs_dim,), "float32")}, action))
    with store.writer("protected") as w:
        for ep in random_episodes(kind, episodes, length, obs_dim, act_dim, seed=0):
            w.add(ep)
    return store


def random_episodes(kind: str, n: int, length: int, obs_dim: int, act_dim: int, seed: int) -> list[Any]:
    from amago_pipe.store import Episode

    rng = np.random.default_rng(seed)
    ends = np.zeros(length, bool)
    ends[-1] = True
    out = []
    for _ in range(n):
        if kind == "discrete":
            actions = rng.integers(0, 2, length)
        else:
            actions = rng.uniform(-1, 1, (length, act_dim)).astype(np.float32)
        obs = np.cumsum(rng.normal(size=(length + 1, obs_dim)) * 0.05, axis=0).astype(np.float32)
        rewards = rng.normal(size=length).astype(np.float32)
        out.append(Episode(obs={"observation": obs}, actions=actions, rewards=rewards,
                           terminated=np.zeros(length, bool), truncated=ends))  # fmt: skip
    return out


def learner(name: str, tmp: Path, quick: bool, bf16: bool = False) -> Callable[[], int]:
    """One gradient step per call, as the learner takes it (pre-sampled batches: sampling is the store's row);
    `bf16`: the forward under CPU bf16 autocast, as `mixed_precision: bf16` runs it."""
    import contextlib

    import torch

    from amago_pipe.data.loader import BatchLoader
    from amago_pipe.train.optim import make_optimizer
    from amago_pipe.train.runtime import build_agent

    d, L, kind, agent_opts = LEARNER[name]
    d, L = (32, 16) if quick else (d, L)
    cfg = stage_config(d, L, agent_opts, quick)
    store = synthetic_store(
        tmp / f"{name}.zarr", kind, 8 if quick else 40, 100 if quick else 500, 4 if kind == "discrete" else 3
    )
    torch.manual_seed(0)
    agent = build_agent(cfg.agent, cfg.model, store.spec, max_seq_len=L)
    opt = make_optimizer(agent, lr=1e-4, weight_decay=1e-4)
    loader = BatchLoader(
        store, batch_size=cfg.batch_size, seq_len=L, partitions={"protected": 1.0}, seed=0, threaded=False
    )
    batches = [next(loader) for _ in range(4)]
    count = [0]

    def update() -> int:
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = total_loss(agent(batches[count[0] % len(batches)])[0])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
        opt.step()
        agent.update_targets()
        count[0] += 1
        return 1

    return update


def total_loss(loss: Any) -> Any:
    """The loss the learner steps on: one tensor (f691b07) or the sum of named, weighted terms (a dict, 5c8c9e2 on)."""
    import torch

    return torch.stack(list(loss.values())).sum() if isinstance(loss, dict) else loss


def rollout(quick: bool) -> Callable[[], int]:
    """8 sync CartPole-v1 envs, a d128 x 3 transformer acting stepwise through its KV cache (context 64), sampling."""
    import torch

    from amago_pipe.agents.policy import AgentPolicy
    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.envs.stepper import Stepper
    from amago_pipe.envs.vector import make_batched_env
    from amago_pipe.train.runtime import build_agent

    d, L = (32, 16) if quick else (128, 64)
    cfg = stage_config(d, L, MATCHED, quick)
    env = make_batched_env(EnvConfig(id="CartPole-v1", n_envs=8, mode="sync"))
    torch.manual_seed(0)
    agent = build_agent(cfg.agent, cfg.model, env.spec, max_seq_len=L).eval()
    stepper = Stepper(env, AgentPolicy(agent, greedy=False), seed=0)  # type: ignore[arg-type]
    vector_steps = 10

    def steps() -> int:
        return stepper.run(vector_steps, on_episode=lambda ep: None).env_steps

    return steps


def store_sample(tmp: Path, quick: bool) -> Callable[[], int]:
    """Batches of 24 windows of 128 steps from a warm (RAM-cached) store of 17-dim observations, 6-dim actions."""
    store = synthetic_store(tmp / "sample.zarr", "continuous", 10 if quick else 100, 1000, 17, act_dim=6)
    from amago_pipe.store import TrajectoryStore

    store = TrajectoryStore.open(store.url, cache_bytes=1 << 30)
    rng = np.random.default_rng(0)

    def sample() -> int:
        store.sample(BATCH, STORE_SEQ_LEN, rng=rng)
        return BATCH

    return sample


def store_append(tmp: Path, quick: bool) -> Callable[[], int]:
    """One writer appending (and sealing) 10 episodes of 1,000 steps into a fresh store per call."""
    from amago_pipe.store import TrajectoryStore

    seed = synthetic_store(tmp / "spec.zarr", "continuous", 1, 10, 17, act_dim=6)
    episodes = random_episodes("continuous", 2 if quick else 10, 1000, 17, 6, seed=1)
    calls = [0]

    def append() -> int:
        path = tmp / f"append-{calls[0] % 2}.zarr"
        shutil.rmtree(path, ignore_errors=True)
        store = TrajectoryStore.create(path, seed.spec)
        with store.writer("protected") as w:
            for ep in episodes:
                w.add(ep)
        calls[0] += 1
        return sum(ep.length for ep in episodes)

    return append


def make(name: str, tmp: Path, quick: bool, bf16: bool) -> Callable[[], int]:
    if name in LEARNER:
        return learner(name, tmp, quick, bf16)
    if name == "rollout-sync8-tf128x3":
        return rollout(quick)
    return store_sample(tmp, quick) if name == "store-sample" else store_append(tmp, quick)


def window(step: Callable[[], int], seconds: float) -> dict[str, float]:
    """Work units done in at least `seconds` of this process's CPU time (every thread counted)."""
    gc.collect()
    units = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while True:
        units += step()
        cpu = time.process_time() - cpu0
        if cpu >= seconds or time.perf_counter() - wall0 > 20 * seconds + 60:
            break
    return {"units": units, "cpu_s": cpu, "wall_s": time.perf_counter() - wall0}


def say(record: dict[str, Any]) -> None:
    print("@@ " + json.dumps(record), flush=True)


def last_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]


def serve(names: list[str], quick: bool, tmp: Path, bf16: bool) -> None:
    import torch

    import amago_pipe

    torch.set_num_threads(1)
    steps: dict[str, Callable[[], int]] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            steps[name] = make(name, tmp, quick, bf16)
            steps[name]()  # warm up (first-call allocations, lazy imports)
            steps[name]()
        except Exception as e:  # a config this commit cannot run: reported, the others go on
            traceback.print_exc()
            errors[name] = last_line(e)
    say({"ready": True, "package": str(Path(amago_pipe.__file__).resolve().parent), "errors": errors})
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        name, seconds = words[1], float(words[2])
        try:
            say({"config": name, **window(steps[name], seconds)})
        except Exception as e:
            traceback.print_exc()
            say({"config": name, "error": last_line(e)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", help="comma-separated config names")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run of the harness)")
    parser.add_argument("--bf16", action="store_true", help="learner updates under CPU bf16 autocast")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compare_worker_", dir=Path.cwd()))  # in the caller's scratch folder
    try:
        serve(args.configs.split(","), args.quick, tmp, args.bf16)
    except KeyboardInterrupt:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
