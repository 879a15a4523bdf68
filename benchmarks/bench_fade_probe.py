"""Which part of a trained agent fades on a long offline run? Reads a train stage's checkpoints; prints a table.

For each checkpoint, on windows of the training partition and of a held-out store of the same task (collected
with another seed), it reports:

- `logp data`: the live actor's mean log-likelihood of the data's actions. Behaviour data of a random policy
  carries no information about its actions, so a gap between training and held-out episodes is the actor
  memorising the training episodes' actions (`memorised` = train minus held-out).
- `entropy`: the live actor's mean entropy on held-out episodes.
- with `--answer-lag N`, for POPGym's Repeat tasks (the suit one-hot in the first 4 observation dims; the right
  answer at step t is the suit seen N observations earlier, 3 for RepeatPreviousEasy): how often the argmax of the
  critics' mean value, of the live actor and of the acting (averaged) actor is the right answer, on training and
  on held-out episodes.

    python benchmarks/bench_fade_probe.py RUN_DIR/stages/train-repeat-previous RUN_DIR/store.zarr HELD_OUT.zarr \\
        --partition repeat-previous --answer-lag 3 --checkpoints best epoch_0010 latest

(`pipelines/popgym-memory.yaml`'s RepeatPreviousEasy agent; HELD_OUT.zarr: the same collect stage run with another
`seed` into its own store.) benchmarks/RESULTS_ARCHIVE.md,
"What fades: the actor memorises the data's random actions through the sequence model (2026-11-27, 19th session)",
has what it found. Needs no environment: it reads stores and checkpoints only.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")


def windows(store_path: str, partition: str, seq_len: int, *, batches: int, seed: int) -> list[Any]:
    """`batches` batches of 64 windows drawn by episode from `partition`."""
    from amago_pipe.data.loader import BatchLoader
    from amago_pipe.store import TrajectoryStore

    store = TrajectoryStore.open(store_path)
    loader = BatchLoader(
        store,
        batch_size=64,
        seq_len=seq_len,
        partitions={partition: 1.0},
        seed=seed,
        threaded=False,
        mode="episodes",
    )
    return [loader.sample(i) for i in range(batches)]


def answers(batch: Any, lag: int | None) -> Any:
    """(B, L) id of the right answer (the suit `lag` observations back), -1 where there is none or no lag."""
    import torch

    answer = torch.full(batch.mask.shape, -1, dtype=torch.long)
    if lag is None:
        return answer
    suits = batch.obs["observation"][..., :4]
    seen, valid = suits.argmax(-1), suits.sum(-1) > 0  # (B, L+1)
    answer[:, lag:] = torch.where(valid[:, : -lag - 1], seen[:, : -lag - 1], -1)
    return answer


def score(agent: Any, data: list[Any], lag: int | None) -> dict[str, float]:
    """Means over the valid steps of `data` (the answer columns over steps that have an answer)."""

    sums = dict.fromkeys(("logp", "entropy", "critic", "actor", "acting"), 0.0)
    steps = answered = 0
    for b in data:
        states, _ = agent.model(b.obs, b.rl2, b.time)
        s = states[:, :-1]
        dist = agent.actor(agent._actor_input(s))
        probs = dist.probs[..., -1, :]  # (B, L, A) of the acting discount factor
        logp = probs.clamp_min(1e-9).log()
        mask, answer = b.mask, answers(b, lag)
        sums["logp"] += float((logp.gather(-1, b.actions[..., None])[..., 0] * mask).sum())
        sums["entropy"] += float((-(probs * logp).sum(-1) * mask).sum())
        steps += int(mask.sum())
        has = mask & (answer >= 0)
        if lag is None or not has.any():
            continue
        q = agent.values(agent.critic(s), axis=-2).mean(0)[..., -1, :]  # (B, L, A): critics' mean, acting gamma
        with agent.acting_weights():
            acting_states, _ = agent.model(b.obs, b.rl2, b.time)
            acting = agent.actor(agent._actor_input(acting_states[:, :-1])).probs[..., -1, :]
        for name, values in (("critic", q), ("actor", probs), ("acting", acting)):
            sums[name] += float(((values.argmax(-1) == answer) & has).sum())
        answered += int(has.sum())
    out = {"logp": sums["logp"] / steps, "entropy": sums["entropy"] / steps}
    if answered:
        out.update({k: sums[k] / answered for k in ("critic", "actor", "acting")})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage_dir", help="a train stage's output folder (holds checkpoints/)")
    parser.add_argument("train_store", help="the store it trained on")
    parser.add_argument("held_out_store", help="a store of the same task's episodes it never saw")
    parser.add_argument("--partition", default="protected", help="partition in both stores")
    parser.add_argument("--checkpoints", nargs="+", default=["best", "latest"])
    parser.add_argument("--answer-lag", type=int, default=None)
    parser.add_argument("--batches", type=int, default=6, help="batches of 64 windows per store")
    args = parser.parse_args()

    import torch
    from safetensors.torch import load_file

    from amago_pipe.agents.loading import agent_from_weights

    torch.set_num_threads(1)
    rows, data = [], None
    for name in args.checkpoints:
        folder = Path(args.stage_dir) / "checkpoints" / name
        meta = json.loads((folder / "state.json").read_text())["meta"]
        if data is None:
            length = int(meta["max_seq_len"])
            data = {
                "train": windows(args.train_store, args.partition, length, batches=args.batches, seed=0),
                "held-out": windows(args.held_out_store, args.partition, length, batches=args.batches, seed=1),
            }
        agent = agent_from_weights(folder / "model.safetensors", meta)
        saved = load_file(str(folder / "model.safetensors"))
        missing = [k for k in agent.state_dict() if k.startswith("critic.") and k not in saved]
        if missing:
            raise SystemExit(f"{folder}: no critic weights ({missing[0]}, ...); pass full checkpoints, not policies")
        with torch.no_grad():
            train, held = (score(agent, data[k], args.answer_lag) for k in ("train", "held-out"))
        rows.append((name, meta["epoch"], meta["step"], train, held))
    head = "| checkpoint | epoch | updates | logp data: train / held-out | memorised | entropy |"
    rule = "|---|---|---|---|---|---|"
    if args.answer_lag is not None:
        head += " answer right (critic / live actor / acting actor): train | held-out |"
        rule += "---|---|"
    print(head)
    print(rule)
    for name, epoch, step, train, held in rows:
        line = (
            f"| {name} | {epoch} | {step:,} | {train['logp']:.3f} / {held['logp']:.3f} | "
            f"{train['logp'] - held['logp']:+.3f} | {held['entropy']:.3f} |"
        )
        for side in (train, held) if "critic" in held else ():
            line += f" {side['critic']:.3f} / {side['actor']:.3f} / {side['acting']:.3f} |"
        print(line)


if __name__ == "__main__":
    main()
