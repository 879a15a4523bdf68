"""The `collect` stage: a thin shell over `amago_pipe.envs.collect.run_collect` (shared with `amago-pipe collect`).

It fingerprints the controllers' code and what it wrote, and keeps the report; no torch is imported here.
"""

from __future__ import annotations

import json
from typing import Any

from amago_pipe.config.collect import CollectStageConfig
from amago_pipe.config.stages import seed_from
from amago_pipe.converters.minari_writer import dataset_fingerprint, minari_dataset_path
from amago_pipe.envs.collect import dataset_id_of, policy_code_hashes, run_collect, written_fingerprint
from amago_pipe.errors import StoreFormatError
from amago_pipe.pipeline.preflight import Preflight
from amago_pipe.pipeline.stage import Stage
from amago_pipe.store import TrajectoryStore


class CollectStage(Stage):
    """Runs each configured policy for its episodes and saves everything as one (atomic) write."""

    config: CollectStageConfig

    def preflight(self, checks: Preflight) -> None:
        """Collecting into the store: the env's spaces equal those of the data already there (or collected first)."""
        if self.config.output == "store":
            checks.match_data(self.config.env, f"stages.{self.ctx.name}.env", held_out=False)

    def _tag(self) -> str:
        """This run's and stage's tag (`ctx.tag`): a re-run replaces these segments, not other runs' copies."""
        return self.ctx.tag

    def input_fingerprints(self) -> dict[str, str]:
        """Source hashes of scripted controllers, so editing one re-runs the stage."""
        return policy_code_hashes(self.config, where=f"stages.{self.ctx.name}")

    def output_fingerprints(self) -> dict[str, str]:
        """The segments this stage wrote (not others' appends to the partition), or the Minari dataset's file
        hash; 'missing' when absent."""
        cfg = self.config
        if cfg.output == "minari":
            dataset_id = dataset_id_of(cfg)
            path = minari_dataset_path(dataset_id)
            return {f"minari:{dataset_id}": dataset_fingerprint(path) if path.exists() else "missing"}
        try:
            fingerprint = written_fingerprint(TrajectoryStore.open(self.ctx.store), cfg.partition, self._tag())
        except StoreFormatError:
            fingerprint = "missing"
        return {f"store:{cfg.partition}": fingerprint}

    def run(self) -> dict[str, Any]:
        ctx = self.ctx
        with ctx.progress(
            f"collect {self.config.env.env_name}", total=self.config.total_episodes, unit="episodes"
        ) as task:
            report = run_collect(
                self.config,
                store_url=ctx.store if self.config.output == "store" else None,
                seed=seed_from(self.config.seed, ctx.seed),
                tag=self._tag(),
                where=f"stages.{ctx.name}",
                on_episode=lambda _ep, _st: task.advance(),
                check_stop=ctx.check_stop,
                upstream=ctx.upstream,
            )
        (ctx.out_dir / "report.json").write_text(json.dumps(report, indent=2))
        total = report["total"]
        return {
            "episodes": total["episodes"],
            "return_mean": round(total.get("return_mean", 0.0), 2),
            "timesteps": report["timesteps"],
            "seconds": report["seconds"],
        }
