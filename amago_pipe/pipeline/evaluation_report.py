"""What the evaluate stage writes besides report.json: summary.md (Markdown tables) and record.json (a result record).

Torch-free: it reads the report's summary and the train stage's config and outputs.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from amago_pipe.config.base import to_dict
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.pipeline.records import Record, command_line, git_commit, read_command

HEADLINE = ("return_mean", "success_rate", "return_bottom_quintile", "episodes")
"""The summary statistics a record keeps, overall and per task."""


def attempt_returns(stats: list[Any]) -> list[list[float]]:
    """Returns of attempt 1..k (the `amago_pipe/attempt_{i}_return` info keys of k-shot envs), over episodes."""
    out: list[list[float]] = []
    while True:
        key = f"amago_pipe/attempt_{len(out) + 1}_return"
        values = [s.info[key] for s in stats if key in s.info]
        if not values:
            return out
        out.append(values)


def summary_markdown(report: dict[str, Any]) -> str:
    """A short Markdown summary of an evaluation report."""
    s = report["summary"]
    pol = report["policy"]
    rows = [
        ("episodes", s.get("episodes")),
        ("mean return", s.get("return_mean")),
        ("median return", s.get("return_median")),
        ("std return", s.get("return_std")),
        ("bottom-quintile return", s.get("return_bottom_quintile")),
        ("min / max return", f"{_fmt(s.get('return_min'))} / {_fmt(s.get('return_max'))}"),
        ("mean length", s.get("length_mean")),
    ]
    if "success_rate" in s:
        rows.append(("success rate", s["success_rate"]))
    base = report.get("baseline")
    if base:
        rows.append(
            (f"mean return before (`{base['stage']}`: stage `{base['policy']['train_stage']}`)", base["return_mean"])
        )
        if base["return_mean"] is not None and s.get("return_mean") is not None:
            rows.append(("change in mean return", s["return_mean"] - base["return_mean"]))
    lines = [
        f"# Evaluation: {report['env']}",
        "",
        f"Policy: stage `{pol['train_stage']}`, `{pol['which']}` (epoch {pol['epoch']}), "
        f"{'greedy' if report['greedy'] else 'sampled'} actions, seed {report['seed']}.",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in rows],
    ]
    for key, value in sorted(s.get("info", {}).items()):
        lines.append(f"| info `{key}` | {_fmt(value)} |")
    lines += task_table(s, report.get("task_spaces", []))
    return "\n".join(lines) + "\n"


def task_table(s: dict[str, Any], notes: list[str]) -> list[str]:
    """Markdown lines of the per-task table (training tasks, then held-out ones), the means over tasks and how
    the tasks' spaces were unified; nothing for a single env."""
    per_env = s.get("per_env", {})
    if not per_env:
        return []
    held = set(s.get("held_out", {}).get("tasks", []))
    k = max((len(_attempts(sub)) for sub in per_env.values()), default=0)
    extra = (" return per attempt (1 / 2 / ...) |", "---|") if k else ("", "")
    lines = [
        "",
        "## Per task",
        "",
        f"| task | split | episodes | mean return | bottom-quintile return | success |{extra[0]}",
        f"|---|---|---|---|---|---|{extra[1]}",
    ]
    for name, sub in sorted(per_env.items(), key=lambda kv: (kv[0] in held, kv[0])):
        split = "held-out" if name in held else "training"
        attempts = f" {' / '.join(_fmt(v) for v in _attempts(sub)) or '-'} |" if k else ""
        lines.append(
            f"| {name} | {split} | {sub['episodes']} | {_fmt(sub.get('return_mean'))} | "
            f"{_fmt(sub.get('return_bottom_quintile'))} | {_fmt(sub.get('success_rate', '-'))} |{attempts}"
        )
    blank = " |" if k else ""
    for group, label in (("training", "training tasks"), ("held_out", "held-out tasks")):
        if group in s:
            block = s[group]
            mean = block.get("task_mean", {}).get("return_mean", block.get("return_mean"))
            lines.append(
                f"| **{label}: mean over tasks** | | {block['episodes']} | {_fmt(mean)} | "
                f"{_fmt(block.get('return_bottom_quintile'))} | {_fmt(block.get('success_rate', '-'))} |{blank}"
            )
    if "task_mean" in s and "training" not in s:
        lines.append(
            f"| **mean over tasks** | | {s['episodes']} | {_fmt(s['task_mean']['return_mean'])} | "
            f"{_fmt(s.get('return_bottom_quintile'))} | {_fmt(s['task_mean'].get('success_rate', '-'))} |{blank}"
        )
    lines += ["", *[f"Spaces: {note}." for note in notes]] if notes else []
    return lines


def _attempts(summary: dict[str, Any]) -> list[float]:
    """Mean return of attempt 1..k in a summary's info (k-shot envs); [] otherwise."""
    info, out = summary.get("info", {}), list[float]()
    while f"amago_pipe/attempt_{len(out) + 1}_return" in info:
        out.append(info[f"amago_pipe/attempt_{len(out) + 1}_return"])
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# ---- record.json ------------------------------------------------------------------------------------


