"""Why does a multi-task agent not learn a task? Supervised probes of its own network on its own data; per-task tables.

The probes build the pipeline's train-stage network through the project's builders (`build_agent`: timestep encoder +
trajectory encoder + the agent's critic and actor heads) and train it without the RL update on windows drawn as the
learner draws them (`batch_size` x `max_seq_len`, balanced by task under `sample_balance: task`) from the store the
pipeline wrote; they are scored on held-out episodes (every 5th episode of each task):

- `value`: the critics regress each step's discounted return-to-go (Monte Carlo, rewards times the agent's
  `reward_multiplier`) for the data action, once in the agent's PopArt units (one statistic per discount factor for
  every task, updated as the agent does) and once with one PopArt per task. Per task: R^2 and RMSE in the task's own
  reward units at the acting gamma and at the smallest one, and the spread of Q over the valid actions in PopArt
  units (what the actor's update is given). On T-Maze tasks also how often the critic's best action in the corridor
  is `right` and, at the junction, whether it ranks the cued arm above the other one.
- `memory`, two heads trained together on one network: a linear head names the T-Maze cue shown at t=0 from every
  later step; the actor clones the data's actions on the steps rewarded above 0 (reward-filtered behaviour cloning;
  tasks rewarded on nearly every step are left out), scored on held-out rewarded steps beside chance.
- `--checkpoint`: the RL agent's own critic (a train checkpoint with critic weights) scored like the `value` probe,
  and its live actor's probability of its most likely action.

Run the ff control with `--set "stages.train.model.traj_encoder={type: ff, d_model: 64}"`. The records in
benchmarks/records/ (family Multi-task, variants `... probe ...`) come from:

    amago-pipe run pipelines/multitask-scale.yaml
    python benchmarks/bench_multitask_probe.py pipelines/multitask-scale.yaml runs/multitask-scale/store.zarr \\
        --checkpoint runs/multitask-scale/stages/train/checkpoints/latest
    amago-pipe run pipelines/popgym-suite.yaml --until collect
    python benchmarks/bench_multitask_probe.py pipelines/popgym-suite.yaml runs/popgym-suite/store.zarr

On this CPU a probe of 1,500 updates takes 1.5-2 minutes (the scale problem) and about 4 (the POPGym suite).
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")

HELD_OUT_EVERY = 5
"""Every 5th episode of each task is held out for scoring."""
ALWAYS_REWARDED = 0.95
"""`bc` leaves out tasks rewarded above 0 on at least this share of their steps (nothing to filter)."""
RIGHT, UP, DOWN = 0, 2, 3
"""T-Maze action ids (amago_pipe.envs.builtin.tmaze)."""


@dataclass
class ProbeBatch:
    """One batch of windows with what the probes need beside it."""

    batch: Any
    """The learner's `Batch` (window_to_batch of the windows)."""
    task: Any
    """(B,) task index of each window."""
    rtg: Any
    """(B, L, G) discounted return-to-go of each step, rewards times the reward multiplier."""
    cue: Any
    """(B,) the first observation's feature 0 where the window starts at the episode's first step, else 0."""


