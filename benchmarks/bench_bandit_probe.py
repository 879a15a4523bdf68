"""In-context statistics: how fast does each sequence model learn to name the best bandit arm so far? Prints a table.

POPGym's MultiarmedBanditEasy (10 arms, payout odds drawn per episode, 200 pulls) from uniformly random pulls. The
probe trains the timestep encoder + the named trajectory encoder (the sizes of `pipelines/popgym-memory.yaml`) and a
linear head with cross-entropy to name, at each step from 50 on, the arm whose pulls so far have the best Beta(1 +
wins, 1 + losses) mean (ties go to the lowest id); chance is about 0.1, and `ff`, which sees only the latest pull, is
the memory-free control. The target is a function of the history alone: this measures the network and the data
without the RL update (benchmarks/RESULTS_ARCHIVE.md,
"POPGym tasks not tuned on (2026-11-26, 10th session): PositionOnlyCartPole and CountRecall, by encoder", its
paragraph "Why the transformer trails on the bandit"). Needs the `envs` extra (popgym).

    python benchmarks/bench_bandit_probe.py                                  # transformer, gru, ff; 800 updates
    python benchmarks/bench_bandit_probe.py --encoders transformer:rope gru --updates 400 --seeds 0 1
    python benchmarks/bench_bandit_probe.py --encoders '{type: transformer, d_model: 64, sigma_reparam: false}'
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

ARMS, LENGTH, FROM_STEP = 10, 200, 50
ENCODERS: dict[str, dict[str, Any]] = {
    "transformer": {"type": "transformer", "d_model": 64, "n_heads": 4, "n_layers": 2},
    "transformer:rope": {"type": "transformer", "d_model": 64, "n_heads": 4, "n_layers": 2, "pos_emb": "rope"},
    "gru": {"type": "gru", "d_model": 64},
    "mamba": {"type": "mamba", "d_model": 64, "n_layers": 2},
    "ff": {"type": "ff", "d_model": 64},
}


def bandit_store(path: Path, episodes: int, seed: int) -> Any:
    """A store of `episodes` uniformly random MultiarmedBanditEasy episodes in partition `protected`."""
    from amago_pipe.config.build import build_strict
    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.config.policies import RandomPolicyConfig
    from amago_pipe.envs.policies import PolicyContext, make_policy
    from amago_pipe.envs.rollout import rollout
    from amago_pipe.envs.vector import make_batched_env
    from amago_pipe.store import TrajectoryStore

    factory = {"factory": "amago_pipe.envs.popgym:make_popgym", "kwargs": {"name": "MultiarmedBanditEasy"}}
    env = make_batched_env(build_strict(EnvConfig, {**factory, "name": "popgym/MultiarmedBanditEasy", "n_envs": 8}))
    try:
        store = TrajectoryStore.create(path, env.spec)
        policy = make_policy(RandomPolicyConfig(), PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=seed))
        with store.writer("protected", atomic=True) as writer:
            rollout(env, policy, episodes, seed=seed, keep_episodes=False, on_episode=lambda ep, _: writer.add(ep))
    finally:
        env.close()
    return TrajectoryStore.open(path)


def best_arm_so_far(actions: Any, rewards: Any) -> Any:
    """(B, L) id of the arm with the best Beta(1 + wins, 1 + losses) mean after each step's pull."""
    import torch

    pulled = torch.nn.functional.one_hot(actions, ARMS).float()  # (B, L, ARMS)
    wins = torch.cumsum(pulled * (rewards > 0).float()[..., None], dim=1)
    return ((1 + wins) / (2 + torch.cumsum(pulled, dim=1))).argmax(-1)


def probe(stores: tuple[Any, Any], encoder: str, updates: int, seed: int, every: int) -> dict[int, float]:
    """Train on `stores[0]`; accuracy on 4 fixed batches of held-out episodes (`stores[1]`) every `every` updates."""
    import torch
    import yaml

    from amago_pipe.config.build import build_strict
    from amago_pipe.config.nets import ModelConfig
    from amago_pipe.data.loader import BatchLoader
    from amago_pipe.nets.build import build_sequence_model

    torch.set_num_threads(1)
    traj = ENCODERS[encoder] if encoder in ENCODERS else yaml.safe_load(encoder)
    cfg = build_strict(
        ModelConfig, {"tstep_encoder": {"type": "ff", "d_hidden": 128, "d_output": 64}, "traj_encoder": traj}
    )
    torch.manual_seed(seed)
    model = build_sequence_model(cfg, stores[0].spec, LENGTH)
    head = torch.nn.Linear(model.out_dim, ARMS)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=5e-4)
    loader, held_out = (
        BatchLoader(store, batch_size=24, seq_len=LENGTH, partitions={"protected": 1.0}, seed=seed, threaded=False)
        for store in stores
    )
    fixed = [held_out.sample(i) for i in range(4)]

    def step(batch: Any) -> tuple[Any, float]:
        if (batch.time[:, 0] != 0).any():
            raise RuntimeError("the probe's counts need windows that start at an episode's first step")
        states, _ = model(batch.obs, batch.rl2, batch.time)  # (B, L+1, D); state t+1 has seen pulls 0..t
        logits = head(states[:, 1:])  # (B, L, ARMS)
        keep = batch.mask.clone()
        keep[:, :FROM_STEP] = False
        target = best_arm_so_far(batch.actions, batch.rewards)[keep]
        loss = torch.nn.functional.cross_entropy(logits[keep], target)
        return loss, float((logits[keep].argmax(-1) == target).float().mean())

    scores: dict[int, float] = {}
    for update in range(1, updates + 1):
        loss, _ = step(next(loader))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if update % every == 0:
            model.eval()  # no dropout, input statistics frozen
            with torch.no_grad():
                scores[update] = sum(step(b)[1] for b in fixed) / len(fixed)
            model.train()
    return scores


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--encoders", nargs="+", default=["transformer", "gru", "ff"],
                   help=f"names ({', '.join(ENCODERS)}) or trajectory encoder settings in YAML")  # fmt: skip
    p.add_argument("--updates", type=int, default=800)
    p.add_argument("--every", type=int, default=200, help="score the fixed batches every this many updates")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--episodes", type=int, default=1000, help="random episodes to train on (held out: 200 more)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = bandit_store(Path(tmp) / "train.zarr", args.episodes, 0), bandit_store(Path(tmp) / "held.zarr", 200, 1)
        checkpoints = list(range(args.every, args.updates + 1, args.every))
        print("| encoder | seed | " + " | ".join(f"{u} updates" for u in checkpoints) + " | s |")
        print("|---|---|" + "---|" * (len(checkpoints) + 1))
        for encoder in args.encoders:
            for seed in args.seeds:
                started = time.perf_counter()
                scores = probe(stores, encoder, args.updates, seed, args.every)
                cells = " | ".join(f"{scores[u]:.2f}" for u in checkpoints)
                print(f"| {encoder} | {seed} | {cells} | {time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
