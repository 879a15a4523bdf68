"""Online collection and warm starts for the learner: between epochs the current policy acts in parallel envs and what it
collects is appended to a FIFO partition of the store, which the learner samples alongside the other partitions.

Each epoch's data is one writer session whose segments carry `online_run`/`online_epoch` attributes; on
resume, segments of epochs after the last checkpoint are dropped, so the store holds exactly what the resumed
counters describe. The policy's memory (KV cache / hidden state) persists across steps and is reset per env
at each episode start. Envs restart on resume (their state is not checkpointable).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.online import OnlineConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.data.loader import check_partitions
from amago_pipe.envs.exploration import ExploringPolicy, make_exploration
from amago_pipe.envs.stats import summarize
from amago_pipe.envs.stepper import Stepper
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.tools import written_by
from amago_pipe.train import checkpoint as ckpt

log = logging.getLogger("amago_pipe.train")

RUN_ATTR = "online_run"
"""Segment attribute naming the train stage that collected a segment."""
EPOCH_ATTR = "online_epoch"
"""Segment attribute: the epoch (0-based) whose policy collected it."""


PART_PREFIXES = {
    "model": ("model.",),
    "actor": ("actor.", "target_actor."),
    "critic": ("critic.", "target_critic.", "popart.", "reward_multiplier"),
}
"""State-dict prefixes of each part `init_from` can copy."""


def copy_parts(agent: Any, source: Path, parts: Sequence[str], *, where: str) -> None:
    """Copy `parts` (model, actor, critic) of a checkpoint folder or a policy file (model and actor only) into
    `agent`; the other weights keep their values. Model and actor come from the source's policy average when it
    has one (the policy its stage evaluated; the live ones can be far worse). DataError when the source is of
    another model shape."""
    weights = ckpt.load_checkpoint(source).model if source.is_dir() else ckpt.load_weights(source)
    weights.update({k.removeprefix("policy_avg."): v for k, v in weights.items() if k.startswith("policy_avg.")})
    weights.setdefault("reward_multiplier", agent.reward_multiplier.clone())  # a source older than the field
    if "actor" in parts and not any(k.startswith("target_actor.") for k in weights):  # a policy file
        weights.update({f"target_{k}": v for k, v in weights.items() if k.startswith("actor.")})
    prefixes = tuple(p for part in parts for p in PART_PREFIXES[part])
    chosen = {k: v for k, v in weights.items() if k.startswith(prefixes)}
    expected = {k: v for k, v in agent.state_dict().items() if k.startswith(prefixes)}
    ckpt.check_shapes(expected, chosen, where=f"{where}: {source}")
    agent.load_state_dict(chosen, strict=False)


def check_online_data(cfg: TrainStageConfig, store: TrajectoryStore, *, where: str) -> None:
    """Before anything is built: the partitions to train on exist and hold data (those online collection
    fills excepted)."""
    online = cfg.online
    if online is None:
        check_partitions(store, cfg.partitions, where=f"{where}.partitions")
        return
    offline = {p: w for p, w in cfg.partitions.items() if p != online.partition}
    if offline:
        check_partitions(store, offline, where=f"{where}.partitions")
    if online.start_at_epoch > 0 and not any(w > 0 for w in offline.values()):
        raise DataError(
            f"{where}.online.start_at_epoch: epochs before {online.start_at_epoch} would train on partitions "
            f"{cfg.partitions} before any data is collected; give weight to a filled partition or start at 0"
        )


def staleness(store: TrajectoryStore, partition: str, epoch: int) -> dict[str, float]:
    """How many epochs behind `epoch` the policies that collected `partition`'s data are (timestep-weighted
    mean and max over the segments online collection wrote, the learner's and followers' alike)."""
    if partition not in store.partitions():
        return {}
    lags = [(epoch - int(s.attrs[EPOCH_ATTR]), s.timesteps) for s in store.segments(partition) if EPOCH_ATTR in s.attrs]
    total = sum(n for _, n in lags)
    if not total:
        return {}
    return {
        "online/staleness_mean": round(sum(lag * n for lag, n in lags) / total, 3),
        "online/staleness_max": float(max(lag for lag, _ in lags)),
    }


def wait_for_actors(
    store: TrajectoryStore, partition: str, check_stop: Callable[[], None], *, where: str, poll_s: float = 1.0
) -> None:
    """Block until decoupled actors have sealed some data into `partition` (`timesteps_per_epoch: 0`)."""
    waited = 0.0
    while partition not in store.partitions() or store.partition_info(partition).episodes == 0:
        check_stop()
        if waited % 30 < poll_s:
            log.info("%s: waiting for `amago-pipe collect --follow` actors to fill '%s'", where, partition)
        time.sleep(poll_s)
        waited += poll_s


def collected_fingerprint(store: TrajectoryStore, partition: str, tag: str) -> str:
    """Hash of the sealed segments run `tag` collected in `partition` ('missing' when none)."""
    return written_by(store, partition, RUN_ATTR, tag)


class OnlineCollector:
    """Acts with `agent` in the configured envs and appends the episodes to `cfg.partition` of `store`."""

    def __init__(
        self, cfg: OnlineConfig, agent: Any, store: TrajectoryStore, *, seed: int, tag: str, where: str, device: Any
    ):
        self.cfg, self.agent, self.store, self.tag, self.where = cfg, agent, store, tag, f"{where}.online"
        self.seed = seed
        self.env = make_batched_env(cfg.env, where=f"{self.where}.env")
        try:
            store.spec.check_compatible(self.env.spec, what=f"{self.where}.env", against=f"store {store.url}")
        except DataError:
            self.env.close()
            raise
        self.policy = AgentPolicy(agent, greedy=cfg.greedy, device=device, seed=seed)
        self.exploration = make_exploration(
            cfg.exploration, self.env.spec, seed=seed + 1, where=f"{self.where}.exploration"
        )
        self.stepper = Stepper(
            self.env,
            ExploringPolicy(self.policy, self.exploration),
            seed=seed,
            source=f"online:{tag}",
            save_every=cfg.save_every,
        )
        self.env_steps = 0
        self.episodes = 0

    @property
    def vector_steps(self) -> int:
        """Steps of all envs per epoch: `timesteps_per_epoch` spread over the envs (rounded up)."""
        return -(-self.cfg.timesteps_per_epoch // self.env.n_envs)

    def collect(self, epoch: int, check_stop: Callable[[], None]) -> dict[str, Any]:
        """One epoch's collection, sealed into the store before returning; its statistics under `online/`."""
        self.stepper.meta.update(policy_version=epoch)
        attrs = {RUN_ATTR: self.tag, EPOCH_ATTR: epoch, "source": f"online:{self.tag}"}
        was_training = self.agent.training
        self.agent.eval()
        written = {"episodes": 0, "timesteps": 0}

        try:
            with self.store.writer(self.cfg.partition, attrs=attrs) as writer:

                def add(episode: Any) -> None:
                    writer.add(episode)
                    written["episodes"] += 1
                    written["timesteps"] += episode.length

                result = self.stepper.run(self.vector_steps, on_episode=add, check_stop=check_stop)
        finally:
            self.agent.train(was_training)
        self._check_capacity(written["timesteps"], max((st.length for st in result.stats), default=0))
        self.env_steps += result.env_steps
        self.episodes += len(result.stats)
        row: dict[str, Any] = {
            "online/env_steps": self.env_steps,
            "online/episodes": self.episodes,
            "online/env_steps_per_s": round(result.env_steps / max(result.seconds, 1e-9), 1),
            "online/saved_timesteps": written["timesteps"],
            "online/rate_mean": float(np.mean(self.exploration.rates(np.asarray(self.stepper.step.time))))
            if self.stepper.step is not None
            else 0.0,
        }
        if result.stats:
            summary = summarize(result.stats)
            row.update({f"online/{k}": summary[k] for k in ("return_mean", "length_mean") if k in summary})
            if summary.get("success_rate") is not None:
                row["online/success_rate"] = summary["success_rate"]
        return row

    def _check_capacity(self, written: int, longest: int) -> None:
        """DataError when the fifo capacity evicted everything just written (smaller than one episode)."""
        _, capacity = self.store.partition_config(self.cfg.partition)
        if written and capacity is not None and self.store.partition_info(self.cfg.partition).episodes == 0:
            raise DataError(
                f"store partition '{self.cfg.partition}': capacity_timesteps {capacity} is smaller than one episode "
                f"(the longest collected had {longest} timesteps), so every episode is evicted as it arrives; raise "
                "`store: {partitions: {fifo: {capacity_timesteps: ...}}}` or save pieces with `online.save_every`"
            )

    def drop_after(self, epoch: int) -> int:
        """Drop the segments this run collected in epochs >= `epoch` (not covered by the checkpoint resumed
        from); returns how many were dropped."""
        if self.cfg.partition not in self.store.partitions():
            return 0
        stale = [
            s.id
            for s in self.store.segments(self.cfg.partition)
            if s.attrs.get(RUN_ATTR) == self.tag and int(s.attrs.get(EPOCH_ATTR, -1)) >= epoch
        ]
        if stale:
            self.store.drop_segments(self.cfg.partition, stale)
            log.info("dropped %d online segment(s) collected after the checkpoint (epoch >= %d)", len(stale), epoch)
        return len(stale)

    def state_dict(self) -> dict[str, Any]:
        """Counters, the exploration schedule and the policy's sampling stream (JSON-able)."""
        return {
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "exploration": self.exploration.state_dict(),
            "policy_rng": self.policy.sampling_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the counters and schedules of `state_dict()`; the envs restart from fresh resets."""
        self.env_steps, self.episodes = int(state["env_steps"]), int(state["episodes"])
        self.exploration.load_state_dict(state["exploration"])
        self.policy.set_sampling_state(state["policy_rng"])
        self.stepper.seed = self.seed + 1_000_003 * (1 + self.env_steps % 997)  # restarted envs: fresh resets

    def close(self) -> None:
        """Close the envs."""
        self.env.close()
