"""Run one conversion into a store partition: atomic, idempotent, checked, reported.

The only place converters meet the store (`TrajectoryStore.writer(atomic=True)`); a failed or interrupted
conversion leaves the partition as it was (a partition or store it created is removed) and removes only what it
wrote; running out of space is an OutOfSpaceError naming the store and partition. Conversions of one source running
at once settle on one copy; a convert stage's conversion replaces what that stage wrote before (its `owner`
tag). numpy + the store; no torch, no click.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from amago_pipe.errors import (
    AmagoPipeError,
    DataError,
    Interrupted,
    OutOfSpaceError,
    out_of_space,
    out_of_space_error,
)
from amago_pipe.progress import Progress

from .base import Converter, EpisodeFilter, SourceInfo, check_finite, make_converter
from .episode_stats import EpisodeSummary, summarize
from .prefetch import Prefetch
from .report import ConversionReport

if TYPE_CHECKING:
    from amago_pipe.config.convert import ConvertStageConfig
    from amago_pipe.store import Episode, SegmentInfo, TrajectoryStore

READ_AHEAD = 2
"""Episodes read ahead in a background thread while the store compresses and writes."""
OWNER_ATTR = "convert_stage"
"""Segment attribute: the tag of the convert stage that wrote a segment (`<pipeline>/<stage>@<run id>`, see
`StageContext.tag`); absent on what `amago-pipe convert` writes."""


def convert(
    config: ConvertStageConfig,
    store_url: str | Path,
    *,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    report_path: str | Path | None = None,
    owner: str | None = None,
) -> ConversionReport:
    """Convert the source `config` names into `store_url`/`config.partition`; returns (and writes) the report.

    `owner` (a convert stage's tag) marks the segments written and, once the new data is in, drops what that
    owner wrote earlier from any other source (`replaced_own_conversion` in the report). Earlier copies of this
    source with other content are replaced when no other owner wrote them. Raises DataError/ConfigError/
    MissingDependencyError for bad input and Interrupted when `should_stop()` turns true; in every such case the
    partition is unchanged (and a store created here is removed).
    """
    converter = make_converter(config)
    report = ConversionReport(source=config.source.type, store=str(store_url), partition=config.partition)
    try:
        info = converter.open()
        _describe_source(report, info)
        if progress is not None and info.total_timesteps is not None:
            progress.update(total=info.total_timesteps)
        _run(converter, info, config, store_url, report, progress, should_stop, owner)
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
    owner: str | None,
) -> None:
    from amago_pipe.store.leftovers import discard_if_unused, discard_partition_if_unused

    where = f"{store_url} (partition '{config.partition}')"
    store = _open_store(store_url, info)
    fresh = config.partition not in store.partitions()
    try:
        _write(store, converter, info, config, report, progress, should_stop, owner)
    except BaseException as e:
        # only ever what this process wrote: the store or partition stays if anyone else wrote to it
        if store.created and discard_if_unused(store.files):
            kept = "the store it created was removed"
        else:
            kept = "the store was left as it was"
            if fresh:
                discard_partition_if_unused(store.files, config.partition)
        no_space = _no_space(where, e, kept)
        if no_space is None:
            raise
        raise no_space from e


def _no_space(where: str, e: BaseException, kept: str) -> OutOfSpaceError | None:
    """The OutOfSpaceError naming `where` when `e` is a write that ran out of space (None otherwise)."""
    if isinstance(e, Exception) and not isinstance(e, AmagoPipeError) and out_of_space(e) is not None:
        return out_of_space_error(where, e, kept=kept)
    return None


def _write(
    store: TrajectoryStore,
    converter: Converter,
    info: SourceInfo,
    config: ConvertStageConfig,
    report: ConversionReport,
    progress: Progress | None,
    should_stop: Callable[[], bool] | None,
    owner: str | None,
) -> None:
    from amago_pipe.store.format import segment_origin

    same, older = _previous_segments(store, config.partition, info, owner)
    if same and not config.force:
        kept = _keep_one(store, config.partition, same) or same[0]
        _mark_skipped(report, kept)
        _replace_own(store, config.partition, owner, segment_origin(kept.id), report)
        return
    attrs = {
        "source_fingerprint": info.fingerprint,
        "source": info.name,
        "converter": config.source.type,
        "env_name": info.env_name,
        **({OWNER_ATTR: owner} if owner else {}),
    }
    with store.writer(config.partition, atomic=True, attrs=attrs) as writer:
        _write_episodes(converter, config, writer, report, progress, should_stop)
    mine = writer.sealed[-1].id
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
    _replace_own(store, config.partition, owner, segment_origin(mine), report)
    earlier = {s.id for s in replaced}
    report.finish("skipped" if _copy_elsewhere(store, config, info, owner, earlier, mine, report) else "converted")


def _copy_elsewhere(
    store: TrajectoryStore,
    config: ConvertStageConfig,
    info: SourceInfo,
    owner: str | None,
    earlier: set[str],
    mine: str,
    report: ConversionReport,
) -> bool:
    """Settle conversions of this source that ran at once on one copy; True when another's was kept (ours dropped).
    An owner leaves other owners' copies of other content alone (see `_previous_segments`)."""
    from amago_pipe.store.format import segment_origin

    concurrent = [
        s
        for s in store.segments(config.partition)
        if s.attrs.get("source") == info.name
        and s.id not in earlier
        and (owner is None or s.attrs.get("source_fingerprint") == info.fingerprint)
    ]
    kept = _keep_one(store, config.partition, concurrent)
    if kept is not None and segment_origin(kept.id) == segment_origin(mine):  # a fifo capacity may have trimmed ours
        return False
    report.adjust(
        "converted_concurrently",
        f"another conversion of this source into '{config.partition}' ran at the same time and committed "
        f"segment {kept.id if kept else '(replaced since)'}; this conversion's copy ({mine}) was dropped so "
        "the partition holds the source once",
        count_episode=False,
    )
    return True


def _open_store(store_url: str | Path, info: SourceInfo) -> TrajectoryStore:
    from amago_pipe.store import TrajectoryStore
    from amago_pipe.store.format import segment_fields

    try:
        segment_fields(info.spec)
    except DataError as e:
        raise DataError(f"{info.name}: {e}; nothing was written") from e
    try:
        return TrajectoryStore.create(store_url, info.spec, exist_ok=True)
    except DataError as e:
        raise DataError(
            f"{info.name} cannot go into store {store_url}: {e}. Convert into a new store (another --store path), "
            f"or change the conversion options (e.g. info_keys) so the data matches the store"
        ) from e
    except OSError as e:  # no room for the store's first files
        if out_of_space(e) is None:
            raise
        raise out_of_space_error(store_url, e) from e


def _previous_segments(
    store: TrajectoryStore, partition: str, info: SourceInfo, owner: str | None
) -> tuple[list[SegmentInfo], list[SegmentInfo]]:
    """Segments of `partition` from this exact source+options, and from the same source with other content/options
    (for an `owner`: only its own and those no stage owns; another run's or stage's stay)."""
    if partition not in store.partitions():
        return [], []
    segments = store.segments(partition)
    same = [s for s in segments if s.attrs.get("source_fingerprint") == info.fingerprint]
    older = [s for s in segments if s.attrs.get("source") == info.name and s not in same]
    if owner is not None:
        older = [s for s in older if s.attrs.get(OWNER_ATTR) in (None, owner)]
    return same, older


def _replace_own(
    store: TrajectoryStore, partition: str, owner: str | None, kept_origin: str, report: ConversionReport
) -> None:
    """Drop the segments `owner` wrote earlier (another source, other options) but the one just kept or written
    (`kept_origin`, see `segment_origin`), and say so in the report."""
    from amago_pipe.store.format import segment_origin

    if owner is None:
        return
    own = [
        s for s in store.segments(partition) if s.attrs.get(OWNER_ATTR) == owner and segment_origin(s.id) != kept_origin
    ]
    if not own:
        return
    store.drop_segments(partition, [s.id for s in own])
    report.replaced_segments += [s.id for s in own]
    steps = sum(s.timesteps for s in own)
    sources = ", ".join(sorted({str(s.attrs.get("source")) for s in own}))
    report.adjust(
        "replaced_own_conversion",
        f"{len(own)} segment(s) this stage wrote earlier ({sum(s.episodes for s in own)} episodes, {steps} "
        f"timesteps from {sources}) were dropped after the new data was committed: a stage's re-run replaces "
        "what it wrote",
        timesteps=steps,
        count_episode=False,
    )


def _keep_one(store: TrajectoryStore, partition: str, copies: list[SegmentInfo]) -> SegmentInfo | None:
    """Keep the copy with the smallest id and drop the others: conversions of one source that ran at once
    all settle on the same copy, whichever finishes first, so the partition holds the source once."""
    if not copies:
        return None
    kept = min(copies, key=lambda s: s.id)
    extra = [s.id for s in copies if s.id != kept.id]
    if extra:
        store.drop_segments(partition, extra)
    return kept


def _mark_skipped(report: ConversionReport, previous: SegmentInfo) -> None:
    report.episodes, report.timesteps = int(previous.episodes), int(previous.timesteps)
    report.adjust(
        "already_converted",
        f"this source (fingerprint {report.source_fingerprint}) is already in the partition (segment "
        f"{previous.id}); nothing was written — use force (CLI: --force) to convert it again",
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
    with (  # two threads: one reads, one checks and summarizes; numpy and h5py release the GIL, so they overlap
        Prefetch(converter.episodes(report), depth=READ_AHEAD) as read,
        Prefetch(_prepared(read, keep, config, report), depth=READ_AHEAD) as episodes,
    ):
        for episode, summary, index in episodes:
            if summary is None:
                report.filtered(episode)
            else:
                try:
                    writer.add(episode)
                except DataError as e:
                    raise DataError(f"{report.source}, episode {index}: {e}") from e
                report.add(summary)
            if should_stop is not None and should_stop():
                raise Interrupted("conversion stopped on request; the partition was left unchanged")
            if progress is not None:
                progress.advance(episode.length)
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