def returns_to_go(rewards: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """(T, G) sum_k gamma^k r_{t+k} to the end of the stored episode (a truncated one counts nothing beyond)."""
    out = np.zeros((len(rewards) + 1, len(gammas)))
    for t in range(len(rewards) - 1, -1, -1):
        out[t] = rewards[t] + gammas * out[t + 1]
    return out[:-1]


class TaskWindows:
    """Windows of `seq_len` steps from episodes grouped by task: each window's task drawn equally (`balance`) or by
    its share of timesteps, the start uniform over a task's timesteps as the store draws them in `timesteps` mode."""

    def __init__(self, spec: Any, tasks: dict[str, list[Any]], seq_len: int, gammas: np.ndarray, multiplier: float):
        from amago_pipe.actions import ActionCodec

        self.spec, self.codec, self.seq_len = spec, ActionCodec(spec.action), seq_len
        self.names = list(tasks)
        self.episodes = [tasks[n] for n in self.names]
        self.rtg = [[returns_to_go(ep.rewards * multiplier, gammas) for ep in eps] for eps in self.episodes]
        self.cum = [np.cumsum([len(ep.actions) + seq_len - 1 for ep in eps]) for eps in self.episodes]

    def sample(self, n: int, rng: np.random.Generator, *, task: int | None = None, balance: bool = True) -> ProbeBatch:
        """`n` windows (all of `task` when given)."""
        import torch

        from amago_pipe.data.batch import window_to_batch

        steps = np.array([c[-1] for c in self.cum], dtype=np.float64)
        share = np.full(len(steps), 1 / len(steps)) if balance else steps / steps.sum()
        tasks = np.full(n, task) if task is not None else rng.choice(len(steps), n, p=share)
        picks = []
        for k in tasks:
            g = int(rng.integers(0, int(self.cum[k][-1])))
            e = int(np.searchsorted(self.cum[k], g, side="right"))
            length = len(self.episodes[k][e].actions)
            raw = g - (int(self.cum[k][e]) - (length + self.seq_len - 1)) - (self.seq_len - 1)
            picks.append((int(k), e, min(max(raw, 0), max(length - self.seq_len, 0))))
        window, rtg, cue = self._windows(picks)
        batch = window_to_batch(window, self.spec, self.codec)
        return ProbeBatch(batch, torch.as_tensor(tasks), torch.as_tensor(rtg), torch.as_tensor(cue))

    def _windows(self, picks: list[tuple[int, int, int]]) -> tuple[Any, np.ndarray, np.ndarray]:
        from amago_pipe.spec import DEFAULT_OBS_KEY
        from amago_pipe.store.info import WindowBatch

        B, L, first = len(picks), self.seq_len, self.episodes[0][0]
        obs = {k: np.zeros((B, L + 1, *v.shape[1:]), v.dtype) for k, v in first.obs.items()}
        actions = np.zeros((B, L, *first.actions.shape[1:]), first.actions.dtype)
        rewards, mask = np.zeros((B, L), np.float32), np.zeros((B, L), bool)
        terminated, truncated = np.zeros((B, L), bool), np.zeros((B, L), bool)
        time_ = np.zeros((B, L + 1), np.int64)
        prev_a, prev_r = np.zeros((B, *first.actions.shape[1:]), first.actions.dtype), np.zeros(B, np.float32)
        rtg, cue = np.zeros((B, L, self.rtg[0][0].shape[1]), np.float32), np.zeros(B, np.float32)
        for b, (k, e, s) in enumerate(picks):
            ep = self.episodes[k][e]
            n = min(L, len(ep.actions) - s)
            for key in obs:
                obs[key][b, : n + 1] = ep.obs[key][s : s + n + 1]
            actions[b, :n], rewards[b, :n], mask[b, :n] = ep.actions[s : s + n], ep.rewards[s : s + n], True
            terminated[b, :n], truncated[b, :n] = ep.terminated[s : s + n], ep.truncated[s : s + n]
            time_[b, : n + 1] = ep.time_start + s + np.arange(n + 1)
            if s > 0:
                prev_a[b], prev_r[b] = ep.actions[s - 1], ep.rewards[s - 1]
            rtg[b, :n] = self.rtg[k][e][s : s + n]
            cue[b] = float(ep.obs[DEFAULT_OBS_KEY][0].ravel()[0]) if s == 0 and ep.time_start == 0 else 0.0
        window = WindowBatch(
            obs=obs, actions=actions, rewards=rewards, terminated=terminated, truncated=truncated, time=time_,
            mask=mask, goals={}, prev_actions=prev_a, prev_rewards=prev_r, partition=np.zeros(B, np.int64),
        )  # fmt: skip
        return window, rtg, cue


def load_tasks(store_path: str, partitions: list[str]) -> tuple[Any, dict[str, list[Any]], np.ndarray]:
    """The store's spec, its episodes by task name (`env_name`) and every reward (for `reward_multiplier: auto`)."""
    from amago_pipe.store import TrajectoryStore

    store = TrajectoryStore.open(store_path)
    tasks: dict[str, list[Any]] = defaultdict(list)
    for partition in partitions:
        for ep in store.iter_episodes(partition):
            tasks[ep.env_name or partition].append(ep)
    rewards = np.concatenate([store.rewards(p) for p in partitions])
    return store.spec, dict(sorted(tasks.items())), rewards


def split(tasks: dict[str, list[Any]]) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """(training, held-out) episodes of every task."""
    train = {n: [e for i, e in enumerate(eps) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1] for n, eps in tasks.items()}
    held = {n: eps[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY] for n, eps in tasks.items()}
    return train, held


# ---- the probes ---------------------------------------------------------------------------------------------------
def q_data(agent: Any, states: Any, actions: Any) -> tuple[Any, Any]:
    """Critic outputs at states (B, L, D): (Q of the data action (B, L, K, G), Q of every action (B, L, K, G, A))."""
    out = agent.critic(states)  # (K, B, L, G, A)
    every = out.permute(1, 2, 0, 3, 4)  # (B, L, K, G, A)
    index = actions[:, :, None, None, None].expand(*every.shape[:-1], 1)
    return every.gather(-1, index)[..., 0], every


def value_loss(agent: Any, poparts: list[Any], pb: ProbeBatch) -> Any:
    """The critic's regression onto returns-to-go in PopArt units: one PopArt for all tasks, or one per task."""
    from amago_pipe.agents.losses import critic_loss

    b = pb.batch
    states, _ = agent.model.encode(b.obs, b.rl2, b.time)  # (B, L+1, D)
    q, _ = q_data(agent, states[:, :-1], b.actions)  # (B, L, K, G)
    groups = (
        [(poparts[0], b.mask)]
        if len(poparts) == 1
        else [(p, b.mask & (pb.task == k)[:, None]) for k, p in enumerate(poparts)]
    )
    total = 0.0
    for popart, rows in groups:
        if rows.any():
            popart.update(pb.rtg, rows)
            loss = critic_loss(popart(q), popart.normalize(pb.rtg), rows, kind=agent.cfg.critic.loss)
            total = total + loss * rows.sum() / b.mask.sum()
    return total


def cue_loss(head: Any, states: Any, pb: ProbeBatch, cued: Any) -> tuple[Any, Any, Any]:
    """Cross-entropy of the cue's sign from the states (B, L+1, D) after t=0 of windows of the tasks `cued` (K,) that
    start with a cue; also the per-step logits (B, L) and which of them count (B, L)."""
    import torch.nn.functional as F

    logits = head(states[:, 1:])[..., 0]  # (B, L): state t has seen observations 0..t
    keep = pb.batch.mask & ((pb.cue != 0) & cued[pb.task])[:, None]
    target = (pb.cue > 0).float()[:, None].expand_as(logits)
    loss = F.binary_cross_entropy_with_logits(logits[keep], target[keep]) if keep.any() else logits.sum() * 0
    return loss, logits, keep


def bc_logp(agent: Any, states: Any, pb: ProbeBatch) -> tuple[Any, Any]:
    """From states (B, L+1, D): (log-probabilities of every action at the acting gamma (B, L, A), the data
    action's (B, L))."""
    b = pb.batch
    valid = agent.valid_actions({k: v[:, :-1] for k, v in b.obs.items()})
    logp = agent.actor(states[:, :-1], valid).probs[..., -1, :].clamp_min(1e-9).log()  # (B, L, A)
    return logp, logp.gather(-1, b.actions[..., None])[..., 0]


def train(module: Any, loss_fn: Any, data: TaskWindows, cfg: Any, updates: int, seed: int) -> float:
    """`updates` AdamW steps with the train stage's lr, warmup, weight decay, grad clip and model lr scale."""
    import torch

    from amago_pipe.config import auto
    from amago_pipe.train.optim import lr_at, make_optimizer, set_lr

    opt = make_optimizer(
        module, lr=cfg.lr, weight_decay=cfg.weight_decay, scaled=("model.",), scale=auto.model_lr_scale(cfg)
    )
    rng, started = np.random.default_rng(seed), time.perf_counter()
    balance = cfg.sample_balance == "task"
    for step in range(updates):
        set_lr(opt, lr_at(step, peak=cfg.lr, warmup_steps=cfg.warmup_steps))
        loss = loss_fn(data.sample(cfg.batch_size, rng, balance=balance))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.grad_clip)
        opt.step()
    module.eval()
    return time.perf_counter() - started


