"""The learner: builds the agent, samples store batches, runs AdamW updates on accelerate, checkpoints, logs.

One process by default; data-parallel under `accelerate launch` / `torchrun` (each rank samples its own
batches; gradients are averaged). Imports agents, data, envs and the store; never the pipeline or the CLI.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.config import auto
from amago_pipe.config.online import PARTS
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.envs.stats import flat_metrics
from amago_pipe.errors import DataError
from amago_pipe.relabel.windows import window_relabeler
from amago_pipe.store import TrajectoryStore
from amago_pipe.train import checkpoint as ckpt
from amago_pipe.train.best import RANK_KEYS, last_data_change, patience_spent, record_validation, validation_score
from amago_pipe.train.metrics import METRICS_FILE, MetricsLogger, MetricWindow, partition_sizes, read_metrics
from amago_pipe.train.online import OnlineCollector, check_online_data, copy_parts, staleness, wait_for_actors
from amago_pipe.train.optim import lr_at, make_optimizer, set_lr
from amago_pipe.train.runtime import (
    Runtime,
    build_agent,
    check_same_tasks,
    from_main,
    resolve_reward_multiplier,
    setup_runtime,
    task_vocabulary,
)
from amago_pipe.train.saving import agent_meta, save_epoch, save_policy

log = logging.getLogger("amago_pipe.train")


class NonFiniteLoss(DataError):
    """A loss or gradient became NaN/inf; training stopped without saving anything after it."""


@dataclass
class LearnerHooks:
    """What the caller (the train stage, a benchmark, a test) lends the learner."""

    check_stop: Callable[[], None] = lambda: None
    progress: Any = None
    """An `amago_pipe.progress.Progress` (`update(completed=, total=, **fields)`), or None."""
    run_name: str = "train"
    data_tag: str = ""
    """Names this run's online data in the store (segment attribute); default: `run_name`."""
    validate: Callable[[Agent, int], dict[str, Any]] | None = None
    """`(agent, epoch) -> rollout summary` run every `validate.every` epochs (rank 0)."""
    wandb_config: dict[str, Any] = field(default_factory=dict)


