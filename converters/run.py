"""Run one conversion into a store partition: atomic, idempotent, checked, reported.

The only place converters meet the store (`TrajectoryStore.writer(atomic=True)`); a failed or interrupted
conversion leaves the partition as it was. numpy + the store; no torch, no click.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from amago_pipe.converters.base import Converter, EpisodeFilter, SourceInfo, check_finite, make_converter
from amago_pipe.converters.prefetch import Prefetch
from amago_pipe.converters.report import ConversionReport, EpisodeSummary, summarize

from amago_pipe.errors import DataError, Interrupted

if TYPE_CHECKING:
    from amago_pipe.config.convert import ConvertStageConfig
    from amago_pipe.store import Episode, TrajectoryStore

READ_AHEAD = 2
"""Episodes read ahead in a background thread while the store compresses and writes."""
RATE_EVERY_S = 1.0
"""How often the progress bar's timesteps/s field is refreshed."""


class Progress(Protocol):
    """What the conversion needs of a progress bar (the stage's ProgressTask fits)."""

    def advance(self, n: float = 1) -> None: ...
    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None: ...


def convert(
    config: ConvertStageConfig,
    store_url: str | Path,
    *,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    report_path: str | Path | None = None,
) -> ConversionReport:
    """Convert the source `config` names into `store_url`/`config.partition`; returns (and writes) the report.

    Raises DataError/ConfigError/MissingDependencyError for bad input and Interrupted when `should_stop()`
    turns true; in every such case the partition is unchanged (and a store created here is removed).
    """
    converter = make_converter(config)
    report = ConversionReport(source=config.source, store=str(store_url), partition=config.partition)
    try:
        info = converter.open()
        _describe_source(report, info)
        if progress is not None and info.total_timesteps is not None:
            progress.update(total=info.total_timesteps)
        _run(converter, info, config, store_url, report, progress, should_stop)
    except BaseException as e:
        report.error = f"{type(e).__name__}: {e}"
        report.finish("interrupted" if isinstance(e, Interrupted | KeyboardInterrupt) else "failed")
        if report_path is not None:
            report.write(report_path)
        raise
    finally:
        converter.close()
    if report_path is not None:
        report.write(report_path)
    return report


def source_info(config: ConvertStageConfig) -> SourceInfo:
    """Open the source only (spec, fingerprint, sizes), e.g. for a stage's input fingerprint."""
    converter = make_converter(config)
    try:
        return converter.open()
    finally:
        converter.close()


def _describe_source(report: ConversionReport, info: SourceInfo) -> None:
    report.source = info.name
    report.source_fingerprint = info.fingerprint
    report.source_episodes, report.source_timesteps = info.total_episodes, info.total_timesteps
    report.env_spec, report.metadata, report.spec = info.env_spec, info.metadata, info.spec.to_json()


