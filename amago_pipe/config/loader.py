"""Load a pipeline file: YAML → `--set` overrides → `${...}` references → typed, validated config.

Every problem in the file is reported at once, one line each with file:line and the key path.
No torch, no click.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amago_pipe.config.build import Problems, build, describe
from amago_pipe.config.evaluate import EvaluateStageConfig
from amago_pipe.config.export import ExportStageConfig
from amago_pipe.config.online import OnlineConfig
from amago_pipe.config.pipeline import PipelineConfig, name_problem
from amago_pipe.config.stage_refs import check_stage_references
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.config.yaml_io import load_yaml, parse_scalar
from amago_pipe.errors import ConfigError, did_you_mean

REFERENCE = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class LoadedPipeline:
    """A validated pipeline with the plain data it was built from (overrides and references applied)."""

    config: PipelineConfig
    data: dict[str, Any]
    path: Path
    needs: dict[str, list[str]]
    """Resolved dependencies of each stage (defaults filled in)."""
    overrides: tuple[str, ...] = ()
    """The `--set` overrides applied, as given (a run records them to say how to reproduce it)."""


Check = Callable[[PipelineConfig, Problems], None]
"""An extra check of a built pipeline from a higher layer (e.g. env ids against gymnasium's registry)."""


def load_pipeline(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), checks: Sequence[Check] = ()
) -> LoadedPipeline:
    """Read, override, resolve and validate a pipeline file; raise ConfigError listing every problem (those of
    `checks` too, with file:line)."""
    path = Path(path)
    data, lines, duplicates = load_yaml(path)
    set_paths: dict[str, str] = {}

    def locate(key_path: str) -> str:
        for candidate in _ancestors(key_path):
            if candidate in set_paths:
                return f"--set {set_paths[candidate]}: "
            if candidate in lines:
                return f"{path}:{lines[candidate]}: "
        return f"{path}: "

    problems = Problems(locate)
    for dup_path, message in duplicates:
        problems.add(dup_path, message)
    if data is None:
        problems.add("", "the file is empty; a pipeline needs at least `version: 1`, `name:` and `stages:`")
        problems.raise_if_any()
    if not isinstance(data, dict):
        problems.add("", f"expected a mapping with keys version, name, stages; the file holds {describe(data)}")
        problems.raise_if_any()
    for item in overrides:
        key_path = apply_override(data, item)
        set_paths[key_path] = item
    data = resolve_references(data, problems)
    cfg = build(PipelineConfig, data, problems)
    needs = check_graph(data.get("stages"), problems)
    if cfg is not None:
        check_across_stages(cfg, needs, problems, checks)
    problems.raise_if_any()
    assert cfg is not None  # problems were raised otherwise
    return LoadedPipeline(cfg, data, path, needs, tuple(overrides))


def check_across_stages(
    cfg: PipelineConfig, needs: dict[str, list[str]], problems: Problems, checks: Sequence[Check]
) -> None:
    """The checks of a built pipeline that look at several stages (and the extra `checks`)."""
    check_best_has_validation(cfg, needs, problems)
    check_partition_names(cfg, problems)
    check_stage_references(cfg, needs, problems)
    for check in checks:
        check(cfg, problems)


def _ancestors(key_path: str) -> list[str]:
    parts = key_path.split(".") if key_path else []
    return [".".join(parts[:i]) for i in range(len(parts), -1, -1)]


