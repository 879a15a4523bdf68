"""Can the sequence model remember where attempt 1 found the reward? A supervised probe for k-shot Meta-World reach.

The `reach-searcher`'s episodes (pipelines/metaworld-ml1-demos.yaml) go back, in attempts 2 and 3, to the best-rewarded
hand position of the earlier attempts. This probe builds the pipeline's train-stage network (`build_agent`: timestep
encoder + trajectory encoder) and trains it with a linear head, without the RL update, to regress that position from
every step of attempts 2 and 3 (the hand positions are observation features 0-2; the reset flag is the last). Scored
on held-out episodes (every 5th) as R^2 over the three coordinates, at every such step and at the first step of
each attempt; the memory-free control (`--set "stages.train.model.traj_encoder={type: ff, d_model: 64}"`) can only
learn the goals' prior. High R^2 with the transformer and none with `ff` says the memory is there and the agent's
failure is in acting on it.

    amago-pipe run pipelines/metaworld-ml1-demos.yaml --until collect
    python benchmarks/bench_homing_probe.py pipelines/metaworld-ml1-demos.yaml runs/metaworld-ml1-demos/store.zarr
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_multitask_probe as probe

POS_SCALE = 10.0
"""Positions are regressed in decimetres (the goals span ~0.2 m)."""


def homing_targets(obs: np.ndarray, rewards: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, L+1, 3) best-rewarded hand position of the attempts before each step's own, and (B, L+1) where that is
    defined (attempts 2 on), from observations (B, L+1, F) with the reset flag last, rewards and mask (B, L).
    Reward t is that of arriving at observation t+1, unless t+1 starts an attempt (KShot drops an attempt's last
    observation)."""
    B, L = rewards.shape
    target, keep = np.zeros((B, L + 1, 3), np.float32), np.zeros((B, L + 1), bool)
    for b in range(B):
        best_r, best, before = -np.inf, np.zeros(3), None
        for t in range(L + 1):
            if t > 0 and not mask[b, t - 1]:
                break
            starts = obs[b, t, -1] > 0.5
            if starts and t > 0:
                before = best.copy()  # the earlier attempts' best, fixed for this attempt
            elif t > 0 and rewards[b, t - 1] > best_r:
                best_r, best = float(rewards[b, t - 1]), obs[b, t, :3].astype(np.float64)
            if before is not None:
                target[b, t], keep[b, t] = before, True
    return target * POS_SCALE, keep


def batch_targets(pb: Any) -> tuple[Any, Any, Any]:
    """Targets, where they count, and which counted steps start an attempt, as tensors."""
    import torch

    from amago_pipe.spec import DEFAULT_OBS_KEY

    obs = pb.batch.obs[DEFAULT_OBS_KEY].numpy()
    target, keep = homing_targets(obs, pb.batch.rewards.numpy(), pb.batch.mask.numpy())
    first = keep & (obs[..., -1] > 0.5)
    return torch.as_tensor(target), torch.as_tensor(keep), torch.as_tensor(first)


def run(s: Any, updates: int, seed: int) -> dict[str, float]:
    """Train model + head on the homing targets; R^2 on the held-out batches (every step, attempt starts)."""
    import torch
    from torch import nn

    agent = _agent(s, seed)
    head = nn.Linear(agent.model.out_dim, 3)
    module = nn.ModuleDict({"model": agent.model, "head": head})

    def loss(pb: Any) -> Any:
        target, keep, _ = batch_targets(pb)
        states, _ = agent.model.encode(pb.batch.obs, pb.batch.rl2, pb.batch.time)  # (B, L+1, D)
        return ((head(states) - target) ** 2)[keep].mean() if keep.any() else states.sum() * 0

    seconds = probe.train(module, loss, s.data, s.cfg, updates, seed)
    preds: dict[str, list[np.ndarray]] = {"all": [], "all_t": [], "first": [], "first_t": []}
    with torch.no_grad():
        for pb in (b for batches in s.held.values() for b in batches):
            target, keep, first = batch_targets(pb)
            out = head(agent.model.encode(pb.batch.obs, pb.batch.rl2, pb.batch.time)[0])
            preds["all"].append(out[keep].numpy())
            preds["all_t"].append(target[keep].numpy())
            preds["first"].append(out[first].numpy())
            preds["first_t"].append(target[first].numpy())
    cat = {k: np.concatenate(v) for k, v in preds.items()}
    return {
        "r2_every_step": r2(cat["all"], cat["all_t"]),
        "r2_attempt_start": r2(cat["first"], cat["first_t"]),
        "rmse_cm": float(np.sqrt(((cat["all"] - cat["all_t"]) ** 2).sum(-1).mean())) * 100 / POS_SCALE,
        "seconds": seconds,
    }


def r2(pred: np.ndarray, target: np.ndarray) -> float:
    """1 - SSE / SST of (N, 3) positions, each coordinate about its own mean."""
    return 1.0 - float(((pred - target) ** 2).sum()) / float(((target - target.mean(0)) ** 2).sum())


def _agent(s: Any, seed: int) -> Any:
    """The train stage's network, untrained (only its sequence model is used)."""
    import torch

    from amago_pipe.train.runtime import build_agent

    torch.manual_seed(seed)
    return build_agent(s.cfg.agent, s.cfg.model, s.spec, max_seq_len=s.cfg.max_seq_len)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline")
    parser.add_argument("store")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="pipeline override")
    parser.add_argument("--stage", default=None, help="the train stage (when the pipeline has several)")
    parser.add_argument("--updates", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-batches", type=int, default=8)
    args = parser.parse_args()
    args.tasks, args.tmaze = None, []
    s = probe.setting(args)
    scores = run(s, args.updates, args.seed)
    traj = s.cfg.model.traj_encoder.type
    print("\n| encoder | updates | R^2, every step of attempts 2-3 | R^2 at their first step | RMSE (cm) | train s |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {traj} | {args.updates:,} | {scores['r2_every_step']:.3f} | {scores['r2_attempt_start']:.3f} "
        f"| {scores['rmse_cm']:.1f} | {scores['seconds']:.0f} |"
    )


if __name__ == "__main__":
    main()
