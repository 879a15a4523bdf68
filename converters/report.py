"""The conversion report: what a converter read, wrote, skipped and changed, with every timestep accounted for.

Streaming statistics only (nothing per timestep is kept). numpy only; rich is imported inside `render`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .episode_stats import ArrayRange, EpisodeSummary, RunningStats, summarize

if TYPE_CHECKING:
    from amago_pipe.store import Episode

REPORT_FORMAT = 1
"""Version of the report JSON layout."""
EXAMPLES_KEPT = 5
"""How many example episode indices each adjustment remembers."""


@dataclass
class Adjustment:
    """One kind of change a converter made, aggregated over episodes."""

    kind: str
    message: str
    episodes: int = 0
    timesteps: int = 0
    """Timesteps this adjustment touched (changed or dropped)."""
    dropped_timesteps: int = 0
    """Source timesteps that are not in the store because of this adjustment."""
    examples: list[int] = field(default_factory=list)
    """Source indices of the first few episodes concerned."""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "episodes": self.episodes,
            "timesteps": self.timesteps,
            "dropped_timesteps": self.dropped_timesteps,
            "examples": self.examples,
        }


@dataclass
class ConversionReport:
    """Everything a conversion found and did; written as `report.json` and shown as a table."""

    source: str
    """Short description of the source, e.g. `minari:D4RL/pen/human-v2`."""
    source_fingerprint: str = ""
    store: str = ""
    partition: str = ""
    status: str = "running"
    """`converted`, `skipped` (the same source is already in the partition) or `failed`."""
    source_episodes: int | None = None
    source_timesteps: int | None = None
    unselected_episodes: int = 0
    unselected_timesteps: int = 0
    filtered_episodes: int = 0
    filtered_timesteps: int = 0
    episodes: int = 0
    timesteps: int = 0
    terminated: int = 0
    """Episodes whose last step is a termination."""
    truncated: int = 0
    """Episodes whose last step is a truncation (and not a termination)."""
    unfinished: int = 0
    """Episodes (or pieces) that end with neither flag."""
    both_flags_steps: int = 0
    """Steps flagged both terminated and truncated (kept as they are; termination wins for bootstrapping)."""
    inner_end_steps: int = 0
    """Steps before an episode's last one flagged terminated or truncated (kept as they are)."""
    lengths: RunningStats = field(default_factory=RunningStats)
    returns: RunningStats = field(default_factory=RunningStats)
    observations: dict[str, ArrayRange] = field(default_factory=dict)
    actions: ArrayRange = field(default_factory=ArrayRange)
    rewards: ArrayRange = field(default_factory=ArrayRange)
    adjustments: dict[str, Adjustment] = field(default_factory=dict)
    replaced_segments: list[str] = field(default_factory=list)
    env_spec: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """Why the conversion failed or stopped (status failed/interrupted)."""
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    # ---- recording -------------------------------------------------------------------------------------------
    def adjust(
        self,
        kind: str,
        message: str,
        *,
        episode: int | None = None,
        timesteps: int = 0,
        dropped_timesteps: int = 0,
        count_episode: bool = True,
    ) -> None:
        """Record one occurrence of an adjustment (aggregated by `kind`; `message` of the first one is kept)."""
        adj = self.adjustments.setdefault(kind, Adjustment(kind, message))
        adj.episodes += int(count_episode)
        adj.timesteps += timesteps
        adj.dropped_timesteps += dropped_timesteps
        if episode is not None and len(adj.examples) < EXAMPLES_KEPT:
            adj.examples.append(int(episode))

    def filtered(self, episode: Episode) -> None:
        self.filtered_episodes += 1
        self.filtered_timesteps += int(episode.length)

    def written(self, episode: Episode) -> None:
        """Add one stored episode to the statistics."""
        self.add(summarize(episode))

    def add(self, summary: EpisodeSummary) -> None:
        """Add the summary of one stored episode (made by `summarize`, possibly in another thread)."""
        self.episodes += 1
        self.timesteps += summary.length
        if summary.ending == "terminated":
            self.terminated += 1
        elif summary.ending == "truncated":
            self.truncated += 1
        else:
            self.unfinished += 1
        self.inner_end_steps += summary.inner_end_steps
        self.both_flags_steps += summary.both_flags_steps
        self.lengths.add_finite(np.array([summary.length]))
        self.returns.add(np.array([summary.total_return]))
        self.rewards.merge(summary.rewards)
        self.actions.merge(summary.actions)
        for key, value in summary.observations.items():
            self.observations.setdefault(key, ArrayRange()).merge(value)

    # ---- accounting ------------------------------------------------------------------------------------------
    @property
    def dropped_timesteps(self) -> int:
        return sum(a.dropped_timesteps for a in self.adjustments.values())

    def accounting(self) -> dict[str, Any]:
        """Where every source timestep went; `balanced` is False only if a converter lost track of some."""
        placed = self.timesteps + self.filtered_timesteps + self.unselected_timesteps + self.dropped_timesteps
        out: dict[str, Any] = {
            "source_timesteps": self.source_timesteps,
            "written": self.timesteps,
            "filtered": self.filtered_timesteps,
            "not_selected": self.unselected_timesteps,
            "dropped": self.dropped_timesteps,
        }
        out["balanced"] = None if self.source_timesteps is None else placed == self.source_timesteps
        return out

    def finish(self, status: str) -> None:
        self.status = status
        self.seconds = time.time() - self.started

    # ---- output ----------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        rate = self.timesteps / self.seconds if self.seconds > 0 and self.status == "converted" else None
        return {
            "format": REPORT_FORMAT,
            "source": self.source,
            "source_fingerprint": self.source_fingerprint,
            "store": self.store,
            "partition": self.partition,
            "status": self.status,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "timesteps_per_s": rate,
            "source_episodes": self.source_episodes,
            "source_timesteps": self.source_timesteps,
            "episodes": self.episodes,
            "timesteps": self.timesteps,
            "not_selected": {"episodes": self.unselected_episodes, "timesteps": self.unselected_timesteps},
            "filtered": {"episodes": self.filtered_episodes, "timesteps": self.filtered_timesteps},
            "endings": {"terminated": self.terminated, "truncated": self.truncated, "unfinished": self.unfinished},
            "steps_with_both_flags": self.both_flags_steps,
            "end_flags_inside_episodes": self.inner_end_steps,
            "episode_length": self.lengths.to_json(),
            "episode_return": self.returns.to_json(),
            "rewards": self.rewards.to_json(),
            "observations": {k: v.to_json() for k, v in self.observations.items()},
            "actions": self.actions.to_json(),
            "adjustments": [a.to_json() for a in self.adjustments.values()],
            "accounting": self.accounting(),
            "replaced_segments": self.replaced_segments,
            "env_spec": self.env_spec,
            "metadata": self.metadata,
            "spec": self.spec,
        }

    def write(self, path: str | Path) -> Path:
        """Write the JSON report (atomically: a temporary file renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{path.name}")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=_json_default, allow_nan=False) + "\n")
        tmp.replace(path)
        return path

    def summary(self) -> dict[str, Any]:
        """The stage's summary metrics."""
        return {"timesteps": self.timesteps, "episodes": self.episodes, "status": self.status}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    return str(obj)


