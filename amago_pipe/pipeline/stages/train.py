"""The `train` stage: train an agent on store partitions; resumable from `checkpoints/latest`, exactly.

Outputs in the stage folder: checkpoints/, policy/*.safetensors, metrics.jsonl, plots/, train_summary.json
(and wandb/ when wandb logs there; it is not part of the stage's outputs).
"""

from __future__ import annotations

import json
from typing import Any

from amago_pipe.config.base import to_dict
from amago_pipe.config.stages import seed_from
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import AmagoPipeError, ConfigError, DataError, StoreFormatError
from amago_pipe.pipeline.preflight import Preflight, require_flash_attn
from amago_pipe.pipeline.stage import Stage
from amago_pipe.spec import describe_action
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.metrics import WANDB_SUBDIR

SUMMARY_FILE = "train_summary.json"


class TrainStage(Stage):
    """Runs a Learner; on `ctx.resume` it continues from the last complete epoch."""

    Config = TrainStageConfig
    resumable = True
    distributed = True  # under torchrun / accelerate launch every rank trains; rank 0 writes the outputs
    resume_safe = ("epochs", "ckpt_interval", "keep_last", "logging", "validate")  # model, optimiser, data unchanged
    side_outputs = (WANDB_SUBDIR,)
    untracked = ("logging", "prefetch")  # metrics/wandb/console/plots; batch i is the same at any prefetch depth
    config: TrainStageConfig

    def preflight(self, checks: Preflight) -> None:
        """flash-attn importable for `attention: flash`; `conservative_coeff` only with discrete actions; the online
        and validation envs' spaces equal the data's."""
        cfg, where = self.config, f"stages.{self.ctx.name}"
        if getattr(cfg.model.traj_encoder, "attention", None) == "flash":
            with checks.collecting():
                require_flash_attn(f"{where}.model.traj_encoder.attention")
        if cfg.online is not None:
            with checks.collecting():
                checks.match_data(cfg.online.env, f"{where}.online.env", held_out=False)
        coeff = cfg.agent.conservative_coeff
        with checks.collecting():
            data = checks.data() if coeff > 0 else None
            if data is not None and data.spec.action.kind != "discrete":
                raise ConfigError(
                    f"{where}.agent.conservative_coeff: {coeff} needs discrete actions (a log-sum-exp over every "
                    f"action's Q), but the training data has {describe_action(data.spec.action)} actions; the "
                    f"training data is {data.label}; set conservative_coeff: 0",
                    path=f"{where}.agent.conservative_coeff",
                )
        if cfg.validate is not None:
            with checks.collecting():
                checks.match_data(cfg.validate.env, f"{where}.validate.env", held_out=True)

    def open_store(self, *, create: bool = False) -> TrajectoryStore:
        """The pipeline's store; an online stage may `create` it (with its env's spec) when it does not exist."""
        cfg = self.config
        if not TrajectoryStore.exists(self.ctx.store):
            if not (create and cfg.online is not None):
                raise StoreFormatError(
                    f"stages.{self.ctx.name}: no trajectory store at '{self.ctx.store}'; add a convert or collect "
                    "stage before train, collect online (`online:`), or fix `store:`"
                )
            from amago_pipe.envs.vector import make_batched_env

            with make_batched_env(cfg.online.env, where=f"stages.{self.ctx.name}.online.env") as env:
                TrajectoryStore.create(self.ctx.store, env.spec, exist_ok=True)
        cache = self.ctx.pipeline.store_cache
        store = TrajectoryStore.open(
            self.ctx.store, cache_bytes=cache.ram_bytes, disk_tier=cache.disk_tier, cache_dir=cache.dir
        )
        self.ctx.configure_store(store)
        return store

    def _data_tag(self) -> str:
        """Its online segments' tag (`ctx.tag`, run id included): a resume drops only these, never another run's."""
        return self.ctx.tag

    def input_fingerprints(self) -> dict[str, str]:
        """The fingerprint of every weighted partition it reads (a missing one shows as `missing`; run() explains),
        except the one its online collection writes (an output)."""
        cfg = self.config
        written = cfg.online.partition if cfg.online is not None else None
        read = set(cfg.partitions).union(*(p.weights for p in cfg.partition_schedule)) - {written}
        try:
            if not TrajectoryStore.exists(self.ctx.store):
                return {"store": "missing"} if read else {}
            store = TrajectoryStore.open(self.ctx.store)
            known = set(store.partitions())
            return {f"partition:{p}": store.fingerprint(p) if p in known else "missing" for p in sorted(read)}
        except AmagoPipeError:
            return {"store": "missing"}

    def output_fingerprints(self) -> dict[str, str]:
        """The online segments this stage collected ('missing' when none); nothing for an offline stage."""
        from amago_pipe.train.online import collected_fingerprint

        online = self.config.online
        if online is None:
            return {}
        try:
            fingerprint = collected_fingerprint(
                TrajectoryStore.open(self.ctx.store), online.partition, self._data_tag()
            )
        except AmagoPipeError:
            fingerprint = "missing"
        return {f"store:{online.partition}": fingerprint}

    def init_source(self) -> Any:
        """The checkpoint folder or policy file `init_from` names (ConfigError/DataError when absent)."""
        from amago_pipe.train import checkpoint as ckpt

        init = self.config.init_from
        where = f"stages.{self.ctx.name}.init_from"
        if init is None:
            return None
        if init.stage not in self.ctx.upstream:
            raise ConfigError(
                f"{where}.stage: '{init.stage}' is not among this stage's needs "
                f"({', '.join(self.ctx.upstream) or 'none'}); add it to `needs:`",
                path=f"{where}.stage",
            )
        folder = self.ctx.upstream[init.stage]
        name = f"epoch_{init.which:04d}" if isinstance(init.which, int) else init.which  # latest / best
        found = ckpt.resolve(folder / "checkpoints" / name)
        if found is None and init.which == "best":
            raise DataError(
                f"{where}.which: stage '{init.stage}' has no best checkpoint; `best` needs `validate:` in that "
                "stage (the epoch with the highest validation return is kept as checkpoints/best)"
            )
        if found is None:
            kept = sorted(p.name for p in (folder / "checkpoints").glob("*") if ckpt.resolve(p) is not None)
            raise DataError(
                f"{where}.which: stage '{init.stage}' has no checkpoint '{name}' (kept: {', '.join(kept) or 'none'}); "
                "pick one of those (`keep_last` and `ckpt_interval` decide which are kept)"
            )
        return found

    def _trained_epochs(self) -> int | None:
        """Epochs completed by the checkpoint a resume would load; None when there is none."""
        from amago_pipe.train import checkpoint as ckpt

        found = ckpt.resolve(self.ctx.out_dir / "checkpoints" / ckpt.LATEST)
        if found is None:
            return None
        try:
            return int(json.loads((found / "state.json").read_text())["state"]["epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # damaged: the resume itself reports it

    def resume_point(self) -> str:
        epochs = self._trained_epochs()
        return f"epoch {epochs}" if epochs is not None else ""

    def resume_blocker(self) -> str:
        epochs = self._trained_epochs()
        if epochs is not None and epochs > self.config.epochs:
            return f"epochs {self.config.epochs} is below the {epochs} epochs its checkpoint has trained"
        return ""

    def run(self) -> dict[str, Any]:
        from amago_pipe.train.learner import Learner, LearnerHooks
        from amago_pipe.train.validation import make_validator

        cfg, ctx = self.config, self.ctx
        init = self.init_source()
        store = self.open_store(create=True)
        seed = seed_from(cfg.seed, ctx.seed)
        where = f"stages.{ctx.name}"
        hooks = LearnerHooks(
            check_stop=ctx.check_stop, run_name=ctx.name, data_tag=self._data_tag(), wandb_config=to_dict(cfg)
        )
        if cfg.validate is not None:
            hooks.validate = make_validator(
                cfg.validate, spec=store.spec, seed=seed + 1, where=where, check_stop=ctx.check_stop
            )
        learner = Learner(cfg, store, ctx.out_dir, seed=seed, hooks=hooks)
        if cfg.online is not None and learner.rt.is_main:
            from amago_pipe.train.online import check_owner

            check_owner(store, cfg.online.partition, self._data_tag(), where=f"{where}.online.partition")
        if ctx.resume and learner.resume():
            ctx.log.info("resuming %s at epoch %d", ctx.name, learner.state.epoch)
            if cfg.online is not None:
                ctx.log.info("online envs restart from fresh resets (env state is not checkpointed)")
        elif cfg.init_from is not None:
            learner.load_weights(init, cfg.init_from.parts)
        with ctx.progress(f"train {ctx.name}", total=cfg.epochs * cfg.updates_per_epoch, unit="steps") as task:
            hooks.progress = task
            metrics = learner.run()
        if learner.rt.is_main:
            (ctx.out_dir / SUMMARY_FILE).write_text(json.dumps(metrics, indent=1, sort_keys=True))
        return metrics