# ---- scores on held-out windows -----------------------------------------------------------------------------------
def r2(pred: np.ndarray, target: np.ndarray) -> float:
    """1 - SSE / SST (nan without variance)."""
    sst = float(((target - target.mean()) ** 2).sum())
    return float("nan") if sst <= 0 else 1.0 - float(((pred - target) ** 2).sum()) / sst


def value_scores(
    agent: Any, popart: Any, batches: list[ProbeBatch], multiplier: float, tmaze: bool
) -> dict[str, float]:
    """R^2 / RMSE (reward units) of the critics' mean raw Q of the data action, at the acting and the first gamma; the
    spread of Q over the valid actions in PopArt units (what the actor sees: max - min over sigma); on a T-Maze also the share of corridor steps whose best valid action is `right` and of junction steps that rank
    the cued arm first."""
    import torch

    from amago_pipe.spec import DEFAULT_OBS_KEY

    preds, targets, gaps, right, cued = [], [], [], [], []
    sigma = float(popart.sigma[-1])
    with torch.no_grad():
        for pb in batches:
            b = pb.batch
            states, _ = agent.model.encode(b.obs, b.rl2, b.time)
            q, every = q_data(agent, states[:, :-1], b.actions)
            raw = popart(q, normalized=False).mean(2)  # (B, L, G)
            preds.append(raw[b.mask].numpy())
            targets.append(pb.rtg[b.mask].numpy())
            qa = popart(every, normalized=False, axis=-2).mean(2)[..., -1, :]  # (B, L, A) at the acting gamma
            valid = agent.valid_actions({k: v[:, :-1] for k, v in b.obs.items()})
            high = qa if valid is None else qa.masked_fill(valid < 0.5, -torch.inf)
            low = qa if valid is None else qa.masked_fill(valid < 0.5, torch.inf)
            gaps.append(((high.amax(-1) - low.amin(-1)) / sigma)[b.mask].numpy())
            if not tmaze:
                continue
            junction = b.obs[DEFAULT_OBS_KEY][:, :-1, 1] >= 0.5  # (B, L)
            right.append((high.argmax(-1) == RIGHT)[b.mask & ~junction].numpy())
            at = b.mask & junction & (pb.cue != 0)[:, None]
            cued.append(((qa[..., UP] > qa[..., DOWN]) == (pb.cue > 0)[:, None])[at].numpy())
    p, t = np.concatenate(preds), np.concatenate(targets)  # (N, G)
    out = {"r2": r2(p[:, -1], t[:, -1]), "r2_first": r2(p[:, 0], t[:, 0])}
    out |= {"rmse": float(np.sqrt(((p[:, -1] - t[:, -1]) ** 2).mean())) / multiplier}
    out |= {"rtg_std": float(t[:, -1].std()) / multiplier, "gap": float(np.concatenate(gaps).mean())}
    if tmaze:
        r, c = np.concatenate(right), np.concatenate(cued)
        out |= {
            "right": float(r.mean()) if r.size else float("nan"),
            "cued": float(c.mean()) if c.size else float("nan"),
        }
        out |= {"junction_steps": float(c.size)}
    return out


