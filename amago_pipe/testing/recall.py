"""The memory check: train an agent offline on random-policy `DelayedRecall` data, then score it in the env.

Shared by the regression test (`tests/integration/test_memory_recall.py`) and `benchmarks/bench_memory.py`.
`supervised_probe` trains the same sequence model to name the cue with cross-entropy on the same batches, which
separates "the network cannot remember" from "the RL update does not teach it to". Imports the learner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from amago_pipe.agents.terms import discrete_terms
from amago_pipe.config import auto
from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import RandomPolicyConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.learner import Learner, LearnerHooks
from amago_pipe.train.optim import lr_at, make_optimizer, set_lr
from amago_pipe.train.runtime import build_agent, resolve_reward_multiplier
from amago_pipe.train.validation import run_episodes

RECALL_ID = "amago_pipe/DelayedRecall-v0"
SMALL_TRAJ: dict[str, dict[str, Any]] = {
    "transformer": {"type": "transformer", "d_model": 64, "n_heads": 4, "n_layers": 2},
    "gru": {"type": "gru", "d_model": 64},
    "gru-chrono": {"type": "gru", "d_model": 64, "gate_init": "chrono"},
    "mamba": {"type": "mamba", "d_model": 64, "n_layers": 2},
    "ff": {"type": "ff", "d_model": 64},
}
"""The small sequence models the memory check compares (the `ff` one has no memory: the control; `gru-chrono`:
every GRU unit chrono-initialised, the setting for long-range recall)."""
MEMORY_RECIPE: dict[str, Any] = {"targets": {"correction": "tree_backup"}, "critic": {"loss": "huber"}}
"""The README's memory recipe: agent keys added to the defaults for memory tasks learned from exploratory data
(merge it with `merged`: its blocks add to an agent's own)."""


def memory_recipe(encoder: str) -> dict[str, Any]:
    """The memory recipe for a trajectory encoder: a GRU also keeps the actor's gradient out of the sequence model."""
    return {**MEMORY_RECIPE, **({"actor_trains_model": False} if encoder.startswith("gru") else {})}


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, mapping into mapping (an agent's keys plus a recipe's blocks)."""
    out = dict(base)
    for key, value in extra.items():
        inner = out.get(key)
        out[key] = merged(inner, value) if isinstance(inner, dict) and isinstance(value, dict) else value
    return out


@dataclass(frozen=True)
class RecallTask:
    """One DelayedRecall variant and its offline dataset."""

    delay: int = 30
    distractor_std: float = 0.0
    n_cues: int = 4
    episodes: int = 800
    """Random-policy episodes in the dataset."""

    def env(self, n_envs: int, seed: int) -> EnvConfig:
        kwargs = {"delay": self.delay, "distractor_std": self.distractor_std, "n_cues": self.n_cues}
        return build_strict(EnvConfig, {"id": RECALL_ID, "kwargs": kwargs, "n_envs": n_envs, "seed": seed})


@dataclass(frozen=True)
class RecallRun:
    """How to train: encoder, budget, seed; `agent` and `train` override the defaults (empty: the default recipe)."""

    encoder: str = "transformer"
    updates: int = 1200
    seed: int = 0
    batch_size: int = 24
    hide_rl2: bool | str = False
    """`tstep_encoder.hide_rl2`: hide the previous action and reward (`True`) or the action only (`"action"`)."""
    agent: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)


def recall_store(task: RecallTask, root: Path, *, seed: int = 0) -> TrajectoryStore:
    """The task's random-policy dataset in a store below `root` (made once, reused by later calls)."""
    path = root / f"recall-d{task.delay}-std{task.distractor_std:g}-c{task.n_cues}-e{task.episodes}-s{seed}.zarr"
    if (path / "zarr.json").exists():
        return TrajectoryStore.open(path)
    env = make_batched_env(task.env(16, seed))
    tmp = path.with_name(path.name + ".tmp")
    try:
        store = TrajectoryStore.create(tmp, env.spec)
        policy = make_policy(RandomPolicyConfig(), PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=seed))
        with store.writer("protected", atomic=True) as writer:
            rollout(env, policy, task.episodes, seed=seed, keep_episodes=False, on_episode=lambda ep, _: writer.add(ep))
    finally:
        env.close()
    tmp.rename(path)
    return TrajectoryStore.open(path)


