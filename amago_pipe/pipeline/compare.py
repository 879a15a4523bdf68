"""Runs side by side (`amago-pipe compare`): config keys that differ, final and best metrics, overlaid curves.

Reads run directories only: `resolved.yaml`, `pipeline.lock.json`, each train stage's `metrics.jsonl` and each
evaluate stage's `record.json` (`report.json` for runs made before records). Torch-free; no click.
"""

from __future__ import annotations

import glob
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from amago_pipe.errors import ConfigError, DataError
from amago_pipe.pipeline.layout import stage_dir
from amago_pipe.pipeline.lockfile import LOCK_FILE, LockFile, is_run_dir
from amago_pipe.pipeline.records import RECORD_FILE, read_record

CURVE_KEYS = ("val/return_mean", "val/success_rate", "online/return_mean")
"""Metrics whose final and best value (over a train stage's metrics.jsonl) the comparison shows."""
LOSS_KEYS = ("train/critic_loss", "train/actor_loss")
PANELS: dict[str, tuple[str, ...]] = {
    "critic loss": ("train/critic_loss",),
    "actor loss": ("train/actor_loss",),
    "validation return": ("val/return_mean",),
    "online return (collection)": ("online/return_mean",),
}
"""Plot panel -> metric keys; panels no run logged are left out; losses are drawn on a log scale."""


@dataclass
class RunInfo:
    """What one run directory holds for a comparison."""

    path: Path
    label: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    """resolved.yaml flattened to dotted keys."""
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Evaluate stage -> {"metrics", "tasks", "held_out"} of its record."""
    curves: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Train stage -> its metrics.jsonl rows."""


