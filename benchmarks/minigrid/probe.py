"""Supervised probes of a MiniGrid-Memory pipeline's sequence model on its store's batches (what they found:
benchmarks/RESULTS_ARCHIVE.md, "MiniGrid-MemoryS7, a memory task nothing was tuned on (2026-11-26, 11th session)").

At each episode's last step (the step into a choice) a head on the model's state is trained with cross-entropy:
  --target cue    which object the cue was (read from the data: the key or ball in view while facing the start
                  room in the first 4 steps); a linear head, as the recall probe's
  --target match  whether the object about to be touched matches the cue (the reward), the conjunction the
                  critic needs; an MLP head of the critic's size
Only windows that start at an episode's first step are scored. Prints the accuracy on the training batch and on
a separate batch of 256 windows (drawn from the same episodes: this asks whether the network can carry the cue,
not whether it generalises to new episodes).

    PYTHONPATH=benchmarks/minigrid python benchmarks/minigrid/probe.py \
        --pipeline benchmarks/minigrid/memory-offline.yaml --store runs/minigrid-memory-offline/store.zarr
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
import yaml
from looker import LOOK_STEPS

from amago_pipe.config.build import build_strict
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.runtime import build_agent

KEY, BALL = 5, 6
"""MiniGrid object ids of the two cue objects."""
FACING_START_ROOM = 2
"""MiniGrid direction "left": the start room (and the cue) ahead, the two choices behind."""


def cue_and_answers(batch: Any, target: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labels `(N,)` and the (row, step) of each scored answer step."""
    raw = batch.obs["image"]  # (B, L+1, 7, 7, C): ids (C = 3) or MiniGrid's one-hot (C = 20)
    ids = raw[..., 0].long() if raw.shape[-1] == 3 else (raw[..., KEY] * KEY + raw[..., BALL] * BALL).long()
    n = ids.shape[0]
    steps_in_ep = batch.time.reshape(n, -1)
    looking = (batch.obs["direction"].reshape(n, -1) == FACING_START_ROOM) & (steps_in_ep < LOOK_STEPS)  # (B, L+1)
    seen_key = ((ids == KEY).flatten(2).any(-1) & looking).any(1)
    seen_ball = ((ids == BALL).flatten(2).any(-1) & looking).any(1)
    rows, at = (batch.mask & batch.terminated).nonzero(as_tuple=True)
    keep = (seen_key ^ seen_ball)[rows] & (steps_in_ep[rows, 0] == 0)
    labels = (batch.rewards[rows, at].reshape(-1) > 0).long() if target == "match" else seen_ball.long()[rows]
    return labels[keep], rows[keep], at[keep]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--stage", default="train")
    p.add_argument("--target", choices=("cue", "match"), default="cue")
    p.add_argument("--updates", type=int, default=1000)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tstep-encoder", help="YAML replacing the model's tstep_encoder, e.g. '{type: ff}' (raw ids)")
    args = p.parse_args()
    stage = dict(yaml.safe_load(Path(args.pipeline).read_text())["stages"][args.stage])
    stage.pop("validate", None)
    if args.tstep_encoder:
        stage["model"] = {**stage["model"], "tstep_encoder": yaml.safe_load(args.tstep_encoder)}
    cfg = build_strict(TrainStageConfig, stage)
    store = TrajectoryStore.open(args.store)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = build_agent(cfg.agent, cfg.model, store.spec, max_seq_len=cfg.max_seq_len).model
    d = model.out_dim
    act = torch.nn.LeakyReLU
    head = torch.nn.Linear(d, 2) if args.target == "cue" else torch.nn.Sequential(
        torch.nn.Linear(d, 128), act(), torch.nn.Linear(128, 128), act(), torch.nn.Linear(128, 2)
    )  # fmt: skip
    loader = BatchLoader(store, batch_size=cfg.batch_size, seq_len=cfg.max_seq_len, partitions={"protected": 1.0},
                         seed=args.seed, threaded=False)  # fmt: skip
    other = BatchLoader(store, batch_size=256, seq_len=cfg.max_seq_len, partitions={"protected": 1.0},
                           seed=args.seed + 1, threaded=False).sample(10**9)  # fmt: skip

    def step(batch: Any) -> tuple[torch.Tensor, float, int]:
        labels, rows, at = cue_and_answers(batch, args.target)
        states, _ = model(batch.obs, batch.rl2, batch.time)  # (B, L+1, D)
        logits = head(states[rows, at])
        accuracy = float((logits.argmax(-1) == labels).float().mean())
        return torch.nn.functional.cross_entropy(logits, labels), accuracy, len(labels)

    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=cfg.lr)
    print("| update | training batch accuracy | separate batch accuracy (answers) |\n|---|---|---|")
    for update in range(1, args.updates + 1):
        loss, accuracy, _ = step(next(loader))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if update % args.every == 0:
            model.eval()  # no running-statistics update from the separate batch
            with torch.no_grad():
                _, separate, n = step(other)
            model.train()
            print(f"| {update} | {accuracy:.2f} | {separate:.3f} ({n}) |", flush=True)


if __name__ == "__main__":
    main()