def train_config(task: RecallTask, run: RecallRun) -> TrainStageConfig:
    """The train stage config of a run: windows cover a whole episode; small nets; the agent's default recipe."""
    data: dict[str, Any] = {
        "type": "train",
        "max_seq_len": task.delay + 2,
        "batch_size": run.batch_size,
        "epochs": 1,
        "updates_per_epoch": run.updates,
        "lr": 5e-4,
        "warmup_steps": 100,
        "seed": run.seed,
        "num_threads": 1,
        "model": {
            "tstep_encoder": {"type": "ff", "d_hidden": 128, "d_output": 64, "hide_rl2": run.hide_rl2},
            "traj_encoder": SMALL_TRAJ[run.encoder],
        },
        "agent": merged({"type": "agent", "actor": {"d_hidden": 128}, "critic": {"d_hidden": 128}}, run.agent),
        "logging": {"log_interval": 100, "plots": False},
        **run.train,
    }
    return build_strict(TrainStageConfig, data)  # type: ignore[no-any-return]


def train_and_score(
    task: RecallTask, run: RecallRun, workdir: Path, *, eval_episodes: int = 200, sampled: bool = False
) -> dict[str, Any]:
    """Train offline on the task's dataset, then roll out greedily (and, with `sampled`, with sampled actions too:
    `success_sampled`); returns success rates and timings."""
    store = recall_store(task, workdir)
    cfg = train_config(task, run)
    started = time.perf_counter()
    out_dir = workdir / f"run-{run.encoder}-d{task.delay}-std{task.distractor_std:g}-s{run.seed}-{time.time_ns()}"
    learner = Learner(cfg, store, out_dir, seed=run.seed, hooks=LearnerHooks())
    learner.run()
    out: dict[str, Any] = {"train_s": round(time.perf_counter() - started, 1), "updates": run.updates}
    for key, greedy in [("success", True), ("success_sampled", False)][: 1 + sampled]:
        with learner.agent.acting_weights():  # what the saved policy files act with
            result = run_episodes(
                learner.agent, task.env(20, 10_000 + run.seed), eval_episodes, spec=store.spec, greedy=greedy,
                seed=10_000 + run.seed, where="recall",
            )  # fmt: skip
        out[key] = float(result.summary()["success_rate"])
    return out


def supervised_probe(task: RecallTask, run: RecallRun, workdir: Path, *, check_every: int = 50) -> dict[str, Any]:
    """Train the run's sequence model + a linear head to name the cue at the answer step (cross-entropy).

    Same store batches as the agent. Returns the first update count at which a held-out batch is >= 95% correct
    (None if never) and the final accuracy.
    """
    store = recall_store(task, workdir)
    cfg = train_config(task, run)
    torch.manual_seed(run.seed)
    model = build_agent(cfg.agent, cfg.model, store.spec, max_seq_len=cfg.max_seq_len).model
    head = torch.nn.Linear(model.out_dim, task.n_cues)

    def step(batch: Any) -> tuple[torch.Tensor, float]:
        cue, rows, steps = _answers(batch, task.n_cues)
        states, _ = model(batch.obs, batch.rl2, batch.time)  # (B, L+1, D)
        logits = head(states[rows, steps])  # (N, n_cues)
        accuracy = float((logits.argmax(-1) == cue[rows]).float().mean())
        return torch.nn.functional.cross_entropy(logits, cue[rows]), accuracy

    return _fit(
        step, torch.nn.ModuleDict({"model": model, "head": head}), store, cfg, run, "probe", check_every=check_every
    )


