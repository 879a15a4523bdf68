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
from amago_pipe.errors import AmagoPipeError, StoreFormatError
from amago_pipe.pipeline.stage import Stage
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
    config: TrainStageConfig

    def open_store(self) -> TrajectoryStore:
        if not TrajectoryStore.exists(self.ctx.store):
            raise StoreFormatError(
                f"stages.{self.ctx.name}: no trajectory store at '{self.ctx.store}'; add a convert or collect stage "
                "before train (or fix `store:`)"
            )
        return TrajectoryStore.open(self.ctx.store)

    def input_fingerprints(self) -> dict[str, str]:
        """The fingerprint of every weighted partition (a missing one shows as `missing`; run() explains)."""
        try:
            store = self.open_store()
            known = set(store.partitions())
            return {f"partition:{p}": store.fingerprint(p) if p in known else "missing" for p in self.config.partitions}
        except AmagoPipeError:
            return {"store": "missing"}

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
        store = self.open_store()
        seed = seed_from(cfg.seed, ctx.seed)
        where = f"stages.{ctx.name}"
        hooks = LearnerHooks(check_stop=ctx.check_stop, run_name=ctx.name, wandb_config=to_dict(cfg))
        if cfg.validate is not None:
            hooks.validate = make_validator(
                cfg.validate, spec=store.spec, seed=seed + 1, where=where, check_stop=ctx.check_stop
            )
        learner = Learner(cfg, store, ctx.out_dir, seed=seed, hooks=hooks)
        if ctx.resume and learner.resume():
            ctx.log.info("resuming %s at epoch %d", ctx.name, learner.state.epoch)
        with ctx.progress(f"train {ctx.name}", total=cfg.epochs * cfg.updates_per_epoch, unit="steps") as task:
            hooks.progress = task
            metrics = learner.run()
        if learner.rt.is_main:
            (ctx.out_dir / SUMMARY_FILE).write_text(json.dumps(metrics, indent=1, sort_keys=True))
        return metrics