def cue_scores(agent: Any, head: Any, batches: list[ProbeBatch], cued: Any) -> dict[str, float]:
    """Cue named right, over every step after t=0 and at each window's last valid step."""
    import torch

    hits, last = [], []
    with torch.no_grad():
        for pb in batches:
            states, _ = agent.model.encode(pb.batch.obs, pb.batch.rl2, pb.batch.time)
            _, logits, keep = cue_loss(head, states, pb, cued)
            right = (logits > 0) == (pb.cue > 0)[:, None]  # (B, L)
            hits.append(right[keep].numpy())
            ends = pb.batch.mask.sum(1) - 1  # (B,)
            rows = keep.any(1)
            last.append(right[torch.arange(len(ends)), ends.clamp(min=0)][rows].numpy())
    return {"cue_any": float(np.concatenate(hits).mean()), "cue_last": float(np.concatenate(last).mean())}


def bc_scores(agent: Any, batches: list[ProbeBatch]) -> dict[str, float]:
    """Accuracy of the actor's mode on rewarded held-out steps, and a uniform guess among the valid actions'."""
    import torch

    hits, chance = [], []
    with torch.no_grad():
        for pb in batches:
            b = pb.batch
            logp, _ = bc_logp(agent, agent.model.encode(b.obs, b.rl2, b.time)[0], pb)
            keep = b.mask & (b.rewards > 0)
            hits.append((logp.argmax(-1) == b.actions)[keep].numpy())
            n_valid = torch.isfinite(logp).sum(-1) if agent.mask_key is None else b.obs[agent.mask_key][:, :-1].sum(-1)
            chance.append((1.0 / n_valid.clamp(min=1))[keep].numpy())
    h, c = np.concatenate(hits), np.concatenate(chance)
    return {"bc": float(h.mean()), "chance": float(c.mean())} if h.size else {}