def _run(
    converter: Converter,
    info: SourceInfo,
    config: ConvertStageConfig,
    store_url: str | Path,
    report: ConversionReport,
    progress: Progress | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    from amago_pipe.store import TrajectoryStore

    existed = TrajectoryStore.exists(store_url)
    store = _open_store(store_url, info, existed)
    try:
        same, older = _previous_segments(store, config.partition, info)
        if same and not config.force:
            _mark_skipped(report, same)
            return
        attrs = {
            "source_fingerprint": info.fingerprint,
            "source": info.name,
            "converter": config.source,
            "env_name": info.env_name,
        }
        with store.writer(config.partition, atomic=True, attrs=attrs) as writer:
            _write_episodes(converter, config, writer, report, progress, should_stop)
        replaced = same + older
        if replaced:
            store.drop_segments(config.partition, [s.id for s in replaced])
            report.replaced_segments = [s.id for s in replaced]
            report.adjust(
                "replaced_previous_conversion",
                f"{len(replaced)} segment(s) written earlier from this source "
                + ("(forced)" if same else "(its content or the conversion options changed)")
                + " were dropped after the new data was committed",
                count_episode=False,
            )
    except BaseException:
        if not existed:
            _remove_new_store(store_url)
        raise
    report.finish("converted")


def _open_store(store_url: str | Path, info: SourceInfo, existed: bool) -> TrajectoryStore:
    from amago_pipe.store import TrajectoryStore

    try:
        return TrajectoryStore.create(store_url, info.spec, exist_ok=True)
    except DataError as e:
        if not existed:
            raise
        raise DataError(
            f"{info.name} cannot go into store {store_url}: {e}. Convert into a new store (another --store path), "
            f"or change the conversion options (e.g. info_keys) so the data matches the store"
        ) from e


def _previous_segments(store: TrajectoryStore, partition: str, info: SourceInfo) -> tuple[list[Any], list[Any]]:
    """Segments of `partition` from this exact source+options, and from the same source with other content/options."""
    if partition not in store.partitions():
        return [], []
    segments = store.segments(partition)
    same = [s for s in segments if s.attrs.get("source_fingerprint") == info.fingerprint]
    older = [s for s in segments if s.attrs.get("source") == info.name and s not in same]
    return same, older


def _mark_skipped(report: ConversionReport, previous: list[Any]) -> None:
    report.episodes = sum(int(s.episodes) for s in previous)
    report.timesteps = sum(int(s.timesteps) for s in previous)
    report.adjust(
        "already_converted",
        f"this source (fingerprint {report.source_fingerprint}) is already in the partition "
        f"({len(previous)} segment(s)); nothing was written — use force (CLI: --force) to convert it again",
        count_episode=False,
    )
    report.finish("skipped")


def _write_episodes(
    converter: Converter,
    config: ConvertStageConfig,
    writer: Any,
    report: ConversionReport,
    progress: Progress | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    keep = EpisodeFilter(config.filters)
    last_rate, started, seen = time.monotonic(), time.monotonic(), 0
    prepared = _prepared(converter.episodes(report), keep, config, report)
    with Prefetch(prepared, depth=READ_AHEAD) as episodes:
        for episode, summary, index in episodes:
            if summary is None:
                report.filtered(episode)
            else:
                try:
                    writer.add(episode)
                except DataError as e:
                    raise DataError(f"{report.source}, episode {index}: {e}") from e
                report.add(summary)
            seen += episode.length
            if should_stop is not None and should_stop():
                raise Interrupted("conversion stopped on request; the partition was left unchanged")
            if progress is not None:
                progress.advance(episode.length)
                now = time.monotonic()
                if now - last_rate >= RATE_EVERY_S:
                    progress.update(timesteps_per_s=seen / max(now - started, 1e-9))
                    last_rate = now
    if report.episodes == 0:
        why = (
            f"all {report.filtered_episodes} episode(s) were removed by filters {config.filters}"
            if (report.filtered_episodes)
            else "the source yielded no episode"
        )
        raise DataError(f"{report.source}: nothing to write: {why}; loosen `filters:` / `episodes:`")


def _prepared(
    episodes: Iterator[Episode], keep: EpisodeFilter, config: ConvertStageConfig, report: ConversionReport
) -> Iterator[tuple[Episode, EpisodeSummary | None, int]]:
    """Runs in the read-ahead thread: filter, check and summarize each episode (None: filtered out)."""
    for position, episode in enumerate(episodes):
        index = int(episode.meta.get("source_index", position))
        if keep and not keep.accepts(episode):
            yield episode, None, index
            continue
        if episode.length == 0:
            _no_steps(report, index)
        summary = summarize(episode)
        if summary.nonfinite or episode.goals:  # the summary already counted NaN/inf; name them (or keep them)
            check_finite(episode, where=report.source, allow=config.allow_nonfinite, report=report, index=index)
        yield episode, summary, index


def _no_steps(report: ConversionReport, index: int) -> NoReturn:
    raise DataError(
        f"{report.source}: episode {index} has no steps (T=0; expected T >= 1); skip such episodes with "
        f"`filters: {{min_length: 1}}` (CLI: --filter min_length=1) or choose others with `episodes:`"
    )


def _remove_new_store(store_url: str | Path) -> None:
    """Remove a local store this conversion created, so a failed first conversion leaves nothing behind."""
    path = Path(store_url)
    if "://" not in str(store_url) and path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
