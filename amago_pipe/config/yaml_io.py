"""YAML reading with line numbers (and duplicate-key detection), and plain YAML writing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from amago_pipe.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads `1e-4` (no dot) as a float, as YAML 1.2 does."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def parse_scalar(text: str) -> Any:
    """Parse a `--set` value the way YAML would (`5` → int, `[1, 2]` → list, `abc` → str)."""
    try:
        return yaml.load(text, Loader=_Loader) if text.strip() else ""
    except yaml.YAMLError:
        return text


def load_yaml(path: Path) -> tuple[Any, dict[str, int], list[tuple[str, str]]]:
    """Load a YAML file; return (data, {dotted key path: line}, [(path, problem)]) — problems are duplicates."""
    try:
        text = path.read_text()
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such pipeline file") from e
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read pipeline file ({e})") from e
    if "\t" in text and any(line.startswith("\t") or line.lstrip(" ").startswith("\t") for line in text.splitlines()):
        lineno = next(
            i for i, line in enumerate(text.splitlines(), 1) if "\t" in line[: len(line) - len(line.lstrip())]
        )
        raise ConfigError(f"{path}:{lineno}: YAML does not allow tabs for indentation; indent with spaces")
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        context_mark = getattr(e, "context_mark", None)
        if context and context_mark is not None:
            context = f"{context} that starts at line {context_mark.line + 1}"
        detail = f"{problem} ({context})" if context else problem
        raise ConfigError(f"{where}: YAML syntax error: {detail}") from e
    lines: dict[str, int] = {}
    duplicates: list[tuple[str, str]] = []
    if node is not None:
        _walk(node, "", lines, duplicates)
    return data, lines, duplicates


def _walk(node: yaml.Node, path: str, lines: dict[str, int], duplicates: list[tuple[str, str]]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            line = key_node.start_mark.line + 1
            if key in seen:
                duplicates.append((child, f"duplicate key '{key}' (first defined on line {seen[key]})"))
            seen[key] = line
            lines[child] = line
            _walk(value_node, child, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = f"{path}.{i}" if path else str(i)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, duplicates)


def dump_yaml(data: Any) -> str:
    """Readable YAML of plain data (key order kept)."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