class Learner:
    """Trains one agent from `cfg` on `store`; all outputs go below `out_dir`."""

    def __init__(self, cfg: TrainStageConfig, store: TrajectoryStore, out_dir: Path, *, seed: int, hooks: LearnerHooks):
        self.cfg, self.store, self.out_dir, self.seed, self.hooks = cfg, store, Path(out_dir), seed, hooks
        self.where = f"stages.{hooks.run_name}"
        check_online_data(cfg, store, where=self.where)
        self.rt: Runtime = setup_runtime(cfg)
        torch.manual_seed(seed)  # identical initial weights on every rank
        tasks = task_vocabulary(cfg, store)
        agent = build_agent(
            cfg.agent, cfg.model, store.spec, max_seq_len=cfg.max_seq_len, compile=cfg.compile, tasks=tasks
        )
        self.agent = agent.to(self.rt.device)
        self.optimizer = make_optimizer(
            self.agent,
            lr=cfg.lr,
            weight_decay=cfg.weight_decay,
            scaled=self.agent.SEQUENCE_MODEL_PARAMS,
            scale=auto.model_lr_scale(cfg),
        )
        self.state = ckpt.TrainingState()
        self.ckpt_dir = self.out_dir / "checkpoints"
        self.policy_dir = self.out_dir / "policy"
        self.collector: OnlineCollector | None = None
        self._clock = time.perf_counter()
        self._online_row: dict[str, Any] = {}
        self._stop = False
        self._relabel = None if cfg.relabel is None else window_relabeler(cfg.relabel, store.spec, where=self.where)

    # ---- resume -------------------------------------------------------------------------------
    def resume(self) -> bool:
        """Load `checkpoints/latest` if there is one (model, optimiser, RNG, sampler, counters).

        First removes what a killed run left half-written (rank 0; the other ranks only read).
        """
        if self.rt.is_main:
            ckpt.clean_debris(self.ckpt_dir)
            ckpt.clean_debris(self.policy_dir)
        found = ckpt.resolve(self.ckpt_dir / ckpt.LATEST)
        if found is None:
            return False
        c = ckpt.load_checkpoint(found)
        check_same_tasks(tuple(c.meta.get("tasks", ())), self.agent.task_names, where=f"{self.where}: {found}")
        # a checkpoint older than the field keeps this config's value (`auto`: fixed again from the data)
        c.model.setdefault("reward_multiplier", self.agent.reward_multiplier.clone())
        expected = self.agent.state_dict()
        ckpt.check_shapes(expected, c.model, where=f"{self.where}: resuming from {found}")
        self.agent.load_state_dict(c.model)
        self.optimizer.load_state_dict(c.optimizer)
        ckpt.set_rng_state(c.rng_tensors, c.rng_meta)
        self.state = c.state
        log.info("resumed from %s (epoch %d, step %d)", found, c.state.epoch, c.state.step)
        return True

    def load_weights(self, source: Path, parts: Sequence[str] = PARTS) -> None:
        """Copy `parts` (model, actor, critic) from a checkpoint folder or a policy file (see `copy_parts`)."""
        copy_parts(self.agent, Path(source), parts, where=f"{self.where}.init_from")
        if self.cfg.agent.reward_multiplier != "auto":  # a number given here wins over the source's
            self.agent.reward_multiplier.fill_(float(self.cfg.agent.reward_multiplier))
        self.agent.reset_policy_average()
        log.info("initialised %s from %s", ", ".join(parts), source)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train until `cfg.epochs` (or an early stop, `validate.patience`); return summary metrics."""
        cfg, rt = self.cfg, self.rt
        rank_seed = self.seed * 1009 + rt.rank
        if self.state.step == 0:
            torch.manual_seed(rank_seed)  # per-rank randomness (dropout, target subsets, policy samples)
        model, optimizer = rt.accelerator.prepare(self.agent, self.optimizer)
        logger = MetricsLogger(
            self.out_dir,
            wandb_mode=cfg.logging.wandb,
            project=cfg.logging.project,
            entity=cfg.logging.entity,
            group=cfg.logging.group,
            run_name=self.hooks.run_name,
            config=self.hooks.wandb_config,
            enabled=rt.is_main,
        )
        logger.truncate_after(self.state.step)
        self._clock = time.perf_counter() - self.state.elapsed
        dynamic = cfg.online is not None or bool(cfg.partition_schedule)  # weights or data change per epoch
        try:
            self._start_collector()
            with contextlib.ExitStack() as stack:
                loader = None if dynamic else stack.enter_context(self._loader(cfg.partitions))
                self._stop = self._out_of_patience(self.state.epoch)  # a resumed run that had stopped early
                for epoch in range(self.state.epoch, cfg.epochs):
                    if self._stop:
                        break
                    self._online_row = self._collect(epoch)
                    if loader is None:
                        with self._loader(self._weights(epoch)) as epoch_loader:
                            self._epoch(epoch, model, optimizer, epoch_loader, logger)
                    else:
                        self._epoch(epoch, model, optimizer, loader, logger)
        finally:
            logger.close()
            if self.collector is not None:
                self.collector.close()
        return self._finish()

    def _fix_reward_multiplier(self, partitions: dict[str, float]) -> None:
        """`reward_multiplier: auto`: fix it from the data about to be sampled, once (no-op when already fixed)."""
        fixed = resolve_reward_multiplier(self.agent, self.store, partitions)
        if fixed is not None:
            log.info("reward_multiplier auto: %g (from the rewards of %s)", fixed, ", ".join(partitions))

    def _loader(self, weights: dict[str, float]) -> BatchLoader:
        cfg = self.cfg
        return BatchLoader(
            self.store,
            batch_size=cfg.batch_size,
            seq_len=cfg.max_seq_len,
            partitions=weights,
            seed=self.seed,
            rank=self.rt.rank,
            mode=cfg.sample_mode,
            balance=cfg.sample_balance,
            prefetch=cfg.prefetch,
            start=int(self.state.sampler.get("next_index", 0)),
            pin_memory=self.rt.device.type == "cuda",
            on_windows=self._relabel,
            task_ids={n: i for i, n in enumerate(self.agent.task_names)} if self.agent.task_names else None,
        )

    def _has_data(self, epoch: int) -> bool:
        """True when a partition weighted in `epoch` holds an episode."""
        known = set(self.store.partitions())
        weighted = [p for p, w in self.cfg.weights_at(epoch).items() if w > 0 and p in known]
        return any(self.store.partition_info(p).episodes > 0 for p in weighted)

    def _weights(self, epoch: int) -> dict[str, float]:
        """This epoch's mixture weights over the partitions that exist (the fifo appears with its first data)."""
        if self.cfg.online is not None and self.cfg.online.timesteps_per_epoch == 0:  # only decoupled actors
            wait_for_actors(self.store, self.cfg.online.partition, self.hooks.check_stop, where=self.where)
        known = set(self.store.partitions())
        weights = {p: w for p, w in self.cfg.weights_at(epoch).items() if p in known}
        if not any(w > 0 for w in weights.values()):
            raise DataError(
                f"{self.where}: epoch {epoch + 1} samples {self.cfg.weights_at(epoch)}, but none of those partitions "
                "holds data yet; collect first (online.start_at_epoch: 0) or give weight to a filled partition"
            )
        return weights

    # ---- online collection --------------------------------------------------------------------
    def _start_collector(self) -> None:
        """Open the online envs (main process); drop the online data collected after the resumed checkpoint."""
        online = self.cfg.online
        if online is None or not self.rt.is_main:
            return
        if self.state.epoch == 0:  # decoupled actors (`collect --follow`) act with it until epoch 1 ends
            self._save_policy(self.policy_dir / "latest.safetensors", 0)
        if online.timesteps_per_epoch == 0:
            return
        self.collector = OnlineCollector(
            online, self.agent, self.store, seed=self.seed + 7, tag=self.hooks.data_tag or self.hooks.run_name,
            where=self.where, device=self.rt.device,
        )  # fmt: skip
        if self.state.online:
            self.collector.load_state_dict(self.state.online)
        self.collector.drop_after(self.state.epoch)

    def _collect(self, epoch: int) -> dict[str, Any]:
        """This epoch's collection (main process; the others wait for its data), or {} when not collecting."""
        online = self.cfg.online
        if online is None or epoch < online.start_at_epoch:
            return {}
        row: dict[str, Any] = {}
        if self.collector is not None:
            if self.hooks.progress is not None:
                self.hooks.progress.update(collecting=f"epoch {epoch + 1}")
            row = self.collector.collect(epoch, self.hooks.check_stop)
            while not self._has_data(epoch):  # no episode has ended yet (long episodes, few steps per epoch)
                row = self.collector.collect(epoch, self.hooks.check_stop)
            self.state.online = self.collector.state_dict()
        self.rt.accelerator.wait_for_everyone()
        return row

    def _epoch(self, epoch: int, model: Any, optimizer: Any, loader: BatchLoader, logger: MetricsLogger) -> None:
        cfg, rt, st = self.cfg, self.rt, self.state
        self._fix_reward_multiplier(loader.partitions)  # the data is there now (online: collected or waited for)
        started, window = time.perf_counter(), MetricWindow()
        first_step, last_console, elapsed = st.step, 0.0, 0.0
        for _ in range(cfg.updates_per_epoch):
            self.hooks.check_stop()
            set_lr(optimizer, lr_at(st.step, peak=cfg.lr, warmup_steps=cfg.warmup_steps))
            metrics = self._update(model, optimizer, loader, epoch)
            self.agent.update_targets()
            st.step += 1
            st.timesteps += cfg.batch_size * cfg.max_seq_len * cfg.grad_accum * rt.world_size
            window.add(metrics)
            elapsed = time.perf_counter() - started
            if st.step % cfg.logging.log_interval == 0:
                row = window.flush(prefix="train/")
                row["train/updates_per_s"] = round((st.step - first_step) / max(elapsed, 1e-9), 3)
                row["train/lr"] = optimizer.param_groups[0]["lr"]
                logger.log(row, step=st.step, epoch=epoch + 1, timesteps=st.timesteps, wall_time=st.wall_time + elapsed)
            if self.hooks.progress is not None and time.perf_counter() - last_console > cfg.logging.console_interval:
                last_console = time.perf_counter()
                self.hooks.progress.update(
                    completed=st.step,
                    total=cfg.epochs * cfg.updates_per_epoch,
                    epoch=f"{epoch + 1}/{cfg.epochs}",
                    critic=float(metrics["critic_loss"]),
                    actor=float(metrics["actor_loss"]),
                    ups=round((st.step - first_step) / max(elapsed, 1e-9), 2),
                )
        if window.count:  # the steps since the last log line
            row = window.flush(prefix="train/")
            logger.log(row, step=st.step, epoch=epoch + 1, timesteps=st.timesteps, wall_time=st.wall_time + elapsed)
        st.wall_time += time.perf_counter() - started
        st.epoch = epoch + 1
        st.sampler = loader.state_dict()
        self._end_of_epoch(epoch + 1, logger)

    def _update(self, model: Any, optimizer: Any, loader: BatchLoader, epoch: int) -> dict[str, torch.Tensor]:
        """One gradient step over `grad_accum` micro-batches; NonFiniteLoss before anything is applied."""
        cfg, rt = self.cfg, self.rt
        metrics: dict[str, torch.Tensor] = {}
        for micro in range(cfg.grad_accum):
            batch = next(loader).to(rt.device, non_blocking=True)
            sync = micro == cfg.grad_accum - 1 or rt.world_size == 1
            with contextlib.nullcontext() if sync else rt.accelerator.no_sync(model), rt.accelerator.autocast():
                losses, metrics = model(batch)  # named, weighted terms
            loss = torch.stack(list(losses.values())).sum()
            if not torch.isfinite(loss):
                bad = ", ".join(f"{k} {float(v.detach())}" for k, v in losses.items() if not torch.isfinite(v))
                self._non_finite(f"loss ({bad})", epoch)
            rt.accelerator.backward(loss / cfg.grad_accum)
        if cfg.grad_clip > 0:
            norm = rt.accelerator.clip_grad_norm_(self.agent.parameters(), cfg.grad_clip)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in self.agent.parameters() if p.grad is not None])
        if not torch.isfinite(torch.as_tensor(norm)):
            self._non_finite(f"gradient norm {float(norm)}", epoch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        metrics = {k: v.detach().float() for k, v in metrics.items()}
        metrics["grad_norm"] = torch.as_tensor(norm).detach().float()
        return metrics

    def _non_finite(self, what: str, epoch: int) -> None:
        last = ckpt.resolve(self.ckpt_dir / ckpt.LATEST)
        good = (
            f"the last good checkpoint is {last} (epoch {self.state.epoch})"
            if last
            else "no checkpoint was written yet"
        )
        raise NonFiniteLoss(
            f"{self.where}: non-finite {what} at gradient step {self.state.step + 1} (epoch {epoch + 1}); training "
            f"stopped and nothing was saved after it; {good}. Check the data for NaN/inf (the convert report), "
            "or lower lr / reward_multiplier"
        )

    # ---- end of epoch: validation, checkpoints, logs ------------------------------------------
    def _end_of_epoch(self, epoch: int, logger: MetricsLogger) -> None:
        cfg, rt, st = self.cfg, self.rt, self.state
        sizes = partition_sizes(self.store, cfg.partitions)
        row: dict[str, Any] = {f"buffer/{p}_timesteps": n for p, n in sizes.items()}
        row.update(self._online_row)
        if self.cfg.online is not None:
            row.update(staleness(self.store, self.cfg.online.partition, epoch - 1))
        val = cfg.validate
        if (
            val is not None
            and self.hooks.validate is not None
            and rt.is_main
            and (epoch % val.every == 0 or epoch == cfg.epochs)
        ):
            with torch.random.fork_rng(devices=[]), self.agent.acting_weights():
                summary = self.hooks.validate(self.agent, epoch)
            row.update({f"val/{k}": v for k, v in flat_metrics(summary).items()})
            score = validation_score(summary, val.rank_by, where=f"{self.where}.validate")
            counts = epoch > last_data_change(cfg)
            if record_validation(st.best, epoch, score, counts=counts, key=RANK_KEYS[val.rank_by]):
                self._save_policy(self.policy_dir / "best.safetensors", epoch)
        self._stop = self._out_of_patience(epoch)
        st.elapsed = time.perf_counter() - self._clock
        row["time/elapsed_s"] = round(st.elapsed, 2)  # the whole loop: collection, updates, validation
        if rt.is_main:
            logger.log(row, step=st.step, epoch=epoch, timesteps=st.timesteps, wall_time=st.wall_time)
            self._save(epoch)
        rt.accelerator.wait_for_everyone()

    def _out_of_patience(self, epoch: int) -> bool:
        """True when training should stop early after `epoch`: rank 0's verdict, on every rank."""
        val = self.cfg.validate
        if val is None or val.patience is None:  # the same on every rank: the broadcast below is collective
            return False
        spent = self.hooks.validate is not None and patience_spent(self.state.best, val.patience)
        if not from_main(float(spent), self.rt.device):  # only rank 0 validates and keeps `best`
            return False
        if self.rt.is_main and epoch < self.cfg.epochs:
            best, key = self.state.best, RANK_KEYS[val.rank_by]
            log.info(
                "stopping early after epoch %d: %d validations in a row have not beaten epoch %d's %s %.4g",
                *(epoch, best["since"], best["epoch"], key, best[key]),
            )
        return True

    def _save(self, epoch: int) -> None:
        save_epoch(
            cfg=self.cfg,
            agent=self.agent,
            optimizer=self.optimizer,
            state=self.state,
            meta=self.meta(epoch),
            policy_dir=self.policy_dir,
            ckpt_dir=self.ckpt_dir,
            epoch=epoch,
            stopping=self._stop,
        )

    def _save_policy(self, path: Path, epoch: int) -> None:
        save_policy(path, self.agent, self.meta(epoch))

    def meta(self, epoch: int) -> dict[str, Any]:
        """What is needed to rebuild the agent (`amago_pipe.train.saving.agent_meta`)."""
        return agent_meta(self.cfg, self.store.spec, epoch=epoch, step=self.state.step, tasks=self.agent.task_names)

    def _finish(self) -> dict[str, Any]:
        st, rows = self.state, read_metrics(self.out_dir / METRICS_FILE)
        train_rows = [r for r in rows if "train/critic_loss" in r]
        last = train_rows[-1] if train_rows else {}
        if self.rt.is_main and self.cfg.logging.plots and rows:
            from amago_pipe.train.plots import plot_learning_curves

            plot_learning_curves(rows, self.out_dir / "plots")
        autos = auto.resolved(self.cfg, reward_multiplier=float(self.agent.reward_multiplier))
        log.info("auto settings resolved: %s", auto.describe(self.cfg, autos))
        out: dict[str, Any] = {}
        if st.best:
            rank_by = self.cfg.validate.rank_by if self.cfg.validate else "return"
            out = {f"best_val_{rank_by}": st.best[RANK_KEYS[rank_by]], "best_epoch": st.best["epoch"]}
        if st.epoch < self.cfg.epochs:
            out["stopped_early"] = st.epoch
        out.update(
            critic_loss=last.get("train/critic_loss"),
            actor_loss=last.get("train/actor_loss"),
            **{"epochs": st.epoch, "steps": st.step, "timesteps": st.timesteps, **autos},
            train_seconds=round(st.wall_time, 2),
            updates_per_s=round(st.step / st.wall_time, 2) if st.wall_time > 0 else None,
        )
        if st.online:
            out.update(env_steps=st.online["env_steps"], online_episodes=st.online["episodes"])
        return out