def agent_recipe(agent: Any) -> dict[str, Any]:
    """`type`, `recipe` and the keys set off the defaults (`changed`, dotted). The recipe names the update:
    `memory` (tree backup + Huber), `default` (no update key changed; head sizes do not count) or `custom`."""
    changed = flat_changes(to_dict(agent), to_dict(type(agent)()))
    changed.pop("type", None)
    update_keys = [k for k in changed if k == "critic.loss" or not k.startswith(("actor.", "critic."))]
    targets, critic = getattr(agent, "targets", None), getattr(agent, "critic", None)
    memory = getattr(targets, "correction", "") == "tree_backup" and getattr(critic, "loss", "") == "huber"
    recipe = "memory" if memory else "custom" if update_keys else "default"
    return {"type": agent.type, "recipe": recipe, **({"changed": changed} if changed else {})}


def flat_changes(value: dict[str, Any], default: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The dotted keys whose value in `value` differs from `default` (nested dicts are walked)."""
    out: dict[str, Any] = {}
    for key, v in value.items():
        d = default.get(key)
        if isinstance(v, dict) and isinstance(d, dict):
            out.update(flat_changes(v, d, f"{prefix}{key}."))
        elif v != d:
            out[f"{prefix}{key}"] = v
    return out


def _pick(summary: dict[str, Any]) -> dict[str, float | None]:
    return {k: summary[k] for k in HEADLINE if k in summary}


def split_metrics(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(headline metrics, per training task, per held-out task) of an evaluation summary; the headline is the
    training tasks' when some are held out, with the mean over tasks for a task set."""
    held = set(summary.get("held_out", {}).get("tasks", []))
    group = summary.get("training", summary)
    metrics = _pick(group)
    mean = group.get("task_mean") or (summary.get("task_mean") if "training" not in summary else None)
    if mean:
        metrics.update({f"task_mean_{k}": v for k, v in mean.items()})
    per_env = summary.get("per_env", {})
    tasks = {name: _pick(sub) for name, sub in sorted(per_env.items()) if name not in held}
    held_out = {name: _pick(sub) for name, sub in sorted(per_env.items()) if name in held}
    if "held_out" in summary:
        block = summary["held_out"]
        held_out["mean over tasks"] = {**_pick(block), **block.get("task_mean", {})}
        if not per_env:  # a single held-out task is not split per env
            held_out = {name: _pick(block) for name in block.get("tasks", [])} or held_out
    return metrics, tasks, held_out


def _trained(train_dir: Path, train_cfg: TrainStageConfig, epoch: int | None) -> tuple[int | None, int | None]:
    """(updates, online env steps) of the policy evaluated: at its epoch when known, else the train summary's."""
    from amago_pipe.train.metrics import METRICS_FILE, read_metrics

    try:
        summary = json.loads((train_dir / "train_summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        summary = {}
    updates = epoch * train_cfg.updates_per_epoch if isinstance(epoch, int) else summary.get("steps")
    env_steps = summary.get("env_steps")
    if isinstance(epoch, int) and train_cfg.online is not None:
        rows = [
            r for r in read_metrics(train_dir / METRICS_FILE) if r.get("epoch") == epoch and "online/env_steps" in r
        ]
        env_steps = rows[-1]["online/env_steps"] if rows else env_steps
    return updates, env_steps


def evaluation_record(
    report: dict[str, Any],
    *,
    stage: str,
    run_dir: Path,
    out_dir: Path,
    train_dir: Path,
    train_cfg: Any,
    seed: int,
    machine: str,
) -> Record:
    """The result record of one evaluation: what ran, on what budget, what it scored and how to run it again."""
    metrics, tasks, held_out = split_metrics(report["summary"])
    policy = report["policy"]
    model = getattr(train_cfg, "model", None)
    encoder = (
        {"tstep": str(model.tstep_encoder.type), "traj": str(model.traj_encoder.type)} if model is not None else {}
    )
    is_train = isinstance(train_cfg, TrainStageConfig)
    updates, env_steps = _trained(train_dir, train_cfg, policy.get("epoch")) if is_train else (None, None)
    return Record(
        task=str(report["env"]),
        encoder=encoder,
        agent=agent_recipe(train_cfg.agent) if is_train else {},
        seed=seed,
        updates=updates,
        env_steps=env_steps,
        metrics=metrics,
        tasks=tasks,
        held_out=held_out,
        command=command_line(read_command(run_dir)),
        source=str(out_dir),
        git_commit=git_commit(),
        date=datetime.date.today().isoformat(),
        machine=f"{machine}, {os.cpu_count()} CPU cores",
        run={
            "stage": stage,
            "train_stage": policy["train_stage"],
            "checkpoint": policy["which"],
            "epoch": policy.get("epoch"),
            "greedy": report["greedy"],
            "episodes": report["summary"].get("episodes"),
        },
    )
