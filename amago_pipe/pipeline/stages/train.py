"""The `train` stage: train an agent on store partitions; resumable from `checkpoints/latest`, exactly.

Outputs in the stage folder: checkpoints/, policy/*.safetensors, metrics.jsonl, plots/, train_summary.json.
"""

from __future__ import annotations

import json
from typing import Any

from amago_pipe.config.base import to_dict
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import AmagoPipeError, StoreFormatError
from amago_pipe.pipeline.stage import Stage
from amago_pipe.store import TrajectoryStore

SUMMARY_FILE = "train_summary.json"


class TrainStage(Stage):
    """Runs a Learner; on `ctx.resume` it continues from the last complete epoch."""

    Config = TrainStageConfig
    resumable = True
    distributed = True  # under torchrun / accelerate launch every rank trains; rank 0 writes the outputs
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

    def run(self) -> dict[str, Any]:
        from amago_pipe.train.learner import Learner, LearnerHooks
        from amago_pipe.train.validation import make_validator

        cfg, ctx = self.config, self.ctx
        store = self.open_store()
        seed = cfg.seed if cfg.seed is not None else ctx.seed
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
