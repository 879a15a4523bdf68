"""The `export` stage: a verified, self-contained artifact of a train stage's policy in `<stage>/artifact/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amago_pipe.config.export import ExportStageConfig
from amago_pipe.pipeline.stage import Stage

ARTIFACT = "artifact"
"""Folder of the stage's output holding the export."""


class ExportStage(Stage):
    """Exports the chosen policy and verifies every form; the first metric is the largest verification error."""

    config: ExportStageConfig

    def run(self) -> dict[str, Any]:
        from amago_pipe.export.build import resolve_forms
        from amago_pipe.pipeline.export_run import export_run

        cfg, ctx = self.config, self.ctx
        forms = resolve_forms(cfg.forms, where=f"stages.{ctx.name}.forms")
        with ctx.progress(f"export {ctx.name}", total=None, unit="") as task:
            manifest = export_run(
                ctx.run_dir, Path(ctx.out_dir) / ARTIFACT, stage=ctx.train_stage(), which=cfg.checkpoint,
                forms=forms, tolerance=cfg.tolerance, episodes=cfg.verify_episodes, steps=cfg.verify_steps,
                store_url=ctx.store, progress=lambda message: task.update(step=message), where=f"stages.{ctx.name}",
                stage_folder=True,
            )  # fmt: skip
        errors = manifest["verification"]["max_error"]
        return {
            "max_error": max(errors.values()),
            "forms": "+".join(manifest["forms"]),
            **{f"error_{k}": v for k, v in errors.items()},
        }
