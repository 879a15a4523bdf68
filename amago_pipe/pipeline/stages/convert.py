"""The `convert` stage: run one converter into the pipeline's store and keep its report in the stage folder.

The work is `amago_pipe.converters.run.convert` (shared with `amago-pipe convert`); no torch is imported here.
"""

from __future__ import annotations

import hashlib
from typing import Any

from amago_pipe.config.convert import ConvertStageConfig
from amago_pipe.errors import StoreFormatError
from amago_pipe.pipeline.stage import Stage

REPORT_FILE = "report.json"


class ConvertStage(Stage):
    """Converts `source` into `partition`; idempotent (a source already in the partition is a no-op). It owns what
    it wrote (tagged `ctx.tag`): a re-run with another source replaces its earlier data, never another run's."""

    config: ConvertStageConfig

    def input_fingerprints(self) -> dict[str, str]:
        """The source's content fingerprint (with the options that change what is written)."""
        from amago_pipe.converters.run import source_info

        info = source_info(self.config)
        return {f"source:{info.name}": info.fingerprint}

    def output_fingerprints(self) -> dict[str, str]:
        """Hash of the partition's segments that hold this source ('missing' when there are none).

        Narrower than the whole partition's fingerprint on purpose: other stages appending to the same
        partition do not make this conversion look modified.
        """
        from amago_pipe.converters.run import source_info
        from amago_pipe.store import TrajectoryStore

        cfg = self.config
        key = f"store:{cfg.partition}"
        try:
            store = TrajectoryStore.open(self.ctx.store)
        except StoreFormatError:
            return {key: "missing"}
        if cfg.partition not in store.partitions():
            return {key: "missing"}
        fingerprint = source_info(cfg).fingerprint
        ids = sorted(s.id for s in store.segments(cfg.partition) if s.attrs.get("source_fingerprint") == fingerprint)
        return {key: hashlib.sha256("\n".join(ids).encode()).hexdigest() if ids else "missing"}

    def run(self) -> dict[str, Any]:
        from amago_pipe.converters.run import convert

        ctx, cfg = self.ctx, self.config
        with ctx.progress(f"convert {cfg.source.describe()}", unit="timesteps") as task:
            report = convert(
                cfg,
                ctx.store,
                progress=task,
                should_stop=ctx.should_stop,
                report_path=ctx.out_dir / REPORT_FILE,
                owner=ctx.tag,
            )
        ctx.log.info(
            "%s: %s %d episodes / %d timesteps into '%s' (%d adjustment kinds; report in %s)",
            report.source,
            report.status,
            report.episodes,
            report.timesteps,
            cfg.partition,
            len(report.adjustments),
            ctx.out_dir / REPORT_FILE,
        )
        own = report.adjustments.get("replaced_own_conversion")
        if own is not None:  # its data changed beyond this source: said where the user looks
            ctx.log.warning("stages.%s: %s", ctx.name, own.message)
        return {"timesteps": report.timesteps, "episodes": report.episodes, "status": report.status}