# ---- running the probes -------------------------------------------------------------------------------------------
@dataclass
class Setting:
    """What every probe shares: the train stage's config, the data and the fixed held-out batches per task."""

    cfg: Any
    spec: Any
    multiplier: float
    data: TaskWindows
    held: dict[str, list[ProbeBatch]]
    tmaze: set[str]
    junction: dict[str, tuple[float, float]]
    """T-Maze task -> (share of its episodes that reach the junction, share that choose an arm)."""


def fresh_agent(s: Setting, seed: int) -> Any:
    """The train stage's agent, untrained, with its reward multiplier fixed from the data."""
    import torch

    from amago_pipe.train.runtime import build_agent

    torch.manual_seed(seed)
    agent = build_agent(s.cfg.agent, s.cfg.model, s.spec, max_seq_len=s.cfg.max_seq_len)
    agent.reward_multiplier.fill_(s.multiplier)
    if agent.critic.bins is not None or not agent.discrete:
        raise SystemExit("the value probe needs a scalar critic with one output per discrete action")
    return agent


def value_probe(s: Setting, per_task: bool, updates: int, seed: int) -> dict[str, dict[str, float]]:
    """Train the critics on returns-to-go with one PopArt for all tasks (the agent's) or one per task; score them."""
    from torch import nn

    from amago_pipe.agents.popart import PopArt

    agent = fresh_agent(s, seed)
    poparts = (
        [PopArt(len(agent.gammas), beta=agent.cfg.popart_beta) for _ in s.data.names] if per_task else [agent.popart]
    )
    probe = nn.ModuleDict({"model": agent.model, "critic": agent.critic, "poparts": nn.ModuleList(poparts)})
    seconds = train(probe, lambda pb: value_loss(agent, poparts, pb), s.data, s.cfg, updates, seed)
    out = {}
    for k, name in enumerate(s.data.names):
        popart = poparts[k if per_task else 0]
        out[name] = value_scores(agent, popart, s.held[name], s.multiplier, name in s.tmaze)
        out[name]["sigma"] = float(popart.sigma[-1]) / s.multiplier
    print(f"  value probe ({'one PopArt per task' if per_task else 'one PopArt for all tasks'}): {seconds:.0f} s")
    return out


def checkpoint_scores(s: Setting, folder: str) -> dict[str, dict[str, float]]:
    """The RL agent's own critic (a train checkpoint with critic weights), scored like the value probe."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    from amago_pipe.agents.loading import agent_from_weights

    meta = json.loads((Path(folder) / "state.json").read_text())["meta"]
    agent = agent_from_weights(Path(folder) / "model.safetensors", meta)
    agent.load_state_dict(load_file(str(Path(folder) / "model.safetensors")), strict=False)
    multiplier = float(agent.reward_multiplier)
    out = {}
    for name in s.data.names:
        out[name] = value_scores(agent, agent.popart, s.held[name], multiplier, name in s.tmaze)
        out[name] |= actor_scores(agent, s.held[name]) | {"sigma": float(agent.popart.sigma[-1]) / multiplier}
    return out


def actor_scores(agent: Any, batches: list[ProbeBatch]) -> dict[str, float]:
    """The live actor's mean probability of its most likely action, and of `right` off a T-Maze junction."""
    import torch

    from amago_pipe.spec import DEFAULT_OBS_KEY

    mode, right = [], []
    with torch.no_grad():
        for pb in batches:
            b = pb.batch
            states, _ = agent.model.encode(b.obs, b.rl2, b.time)
            valid = agent.valid_actions({k: v[:, :-1] for k, v in b.obs.items()})
            probs = agent.actor(states[:, :-1], valid).probs[..., -1, :]  # (B, L, A) at the acting gamma
            mode.append(probs.amax(-1)[b.mask].numpy())
            corridor = b.mask & (b.obs[DEFAULT_OBS_KEY][:, :-1, 1] < 0.5)
            right.append(probs[..., RIGHT][corridor].numpy())
    return {"p_mode": float(np.concatenate(mode).mean()), "p_right": float(np.concatenate(right).mean())}