def critic_ablation(
    task: RecallTask, run: RecallRun, workdir: Path, *, steps: str = "all", check_every: int = 50
) -> dict[str, Any]:
    """Train the agent's sequence model and critics with the critic loss alone, on every step or the answer step only.

    The accuracy is how often the critics' best action (acting gamma, mean over critics) at the answer step is the
    cue. Comparing `steps="answer"` with `steps="all"` shows what the TD loss on the other steps costs the memory.
    """
    if steps not in ("answer", "all"):
        raise ValueError(f"critic_ablation: steps must be 'answer' or 'all', got {steps!r}")
    store = recall_store(task, workdir)
    cfg = train_config(task, run)
    torch.manual_seed(run.seed)
    agent = build_agent(cfg.agent, cfg.model, store.spec, max_seq_len=cfg.max_seq_len)
    resolve_reward_multiplier(agent, store, {"protected": 1.0})
    if not agent.discrete:
        raise ValueError("critic_ablation needs a critic with one output per discrete action")

    def step(batch: Any) -> tuple[torch.Tensor, float]:
        cue, rows, at = _answers(batch, task.n_cues)
        states, _ = agent.model(batch.obs, batch.rl2, batch.time)  # (B, L+1, D)
        terms = discrete_terms(agent, states, batch)
        mask = batch.mask & batch.terminated if steps == "answer" else batch.mask  # (B, L)
        with torch.no_grad():
            q = agent.values(agent.critic(states[rows, at][:, None]), axis=-2).mean(0)[:, 0, -1]  # (N, A)
        accuracy = float((q.argmax(-1) == cue[rows]).float().mean())
        return agent.critic_objective(terms.critic_out, terms.targets, mask), accuracy

    trained = torch.nn.ModuleDict({"model": agent.model, "critic": agent.critic, "popart": agent.popart})
    return _fit(step, trained, store, cfg, run, f"critic_{steps}", check_every=check_every, after=agent.update_targets)


def _fit(
    step: Any, trained: torch.nn.Module, store: TrajectoryStore, cfg: TrainStageConfig, run: RecallRun, name: str, *,
    check_every: int, after: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """AdamW on `step(batch) -> (loss, accuracy)` over store batches; when held-out accuracy first reaches 95%.

    The learner's optimiser and warmup: `trained`'s `model.` parameters learn at the run's `model_lr_scale` x `lr`.
    """
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)  # as the learner does: oversubscribed threads are ~30x slower here
    opt = make_optimizer(
        trained, lr=cfg.lr, weight_decay=cfg.weight_decay, scaled=("model.",), scale=auto.model_lr_scale(cfg)
    )
    loader = BatchLoader(store, batch_size=cfg.batch_size, seq_len=cfg.max_seq_len, partitions={"protected": 1.0},
                         seed=run.seed, threaded=False)  # fmt: skip
    held_out = loader.sample(10**9)
    solved_at, accuracy = None, 0.0
    for update in range(1, run.updates + 1):
        set_lr(opt, lr_at(update - 1, peak=cfg.lr, warmup_steps=cfg.warmup_steps))
        loss, _ = step(next(loader))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if after is not None:
            after()
        if update % check_every == 0:
            with torch.no_grad():
                accuracy = step(held_out)[1]
            if solved_at is None and accuracy >= 0.95:
                solved_at = update
    return {f"{name}_solved_at": solved_at, f"{name}_accuracy": round(accuracy, 3)}


def _answers(batch: Any, n_cues: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The cue of each window (B,) and the (row, step) indices of the answer steps (each window's terminal step)."""
    cue = batch.obs["observation"][:, 0, :n_cues].argmax(-1)  # (B,) shown at t=0
    rows, steps = (batch.mask & batch.terminated).nonzero(as_tuple=True)
    return cue, rows, steps