def apply_override(data: dict[str, Any], item: str) -> str:
    """Apply one `a.b.c=value` override in place; return its key path (or the first section it created).

    Sections missing on the way (or null) are created, except a new stage; the strict build then names any
    misspelt key. Each section on the way is copied first: a YAML anchor shares one object between places,
    and the override must change only the place it names. `store=PATH` on a `store:` mapping sets its `path`
    and keeps its partition and cache settings (a fifo capacity must not vanish with a new path).
    """
    key_path, sep, raw = item.partition("=")
    key_path = key_path.strip()
    if not sep or not key_path or any(not p for p in key_path.split(".")):
        raise ConfigError(f"--set {item}: expected KEY.PATH=VALUE, e.g. --set stages.train.epochs=5")
    value = parse_scalar(raw)
    if key_path == "store" and isinstance(data.get("store"), dict) and isinstance(value, str):
        data["store"] = {**data["store"], "path": value}
        return "store.path"
    parts = key_path.split(".")
    node: Any = data
    created = ""
    for depth in range(len(parts) - 1):
        node, made = _section(node, parts[: depth + 1], parts[depth + 1], item)
        created = created or (".".join(parts[: depth + 1]) if made else "")
    leaf = parts[-1]
    if isinstance(node, list):
        if not (leaf.isdigit() and int(leaf) < len(node)):
            raise ConfigError(
                f"--set {item}: '{leaf}' is not an index of the list at '{'.'.join(parts[:-1])}' "
                f"(it has {len(node)} items)"
            )
        node[int(leaf)] = parse_scalar(raw)
    else:
        node[leaf] = parse_scalar(raw)
    return created or key_path


def _section(node: dict[str, Any] | list[Any], parts: list[str], inner: str, item: str) -> tuple[Any, bool]:
    """The section at `parts` in `node` (its parent), made this path's own copy, and whether it was created
    (absent or null). `inner`: the next key, which must not be a list index in a created section."""
    part, where = parts[-1], ".".join(parts)
    if isinstance(node, list):
        if not (part.isdigit() and int(part) < len(node)):
            raise ConfigError(f"--set {item}: '{part}' is not an index of the list at '{'.'.join(parts[:-1])}'")
        key: Any = int(part)
    elif node.get(part) is None:
        if parts[0] == "stages" and len(parts) == 2 and part not in node:
            stages = [str(k) for k in node]
            raise ConfigError(
                f"--set {item}: no stage '{part}' (stages: {', '.join(stages) or 'none'}){did_you_mean(part, stages)}"
                "; --set changes a stage of the file, it does not add one"
            )
        if inner.isdigit():
            raise ConfigError(
                f"--set {item}: '{where}' is not in the file, so it has no item {inner}; "
                f"set the whole list instead, e.g. --set {where}=[...]"
            )
        node[part] = {}
        return node[part], True
    else:
        key = part
    child = node[key]
    if not isinstance(child, dict | list):
        raise ConfigError(
            f"--set {item}: '{where}' is {describe(child)}, not a section, so nothing can be set inside it; "
            f"set it whole (--set {where}=...) or make it a mapping in the file"
        )
    node[key] = copy.copy(child)
    return node[key], False


def resolve_references(data: dict[str, Any], problems: Problems) -> dict[str, Any]:
    """Replace `${a.b}` in strings by the value at key path `a.b` of the same file."""
    root = copy.deepcopy(data)

    def lookup(ref: str, at: str, stack: tuple[str, ...]) -> Any:
        if ref in stack:
            problems.add(at, f"reference cycle: {' -> '.join((*stack, ref))}")
            return None
        found, node = _follow(root, ref)
        if not found:
            problems.add(at, node)
            return None
        return walk(node, at, (*stack, ref))

    def walk(node: Any, at: str, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, f"{at}.{k}" if at else str(k), stack) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{at}.{i}", stack) for i, v in enumerate(node)]
        if not isinstance(node, str) or "${" not in node:
            return node
        whole = REFERENCE.fullmatch(node.strip())
        if whole:
            return lookup(whole.group(1).strip(), at, stack)
        return REFERENCE.sub(lambda m: str(lookup(m.group(1).strip(), at, stack)), node)

    resolved: dict[str, Any] = walk(root, "", ())
    return resolved


def _follow(root: Any, ref: str) -> tuple[bool, Any]:
    """(True, the value at key path `ref`), or (False, the problem: which key is missing, did you mean)."""
    node: Any = root
    parts = ref.split(".")
    for depth, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            keys = [str(k) for k in node] if isinstance(node, dict) else []
            prefix = ".".join(parts[:depth])
            return False, (
                f"unknown reference '${{{ref}}}': no key '{part}'{f' under {prefix}' if prefix else ''}"
                f"{did_you_mean(part, keys)}"
            )
    return True, node


