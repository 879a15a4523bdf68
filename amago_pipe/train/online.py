"""Online collection and warm starts for the learner: between epochs the current policy acts in parallel envs and what it
collects is appended to a FIFO partition of the store, which the learner samples alongside the other partitions.

Each epoch's data is one writer session whose segments carry `online_run`/`run_id`/`online_epoch` attributes; on
resume, this run's segments of epochs after the last checkpoint are dropped, so the store holds exactly what the
resumed counters describe; a FIFO partition holding another run's online data is refused (`check_owner`). The
policy's memory (KV cache / hidden state) persists across steps and is reset per env at each episode start. Envs
restart on resume (their state is not checkpointable).
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
from amago_pipe.envs.stats import flat_metrics, summarize
from amago_pipe.envs.stepper import Stepper
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import AmagoPipeError, DataError, out_of_space, out_of_space_error
from amago_pipe.store import SegmentInfo, TrajectoryStore
from amago_pipe.store.leftovers import discard_partition_if_unused
from amago_pipe.store.tools import segments_digest
from amago_pipe.train import checkpoint as ckpt

log = logging.getLogger("amago_pipe.train")

RUN_ATTR = "online_run"
"""Segment attribute naming the train stage that collected a segment (`<pipeline>/<stage>`, or a follower)."""
RUN_ID_ATTR = "run_id"
"""Segment attribute: the run directory that collected a segment, or that its follower follows (absent on data of
runs made before run ids, and of a learner given no `<label>@<run id>` tag)."""
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


def split_tag(tag: str) -> tuple[str, str]:
    """`(label, run id)` of a collector's tag `<label>@<run id>` (run id '' for a plain label)."""
    label, sep, run_id = tag.rpartition("@")
    return (label, run_id) if sep else (tag, "")


def collected_by(store: TrajectoryStore, partition: str, tag: str) -> list[SegmentInfo]:
    """The sealed segments collector `tag` wrote in `partition` (its label and its run id both match)."""
    segments = store.segments(partition) if partition in store.partitions() else []
    label, run_id = split_tag(tag)
    return [s for s in segments if s.attrs.get(RUN_ATTR) == label and s.attrs.get(RUN_ID_ATTR, "") == run_id]


def collected_fingerprint(store: TrajectoryStore, partition: str, tag: str) -> str:
    """Hash of the sealed segments run `tag` collected in `partition` ('missing' when none); the same digest
    as `store.tools.written_by`, so a run made before run ids keeps its fingerprint."""
    return segments_digest(store, collected_by(store, partition, tag))


def drop_collected_after(store: TrajectoryStore, partition: str, tag: str, epoch: int) -> int:
    """Drop the segments collector `tag` wrote in epochs >= `epoch`; returns how many. Other runs' segments and
    followers' are kept (followers' data is not in the learner's counters)."""
    stale = [s.id for s in collected_by(store, partition, tag) if int(s.attrs.get(EPOCH_ATTR, -1)) >= epoch]
    if stale:
        store.drop_segments(partition, stale)
        log.info("dropped %d online segment(s) collected after the checkpoint (epoch >= %d)", len(stale), epoch)
    return len(stale)


def check_owner(store: TrajectoryStore, partition: str, tag: str, *, where: str) -> None:
    """DataError when `partition` holds online data of another run than `tag`'s (its followers' data is its own).

    Runs sharing one FIFO would train on each other's episodes, and their counters would stop describing the
    data, so this is refused whether the other run is finished or still running; an online stage checks at its
    start and before each epoch's collection. Data without a run id (from before run ids) counts as another
    run's unless `tag` has none either. To learn from another run's data, weight its partition (`partitions:`)."""
    if partition not in store.partitions():
        return
    run_id = split_tag(tag)[1]
    foreign = [s for s in store.segments(partition) if RUN_ATTR in s.attrs and s.attrs.get(RUN_ID_ATTR, "") != run_id]
    if not foreign:
        return
    latest = max(foreign, key=lambda s: s.sealed)
    other = latest.attrs.get(RUN_ID_ATTR) or "made before run ids"
    more = len({s.attrs.get(RUN_ID_ATTR, "") for s in foreign}) - 1
    episodes = sum(s.episodes for s in foreign)
    raise DataError(
        f"{where}: store partition '{partition}' ({store.url}) holds online data of another run "
        f"({latest.attrs[RUN_ATTR]}, run {other}{f', and {more} more runs' if more else ''}: {episodes} "
        f"episode{'s' * (episodes != 1)}, last written {_ago(latest.sealed)}); runs sharing a FIFO "
        "would train on each other's episodes. Give this run its own store (`--set store=...`) or its own FIFO "
        "partition (`online.partition`, weighted in `partitions:`)"
    )


def _ago(when: float) -> str:
    """`12 s ago`, `5 min ago`, `3 h ago`."""
    seconds = max(0.0, time.time() - when)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.0f} h ago"


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
            source=f"online:{split_tag(tag)[0]}",
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
        check_owner(self.store, self.cfg.partition, self.tag, where=self.where)  # another run started meanwhile
        self.stepper.meta.update(policy_version=epoch)
        label, run_id = split_tag(self.tag)
        attrs = {RUN_ATTR: label, EPOCH_ATTR: epoch, "source": f"online:{label}"}
        if run_id:
            attrs[RUN_ID_ATTR] = run_id
        was_training = self.agent.training
        self.agent.eval()
        written = {"episodes": 0, "timesteps": 0}
        fresh = self.cfg.partition not in self.store.partitions()
        try:
            with self.store.writer(self.cfg.partition, attrs=attrs) as writer:

                def add(episode: Any) -> None:
                    writer.add(episode)
                    written["episodes"] += 1
                    written["timesteps"] += episode.length

                result = self.stepper.run(self.vector_steps, on_episode=add, check_stop=check_stop)
        except BaseException as e:
            self._failed_append(e, fresh)
            raise
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
            summary = flat_metrics(summarize(result.stats))
            keep = ("return_mean", "length_mean", "success_rate")
            row.update({f"online/{k}": v for k, v in summary.items() if k in keep or k.startswith("task")})
        return row

    def _failed_append(self, e: BaseException, fresh: bool) -> None:
        """After a failed epoch's append: remove the partition it created when nothing is in it, and raise the
        OutOfSpaceError naming the store and partition when it ran out of space (else the caller re-raises `e`)."""
        if fresh:
            discard_partition_if_unused(self.store.files, self.cfg.partition)
        if isinstance(e, Exception) and not isinstance(e, AmagoPipeError) and out_of_space(e) is not None:
            kept = "episodes sealed before stay; those not yet sealed were dropped"
            raise out_of_space_error(f"{self.store.url} (partition '{self.cfg.partition}')", e, kept=kept) from e

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
        return drop_collected_after(self.store, self.cfg.partition, self.tag, epoch)

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