def memory_probe(s: Setting, updates: int, seed: int) -> dict[str, dict[str, float]]:
    """`cue` on the T-Maze tasks and `bc` on the tasks with rewards to filter by, trained together on one network."""
    import torch
    from torch import nn

    agent = fresh_agent(s, seed)
    head = nn.Linear(agent.model.out_dim, 1)
    probe = nn.ModuleDict({"model": agent.model, "actor": agent.actor, "head": head})
    rewarded = {n: float(np.mean(np.concatenate([ep.rewards > 0 for ep in eps]))) for n, eps in zip(s.data.names, s.data.episodes)}  # fmt: skip
    cued = torch.tensor([n in s.tmaze for n in s.data.names])
    cloned = torch.tensor([0 < rewarded[n] < ALWAYS_REWARDED for n in s.data.names])

    def loss(pb: ProbeBatch) -> Any:
        states, _ = agent.model.encode(pb.batch.obs, pb.batch.rl2, pb.batch.time)  # (B, L+1, D), once
        _, logp = bc_logp(agent, states, pb)
        keep = pb.batch.mask & (pb.batch.rewards > 0) & cloned[pb.task][:, None]
        bc = -logp[keep].mean() if keep.any() else logp.sum() * 0
        return bc + (cue_loss(head, states, pb, cued)[0] if s.tmaze else 0)

    seconds = train(probe, loss, s.data, s.cfg, updates, seed)
    print(f"  memory probe (bc + cue): {seconds:.0f} s")
    out: dict[str, dict[str, float]] = {}
    for k, name in enumerate(s.data.names):
        out[name] = {"rewarded": rewarded[name]}
        if bool(cloned[k]):
            out[name] |= bc_scores(agent, s.held[name])
        if name in s.tmaze:
            out[name] |= cue_scores(agent, head, s.held[name], cued)
    return out


def setting(args: argparse.Namespace) -> Setting:
    """Load the pipeline's train stage, the store's episodes by task and the held-out batches."""
    import torch

    from amago_pipe.config.loader import load_pipeline
    from amago_pipe.config.train import TrainStageConfig
    from amago_pipe.spec import DEFAULT_OBS_KEY
    from amago_pipe.train.runtime import auto_reward_multiplier

    torch.set_num_threads(1)
    stages = load_pipeline(args.pipeline, args.set).config.stages
    names = [n for n, st in stages.items() if isinstance(st, TrainStageConfig) and n in (args.stage or n)]
    if len(names) != 1:
        raise SystemExit(f"{args.pipeline}: name one train stage with --stage (found: {', '.join(names) or 'none'})")
    cfg: Any = stages[names[0]]
    partitions = [p for p, w in cfg.partitions.items() if w > 0]
    spec, tasks, rewards = load_tasks(args.store, partitions)
    unknown = set(args.tasks or ()) - set(tasks)
    if unknown:
        raise SystemExit(f"--tasks: not in the store: {', '.join(sorted(unknown))} (it holds: {', '.join(tasks)})")
    tasks = {n: eps for n, eps in tasks.items() if n in (args.tasks or tasks)}
    agent_cfg = cfg.agent
    multiplier = (
        auto_reward_multiplier(rewards) if agent_cfg.reward_multiplier == "auto" else agent_cfg.reward_multiplier
    )
    gammas = np.array(agent_cfg.all_gammas)
    train_eps, held_eps = split(tasks)
    data = TaskWindows(spec, train_eps, cfg.max_seq_len, gammas, float(multiplier))
    held_windows = TaskWindows(spec, held_eps, cfg.max_seq_len, gammas, float(multiplier))
    rng = np.random.default_rng(10_000 + args.seed)
    held = {n: [held_windows.sample(cfg.batch_size, rng, task=k) for _ in range(args.eval_batches)]
            for k, n in enumerate(held_windows.names)}  # fmt: skip
    tmaze = {n for n in tasks if any(t in n.lower() for t in args.tmaze)}
    junction = {
        n: (float(np.mean([(ep.obs[DEFAULT_OBS_KEY][:, 1] >= 0.5).any() for ep in tasks[n]])),
            float(np.mean([ep.terminated[-1] for ep in tasks[n]])))
        for n in tmaze
    }  # fmt: skip
    return Setting(cfg, spec, float(multiplier), data, held, tmaze, junction)