def check_graph(stages: Any, problems: Problems) -> dict[str, list[str]]:
    """Resolve each stage's `needs` (default: the previous stage); report bad names and cycles.

    Reads the plain `stages:` data, so these problems are reported even when a stage's own fields are wrong.
    """
    if not isinstance(stages, dict):
        return {}  # reported by `build`
    names = list(stages)
    known = [str(n) for n in names]
    needs: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        problem = name_problem(name, "stage name")
        if problem:
            problems.add(f"stages.{name}", problem)
        entry = stages[name]
        declared = entry.get("needs") if isinstance(entry, dict) else None
        deps = declared if isinstance(declared, list) else ([names[i - 1]] if i > 0 else [])
        for j, dep in enumerate(deps):
            if dep == name:
                problems.add(f"stages.{name}.needs.{j}", f"stage '{name}' cannot need itself")
            elif isinstance(dep, str) and dep not in stages:
                problems.add(
                    f"stages.{name}.needs.{j}",
                    f"unknown stage '{dep}' (stages: {', '.join(known)}){did_you_mean(dep, known)}",
                )
        needs[name] = [d for d in deps if isinstance(d, str) and d in stages and d != name]
    cycle = find_cycle(needs)
    if cycle:
        problems.add(f"stages.{cycle[0]}.needs", f"dependency cycle: {' -> '.join(map(str, cycle))}")
    if not names:
        problems.add("stages", "a pipeline needs at least one stage")
    return needs


def check_best_has_validation(cfg: PipelineConfig, needs: dict[str, list[str]], problems: Problems) -> None:
    """An evaluate/export stage with `checkpoint: best` whose train stage does not validate would fail only after
    training; report it now (the train stage: `train_stage:`, else the one train stage among its needs)."""
    for name, stage in cfg.stages.items():
        if not isinstance(stage, EvaluateStageConfig | ExportStageConfig) or stage.checkpoint != "best":
            continue
        trains = [stage.train_stage] if stage.train_stage else needs.get(name, [])
        trains = [t for t in trains if isinstance(cfg.stages.get(t), TrainStageConfig)]
        if len(trains) == 1 and cfg.stages[trains[0]].validate is None:  # type: ignore[attr-defined]
            problems.add(
                f"stages.{name}.checkpoint",
                f"`best` is the validation-best epoch, but train stage '{trains[0]}' has no `validate:`; "
                "add a `validate:` block there or use `checkpoint: latest`",
            )


def check_partition_names(cfg: PipelineConfig, problems: Problems) -> None:
    """A train stage weighting a partition that nothing in the pipeline writes or declares, close to one that
    something does, is a misspelling: at run time a weight on a partition that never appears is dropped."""
    known = {"protected", "fifo", *cfg.partition_settings}
    for stage in cfg.stages.values():
        for attr in ("partition", "target"):  # what convert, collect and relabel stages write
            if isinstance(written := getattr(stage, attr, None), str):
                known.add(written)
        if isinstance(online := getattr(stage, "online", None), OnlineConfig):
            known.add(online.partition)
    for name, stage in cfg.stages.items():
        if not isinstance(stage, TrainStageConfig):
            continue
        weighted = [(f"stages.{name}.partitions.{p}", p) for p in stage.partitions]
        for i, phase in enumerate(stage.partition_schedule):
            weighted += [(f"stages.{name}.partition_schedule.{i}.weights.{p}", p) for p in phase.weights]
        for where, partition in weighted:
            hint = did_you_mean(partition, known)
            if partition not in known and hint:
                problems.add(
                    where,
                    f"no stage of this pipeline writes partition '{partition}' (written or declared: "
                    f"{', '.join(sorted(known))}){hint} (if another pipeline fills '{partition}', declare it "
                    f"under `store: {{partitions: {{{partition}: ...}}}}` with the settings it has there)",
                )


def find_cycle(needs: dict[str, list[str]]) -> list[str] | None:
    """A cycle in the `needs` graph as a list of names (first repeated at the end), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in needs.get(node, []):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in needs:
        if node not in state and (found := visit(node)):
            return found
    return None
