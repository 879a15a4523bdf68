"""The `export` stage: a verified, self-contained artifact of a train stage's policy in `<stage>/artifact/`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amago_pipe.config.evaluate import EvaluateStageConfig
from amago_pipe.config.export import ExportStageConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import ConfigError
from amago_pipe.pipeline.stage import Stage

ARTIFACT = "artifact"
"""Folder of the stage's output holding the export."""


class ExportStage(Stage):
    """Exports the chosen policy and verifies every form; the first metric is the largest verification error."""

    config: ExportStageConfig

    def train_stage(self) -> str:
        """The configured train stage, else the one train stage upstream (or behind an upstream evaluate stage)."""
        cfg, ctx = self.config, self.ctx
        where = f"stages.{ctx.name}"
        stages = ctx.pipeline.stages
        if cfg.train_stage is not None:
            if not isinstance(stages.get(cfg.train_stage), TrainStageConfig):
                raise ConfigError(f"{where}.train_stage: '{cfg.train_stage}' is not a train stage of this pipeline",
                                  path=f"{where}.train_stage")  # fmt: skip
            return cfg.train_stage
        found = {n for n in ctx.upstream if isinstance(stages[n], TrainStageConfig)}
        for name, folder in ctx.upstream.items():
            report = folder / "report.json"
            if isinstance(stages[name], EvaluateStageConfig) and report.is_file():
                found.add(json.loads(report.read_text()).get("policy", {}).get("train_stage"))
        found.discard(None)
        if len(found) != 1:
            raise ConfigError(
                f"{where}: expected one train stage upstream (found: {', '.join(sorted(found)) or 'none'}); "
                "set `train_stage:`",
                path=f"{where}.train_stage",
            )
        return str(found.pop())

    def run(self) -> dict[str, Any]:
        from amago_pipe.export.build import resolve_forms
        from amago_pipe.pipeline.export_run import export_run

        cfg, ctx = self.config, self.ctx
        forms = resolve_forms(cfg.forms, where=f"stages.{ctx.name}.forms")
        with ctx.progress(f"export {ctx.name}", total=None, unit="") as task:
            manifest = export_run(
                ctx.run_dir, Path(ctx.out_dir) / ARTIFACT, stage=self.train_stage(), which=cfg.checkpoint,
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
