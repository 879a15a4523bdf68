"""The `relabel` stage: hindsight-relabeled copies of source partitions, written to a target partition.

One atomic write: the copies appear all at once on success, and a failure (a reward function that raises, a
strategy that does not fit the data) leaves the target as it was. Fingerprinted on the config (by the engine),
the source partitions' contents and a reward function's source file, so the train stage downstream is cached.
"""

from __future__ import annotations

import json
from typing import Any

from amago_pipe.config.relabel import POOL_SIZE, FunctionRewardConfig, RelabelStageConfig
from amago_pipe.config.stages import seed_from
from amago_pipe.errors import DataError, StoreFormatError
from amago_pipe.hashing import source_hash
from amago_pipe.pipeline.stage import Stage
from amago_pipe.registry import import_path
from amago_pipe.relabel import RelabelReport, build_relabeler, goal_pool, relabel_stream
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.leftovers import discard_partition_if_unused
from amago_pipe.store.tools import written_by

STAGE_ATTR = "relabel_stage"
"""Segment attribute naming the run and stage that wrote a segment (`ctx.tag`, so a re-run replaces it)."""


class RelabelStage(Stage):
    """Relabels every episode of `sources` with the configured strategy into `target`."""

    config: RelabelStageConfig

    def _tag(self) -> str:
        """This run's and stage's tag (`ctx.tag`): a re-run replaces these segments, not other runs' copies."""
        return self.ctx.tag

    def _open(self) -> TrajectoryStore:
        try:
            return TrajectoryStore.open(self.ctx.store)
        except StoreFormatError as e:
            raise DataError(
                f"stages.{self.ctx.name}: cannot read the store to relabel ({e}); run the convert/collect stage "
                "that fills it first"
            ) from e

    def input_fingerprints(self) -> dict[str, str]:
        """The source partitions' contents and a reward function's source file."""
        out = {}
        try:
            store = TrajectoryStore.open(self.ctx.store)
            out.update({f"store:{p}": store.fingerprint(p) for p in self.config.sources if p in store.partitions()})
        except StoreFormatError:
            out["store"] = "missing"
        reward = self.config.reward
        if isinstance(reward, FunctionRewardConfig):
            fn = import_path(reward.function, what="reward function", where=f"stages.{self.ctx.name}.reward.function")
            out[f"reward:{reward.function}"] = source_hash(fn) or "no source"
        return out

    def output_fingerprints(self) -> dict[str, str]:
        """The segments this stage wrote in the target partition."""
        try:
            fingerprint = written_by(TrajectoryStore.open(self.ctx.store), self.config.target, STAGE_ATTR, self._tag())
        except StoreFormatError:
            fingerprint = "missing"
        return {f"store:{self.config.target}": fingerprint}

    def run(self) -> dict[str, Any]:
        ctx, cfg = self.ctx, self.config
        where = f"stages.{ctx.name}"
        store = self._open()
        ctx.configure_store(store)
        missing = [p for p in cfg.sources if p not in store.partitions()]
        if missing:
            raise DataError(
                f"{where}.sources: the store has no partition {', '.join(map(repr, missing))} (it has: "
                f"{', '.join(store.partitions()) or 'none'}); convert or collect data into it first"
            )
        relabeler = build_relabeler(cfg, store.spec, where=where)
        seed = seed_from(cfg.seed, ctx.seed)
        total = sum(store.partition_info(p).episodes for p in cfg.sources)
        pool = None
        if relabeler.needs_pool:
            pool_size = int(getattr(cfg.strategy, "pool", POOL_SIZE))
            with ctx.progress("relabel: goal pool", total=total, unit="episodes") as task:
                pool = goal_pool(self._episodes(store, task.advance), relabeler.layout, pool_size, seed)
        report = RelabelReport()
        names = self._names(store)
        existed = cfg.target in store.partitions()
        old = [s.id for s in store.segments(cfg.target) if s.attrs.get(STAGE_ATTR) == self._tag()] if existed else []
        attrs = {STAGE_ATTR: self._tag(), "source": f"relabel:{cfg.strategy.type}"}
        try:
            with (
                ctx.progress(f"relabel {'+'.join(cfg.sources)} -> {cfg.target}", total=total, unit="episodes") as task,
                store.writer(cfg.target, atomic=True, attrs=attrs) as writer,
            ):
                stream = relabel_stream(
                    self._episodes(store, task.advance), relabeler, ratio=cfg.ratio, seed=seed, report=report,
                    pool=pool, name_of=names,
                )  # fmt: skip
                for ep in stream:
                    writer.add(ep)
        except BaseException:
            if not existed:
                discard_partition_if_unused(store.files, cfg.target)
            raise
        if old:
            store.drop_segments(cfg.target, old)
        result = {"sources": cfg.sources, "target": cfg.target, "strategy": cfg.strategy.to_dict(), "seed": seed}
        result.update(report.to_json())
        result["replaced_segments"] = len(old)
        (ctx.out_dir / "report.json").write_text(json.dumps(result, indent=2))
        summary = report.to_json()
        if summary["reward_mismatch_steps"]:
            ctx.log.warning(
                "%s: %d of %d source steps have a stored reward that differs from the recomputed one; check that "
                "`reward:` matches the env that made the data",
                where, summary["reward_mismatch_steps"], summary["timesteps_in"],
            )  # fmt: skip
        return {
            "episodes_out": summary["episodes_out"],
            "episodes_in": summary["episodes_in"],
            "success_in": summary["success_rate_in"],
            "success_out": summary["success_rate_out"],
            "timesteps_out": summary["timesteps_out"],
        }

    def _episodes(self, store: TrajectoryStore, advance: Any) -> Any:
        """Every episode of the source partitions, in order, checking for a stop request between episodes."""
        for partition in self.config.sources:
            for ep in store.iter_episodes(partition):
                self.ctx.check_stop()
                yield ep
                advance()

    def _names(self, store: TrajectoryStore) -> Any:
        """`partition 'protected' episode 12 (source collect:random)` for the i-th episode of the stream."""
        sizes = [(p, store.partition_info(p).episodes) for p in self.config.sources]

        def name(i: int, ep: Any) -> str:
            for partition, n in sizes:
                if i < n:
                    return f"partition '{partition}' episode {i}" + (f" (source {ep.source})" if ep.source else "")
                i -= n
            return f"episode {i}"

        return name
