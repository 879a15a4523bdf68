"""`amago-pipe store inspect | verify | evict | copy`: look after trajectory stores from the shell.

Thin: parses, calls amago_pipe.store, prints. The store (zarr) and rich are imported inside the commands;
errors are amago_pipe.errors types, mapped to exit codes by the main group.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import click

from amago_pipe.cli.common import console
from amago_pipe.errors import StoreFormatError


@click.group("store")
def store() -> None:
    """Inspect, verify, evict and copy trajectory stores."""


@store.command("inspect")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def inspect_cmd(path: str, as_json: bool) -> None:
    """Partitions, counts, sizes, return histograms and the data spec of the store at PATH.

    Also checks segment metadata and chunk presence (as `verify --fast`): exits non-zero when a sealed
    segment is damaged, and lists unsealed segments left by writers that died.
    """
    from amago_pipe.store import TrajectoryStore
    from amago_pipe.store.tools import describe_store

    data = describe_store(TrajectoryStore.open(path))
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        _print_description(data)
        _print_findings(data["findings"], path)
    damaged = [f for f in data["findings"] if f["status"] == "damaged"]
    if damaged:
        raise StoreFormatError(
            f"{path}: {len(damaged)} damaged segment(s), e.g. {damaged[0]['partition']}/{damaged[0]['segment']}: "
            f"{damaged[0]['detail']}; run `amago-pipe store verify {path} --quarantine` to move them aside"
        )


def _print_findings(findings: list[dict[str, Any]], path: str) -> None:
    hints = {
        "damaged": f"`amago-pipe store verify {path} --quarantine` moves it aside",
        "abandoned": f"the next write to the partition, or `amago-pipe store verify {path} --quarantine`, removes it",
        "in-progress": "left alone while its writer may still run",
        "stray": f"`amago-pipe store verify {path} --quarantine` removes it",
    }
    for f in findings:
        click.echo(f"{f['status']:<11} {f['partition']}/{f['segment']}: {f['detail']}; {hints.get(f['status'], '')}")


def _print_description(data: dict[str, Any]) -> None:
    from rich.markup import escape

    from amago_pipe.store.tools import histogram_lines

    out = console()
    created = data.get("created") or {}
    out.print(
        f"[bold]{escape(data['url'])}[/bold]  format {data['format_version']}, codec {data['codec']}, "
        f"created {created.get('time', '?')} by amago-pipe {created.get('amago_pipe', '?')}"
    )
    header = ("partition", "kind", "capacity", "segments", "episodes", "steps", "size", "return mean ± std")
    rows: list[tuple[str, ...]] = [
        (
            name,
            p["kind"],
            _count(p["capacity_timesteps"]),
            _count(p["segments"]),
            _count(p["episodes"]),
            _count(p["timesteps"]),
            _size(p["bytes"]),
            f"{_num(p['return_mean'])} ± {_num(p['return_std'])}",
        )
        for name, p in data["partitions"].items()
    ]
    total = data["total"]
    rows.append(
        ("total", "", "", *(_count(total[k]) for k in ("segments", "episodes", "timesteps")), _size(total["bytes"]), "")
    )
    for line in _table([header, *rows]):
        out.print(line, markup=False)
    for name, p in data["partitions"].items():
        lines = histogram_lines(p["return_histogram"])
        if lines:
            out.print(
                f"returns of [bold]{escape(name)}[/bold]: {p['episodes']:,} episodes, min {_num(p['return_min'])}, "
                f"max {_num(p['return_max'])}"
            )
            for line in lines:
                out.print("  " + line, markup=False)
            ends = p["ends"]
            out.print(
                f"  steps per episode {p['length_min']:,} to {p['length_max']:,} (mean {p['length_mean']:.1f}); "
                f"ends: {ends['terminated']:,} terminated, {ends['truncated']:,} truncated (time limit), "
                f"{ends['open']:,} open (pieces or unmarked)",
                markup=False,
            )
    spec = data["spec"]
    out.print("[bold]spec[/bold]")
    for key, arr in spec["observations"].items():
        out.print(f"  obs   {key:<24} {tuple(arr['shape'])!s:<16} {arr['dtype']}", markup=False)
    for key, arr in spec.get("goals", {}).items():
        out.print(f"  goal  {key:<24} {tuple(arr['shape'])!s:<16} {arr['dtype']}", markup=False)
    act = spec["action"]
    size = (
        f"n={act['n']}"
        if act["kind"] == "discrete"
        else f"nvec={act['nvec']}"
        if act["kind"] == "multidiscrete"
        else f"shape={tuple(act['shape'])}"
    )
    out.print(f"  action {act['kind']} {size}", markup=False)
    out.print(f"  fingerprint {data['fingerprint']}")


@store.command("verify")
@click.argument("path")
@click.option(
    "--quarantine", is_flag=True, help="Move damaged segments to quarantine/ and delete abandoned unsealed ones."
)
@click.option("--fast", is_flag=True, help="Check metadata and chunk presence only; do not decompress the data.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def verify_cmd(path: str, quarantine: bool, fast: bool, as_json: bool) -> None:
    """Check every segment of the store at PATH; exit non-zero while damaged segments remain visible."""
    from amago_pipe.store import TrajectoryStore
    from amago_pipe.store.verify import verify_store

    report = verify_store(TrajectoryStore.open(path), quarantine=quarantine, deep=not fast)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(
            f"checked {report.segments} sealed segments: {report.episodes} episodes, {report.timesteps} timesteps"
        )
        for f in report.findings:
            action = f" -> {f.action}" if f.action else ""
            click.echo(f"  {f.status:<11} {f.partition}/{f.segment}: {f.detail}{action}")
    damaged = [f for f in report.damaged if f.action != "quarantined"]
    if damaged:
        raise StoreFormatError(
            f"{path}: {len(damaged)} damaged segment(s), e.g. {damaged[0].partition}/{damaged[0].segment}: "
            f"{damaged[0].detail}; run `amago-pipe store verify {path} --quarantine` to move them aside"
        )
    if not as_json:
        click.echo("ok")


@store.command("evict")
@click.argument("path")
@click.option("--partition", required=True, help="Partition to trim (protected partitions are refused).")
@click.option(
    "--max-timesteps",
    type=click.IntRange(min=0),
    required=True,
    help="Timesteps to keep at most (whole episodes: the newest that fit).",
)
def evict_cmd(path: str, partition: str, max_timesteps: int) -> None:
    """Remove the oldest episodes of a partition until at most --max-timesteps timesteps remain.

    Granularity is the episode: each is kept or removed whole, so an episode longer than the limit goes.
    Older segments are dropped whole; the segment at the boundary is rewritten with its newest episodes.
    """
    from amago_pipe.store import TrajectoryStore

    store_ = TrajectoryStore.open(path)
    before = store_.partition_info(partition)
    removed = store_.evict(partition, max_timesteps)
    after = store_.partition_info(partition)
    click.echo(
        f"evicted {removed} timesteps ({before.episodes - after.episodes} episodes) from '{partition}'; "
        f"{after.timesteps} timesteps in {after.episodes} episodes ({after.segments} segments) remain"
    )


@store.command("copy")
@click.argument("src")
@click.argument("dst")
@click.option("--partition", "partitions", multiple=True, help="Partition to copy (repeatable; default: all).")
def copy_cmd(src: str, dst: str, partitions: tuple[str, ...]) -> None:
    """Copy sealed segments from SRC into DST (created if missing); segments already in DST are skipped."""
    from amago_pipe.store import TrajectoryStore
    from amago_pipe.store.tools import copy_store

    started = time.perf_counter()
    report = copy_store(TrajectoryStore.open(src), dst, list(partitions) or None)
    for name in report.copied:
        click.echo(f"{name}: copied {report.copied[name]} segments, skipped {report.skipped[name]} already present")
    click.echo(f"copied {report.timesteps} timesteps to {dst} in {time.perf_counter() - started:.1f}s")


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Plain aligned columns (text left, numbers right), header underlined."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _num(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


COMMANDS = [store]