def cell(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def print_tables(s: Setting, results: dict[str, dict[str, dict[str, float]]]) -> None:
    """The per-task tables of the probes that ran."""
    names = s.data.names
    if "shared" in results:
        sources: list[str] = [k for k in ("shared", "per_task", "rl") if k in results]
        labels = {"shared": "one PopArt", "per_task": "PopArt per task", "rl": "RL critic"}
        first = f"R^2 gamma {s.cfg.agent.all_gammas[0]}"
        heads = [f"{w} {labels[k]}" for w in ("R^2", "RMSE", first) for k in sources]
        print("\n| task | return-to-go std | " + " | ".join(heads) + " |")
        print("|---|---|" + "---|" * len(heads))
        for n in names:
            cells = [
                cell(results[k][n][m], 3 if m == "rmse" else 2) for m in ("r2", "rmse", "r2_first") for k in sources
            ]
            print(f"| {n} | {cell(results['shared'][n]['rtg_std'], 3)} | " + " | ".join(cells) + " |")
        sigma = ", ".join(f"{labels[k]} {cell(results[k][names[0]]['sigma'], 3)}" for k in sources if k != "per_task")
        print(f"(acting gamma {s.cfg.agent.gamma}; reward units; the shared value scale sigma: {sigma})")
        print_actor_view(s, results, sources, labels)
    if "memory" in results:
        print("\n| task | rewarded steps | bc: chance | bc: accuracy | cue: after t=0 | cue: last step |")
        print("|---|---|---|---|---|---|")
        for n in names:
            r = results["memory"][n]
            print(f"| {n} | {cell(r['rewarded'])} | {cell(r.get('chance'))} | {cell(r.get('bc'))} | "
                  f"{cell(r.get('cue_any'))} | {cell(r.get('cue_last'))} |")  # fmt: skip


def print_actor_view(s: Setting, results: dict[str, Any], sources: list[str], labels: dict[str, str]) -> None:
    """What the actor is given: the spread of Q over the valid actions in PopArt units, T-Maze action rankings."""
    rl = "rl" in results
    heads = [f"Q spread / sigma {labels[k]}" for k in sources] + (["RL actor p(mode)"] if rl else [])
    print("\n| task | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for n in s.data.names:
        cells = [cell(results[k][n]["gap"], 4) for k in sources] + ([cell(results["rl"][n]["p_mode"])] if rl else [])
        print(f"| {n} | " + " | ".join(cells) + " |")
    for n in sorted(s.tmaze):
        parts = [f"{labels[k]} {cell(results[k][n]['right'])} / {cell(results[k][n]['cued'])}" for k in sources]
        steps, (reached, chose) = int(results["shared"][n]["junction_steps"]), s.junction[n]
        actor = f"; the RL actor's p(right) in the corridor {cell(results['rl'][n]['p_right'])}" if rl else ""
        print(f"{n} (episodes reaching the junction {reached:.3f}, choosing an arm {chose:.3f}): best action "
              f"`right` in the corridor / cued arm first at the junction ({steps} steps): " + "; ".join(parts) + actor)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pipeline", help="the pipeline file whose train stage's network is probed")
    p.add_argument("store", help="a store of its tasks' episodes (its train or collect stage's)")
    p.add_argument("--stage", default=None, help="the train stage (default: the pipeline's only one)")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", help="override, as amago-pipe run")
    p.add_argument("--probes", nargs="+", default=["value", "memory"], choices=["value", "memory"])
    p.add_argument("--updates", type=int, default=1500, help="updates per probe")
    p.add_argument("--eval-batches", type=int, default=4, help="held-out batches per task")
    p.add_argument("--checkpoint", default=None, help="a train checkpoint folder: score the RL agent's critic too")
    p.add_argument("--tasks", nargs="+", default=None, help="probe only these tasks of the store (default: all)")
    p.add_argument("--tmaze", nargs="*", default=["tmaze"], help="task names holding one of these are T-Mazes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the scores to this JSON file")
    args = p.parse_args()
    s = setting(args)
    print(f"{len(s.data.names)} tasks, reward multiplier {s.multiplier:g}, {args.updates} updates per probe")
    results: dict[str, dict[str, dict[str, float]]] = {}
    if "value" in args.probes:
        results["shared"] = value_probe(s, False, args.updates, args.seed)
        results["per_task"] = value_probe(s, True, args.updates, args.seed)
        if args.checkpoint:
            results["rl"] = checkpoint_scores(s, args.checkpoint)
    if "memory" in args.probes:
        results["memory"] = memory_probe(s, args.updates, args.seed)
    print_tables(s, results)
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