def render(report: dict[str, Any]) -> Any:
    """A rich renderable (tables) of a report's JSON form, for the console."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    head = Table(title=escape(f"conversion: {report['source']} → {report['partition']}"), show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column()
    acc = report["accounting"]
    rate = report.get("timesteps_per_s")
    rows = [
        ("status", report["status"]),
        ("episodes / timesteps", f"{report['episodes']} / {report['timesteps']}"),
        ("endings", ", ".join(f"{k} {v}" for k, v in report["endings"].items())),
        ("steps with both flags", report["steps_with_both_flags"]),
        ("length min/mean/max", _triple(report["episode_length"], fmt)),
        ("return min/mean/max", _triple(report["episode_return"], fmt)),
        ("source timesteps", acc["source_timesteps"]),
        ("filtered / not selected / dropped", f"{acc['filtered']} / {acc['not_selected']} / {acc['dropped']}"),
        ("all timesteps accounted for", acc["balanced"]),
        ("time", f"{report['seconds']:.2f}s" + (f" ({rate:,.0f} timesteps/s)" if rate else "")),
    ]
    for k, v in rows:
        head.add_row(k, escape(fmt(v)))
    ranges = Table(title="value ranges")
    for col in ("array", "min", "mean", "max", "non-finite"):
        ranges.add_column(col, justify="right" if col != "array" else "left")
    arrays = {f"obs[{k}]": v for k, v in report["observations"].items()}
    arrays["actions"], arrays["rewards"] = report["actions"], report["rewards"]
    for name, r in arrays.items():
        ranges.add_row(escape(name), fmt(r["min"]), fmt(r["mean"]), fmt(r["max"]), fmt(r["nonfinite"]))
    parts: list[Any] = [head, ranges]
    if report["adjustments"]:
        lines = [Text("adjustments", style="bold")]
        for a in report["adjustments"]:
            counts = f"episodes {a['episodes']}, timesteps {a['timesteps']}, dropped {a['dropped_timesteps']}"
            lines.append(Text(f"• {a['kind']} ({counts}): {a['message']}"))
        parts.extend(lines)
    return Group(*parts)


def _triple(stats: dict[str, Any], fmt: Any) -> str:
    return f"{fmt(stats['min'])} / {fmt(stats['mean'])} / {fmt(stats['max'])}"