def expand_run_dirs(patterns: tuple[str, ...] | list[str]) -> list[Path]:
    """Each argument as a folder, or the folders its glob matches (for a quoted `runs/*`); ConfigError (exit 2)
    on the first that is not a run directory."""
    out: list[Path] = []
    for pattern in patterns:
        matches = [pattern] if Path(pattern).exists() or not glob.has_magic(pattern) else sorted(glob.glob(pattern))
        if not matches:
            raise ConfigError(f"{pattern}: no folder matches; give run directories, e.g. runs/<pipeline name>")
        for match in matches:
            path = Path(match)
            if not path.is_dir():
                raise ConfigError(f"{path}: not a run directory (no such folder)")
            if not is_run_dir(path):
                raise ConfigError(
                    f"{path}: not a run directory (no {LOCK_FILE}); give folders made by `amago-pipe run`, "
                    "e.g. runs/<pipeline name>"
                )
            if path not in out:
                out.append(path)
    return out


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (lists and scalars are leaves)."""
    if not isinstance(data, dict) or (prefix and not data):
        return {prefix.rstrip("."): data} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}{key}."))
    return out


def load_run(path: Path) -> RunInfo:
    """The resolved config, evaluation records and training curves of one run directory."""
    from amago_pipe.pipeline.evaluation_report import split_metrics
    from amago_pipe.train.metrics import METRICS_FILE, read_metrics

    info = RunInfo(path=path, label=path.name)
    resolved = path / "resolved.yaml"
    try:
        info.config = flatten(yaml.safe_load(resolved.read_text()) or {})
    except (OSError, yaml.YAMLError):
        info.config = {}
    for name, rec in LockFile.load(path).stages.items():
        folder = stage_dir(path, name)
        if rec.status != "done" or not folder.is_dir():
            continue
        if (folder / METRICS_FILE).is_file():
            info.curves[name] = read_metrics(folder / METRICS_FILE)
        if (folder / RECORD_FILE).is_file():
            r = read_record(folder / RECORD_FILE)
            info.evaluations[name] = {"metrics": r.metrics, "tasks": r.tasks, "held_out": r.held_out}
        elif (folder / "report.json").is_file():  # a run made before record.json
            try:
                summary = json.loads((folder / "report.json").read_text())["summary"]
            except (OSError, json.JSONDecodeError, KeyError) as e:
                raise DataError(f"{folder / 'report.json'}: damaged evaluation report ({e})") from e
            metrics, tasks, held_out = split_metrics(summary)
            info.evaluations[name] = {"metrics": metrics, "tasks": tasks, "held_out": held_out}
    return info


def load_runs(patterns: tuple[str, ...] | list[str]) -> list[RunInfo]:
    """Every run the arguments name, labelled by folder name (by path where two names clash)."""
    runs = [load_run(p) for p in expand_run_dirs(patterns)]
    names = [r.label for r in runs]
    for run in runs:
        if names.count(run.label) > 1:
            run.label = str(run.path)
    return runs


def config_differences(runs: list[RunInfo]) -> list[tuple[str, list[Any]]]:
    """(dotted key, value per run) for the resolved-config keys whose values differ; `(not set)` where a run's file
    does not name the key (it took the default)."""
    missing = object()
    keys = sorted({k for r in runs for k in r.config})
    out = []
    for key in keys:
        values = [r.config.get(key, missing) for r in runs]
        if any(json.dumps(v, default=str) != json.dumps(values[0], default=str) for v in values):
            out.append((key, ["(not set)" if v is missing else v for v in values]))
    return out


def _final_best(rows: list[dict[str, Any]], key: str) -> tuple[float | None, float | None, int | None]:
    """(last value, highest value, epoch of the highest) of `key` over metrics rows."""
    points = [(r[key], r.get("epoch")) for r in rows if isinstance(r.get(key), int | float) and math.isfinite(r[key])]
    if not points:
        return None, None, None
    best = max(points, key=lambda p: p[0])
    return points[-1][0], best[0], best[1]


def _curve_rows(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    steps = [r["step"] for r in rows if isinstance(r.get("step"), int)]
    if steps:
        out[f"{name}: updates"] = max(steps)
    keys = [
        *CURVE_KEYS,
        *sorted({k for r in rows for k in r if k.startswith("val/task/") and k.endswith("/return_mean")}),
    ]
    for key in keys:
        final, best, epoch = _final_best(rows, key)
        if final is not None:
            out[f"{name}: {key} final"] = final
            out[f"{name}: {key} best"] = f"{format_value(best)} (epoch {epoch})" if epoch is not None else best
    for key in LOSS_KEYS:
        final, _, _ = _final_best(rows, key)
        if final is not None:
            out[f"{name}: {key} final"] = final
    return out


def _evaluation_rows(name: str, ev: dict[str, Any]) -> dict[str, Any]:
    out = {f"{name}: {k}": v for k, v in ev["metrics"].items() if k != "episodes"}
    for group, label in (("tasks", ""), ("held_out", "held-out ")):
        for task, values in ev[group].items():
            for k in ("return_mean", "success_rate"):
                if k in values:
                    out[f"{name}: {label}{task} {k}"] = values[k]
    return out


def metric_table(runs: list[RunInfo]) -> list[tuple[str, list[Any]]]:
    """(row label, value per run): each evaluate stage's headline and per-task metrics, then each train stage's
    final and best validation / online return and final losses."""
    per_run = []
    for run in runs:
        values: dict[str, Any] = {}
        for name, ev in run.evaluations.items():
            values.update(_evaluation_rows(name, ev))
        for name, rows in run.curves.items():
            values.update(_curve_rows(name, rows))
        per_run.append(values)
    labels: list[str] = []
    for values in per_run:
        labels += [k for k in values if k not in labels]
    return [(label, [values.get(label) for values in per_run]) for label in labels]


def plot_runs(runs: list[RunInfo], path: Path) -> Path:
    """One panel per curve (losses on a log scale), one line per run and train stage; DataError when no run
    logged any of them."""
    from amago_pipe.train.plots import _pyplot, _save

    series: dict[str, list[tuple[str, list[Any], list[Any]]]] = {}
    for panel, keys in PANELS.items():
        for run in runs:
            for stage, rows in run.curves.items():
                for key in keys:
                    xs = [r["step"] for r in rows if r.get(key) is not None and "step" in r]
                    ys = [r[key] for r in rows if r.get(key) is not None and "step" in r]
                    if xs:
                        label = run.label if len(run.curves) == 1 else f"{run.label}:{stage}"
                        series.setdefault(panel, []).append((label, xs, ys))
    if not series:
        raise DataError("none of these runs logged training curves (metrics.jsonl); nothing to plot")
    plt = _pyplot()
    fig, axes = plt.subplots(len(series), 1, figsize=(8, 2.6 * len(series)), squeeze=False)
    for ax, (panel, lines) in zip(axes[:, 0], series.items()):
        for label, xs, ys in lines:
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, linewidth=1.2, label=label)
        if "loss" in panel and all(y > 0 for _, _, ys in lines for y in ys):
            ax.set_yscale("log")
        ax.set_ylabel(panel, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("update")
    return _save(plt, fig, path, f"{len(runs)} runs")


def format_value(value: Any) -> str:
    """A table cell: floats to 4 significant digits, lists and mappings as JSON, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)
