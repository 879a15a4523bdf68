"""Generate the pipeline JSON Schema from the config dataclasses (field docstrings → descriptions).

The generated file lives in `schemas/pipeline.schema.json` (installed as `amago_pipe.schemas`);
a test fails when it is stale. No torch, no click.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from importlib import resources
from typing import Any, Literal, Union

from amago_pipe.config.base import Component, class_doc, field_docs
from amago_pipe.config.build import resolve_component_class
from amago_pipe.config.pipeline import PipelineConfig

SCHEMA_ID = "https://amago-pipe.dev/schemas/pipeline.schema.json"
PLUGIN_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"
_SCALAR_SCHEMAS: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


class _Generator:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def type_schema(self, tp: Any) -> dict[str, Any]:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if tp is Any:
            return {}
        if isinstance(tp, type) and tp in _SCALAR_SCHEMAS:
            return {"type": _SCALAR_SCHEMAS[tp]}
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (Union, types.UnionType):
            return {"anyOf": [self.type_schema(a) for a in args]}
        if origin in (list, tuple):
            return self.array_schema(origin, args)
        if origin is dict:
            return {"type": "object", "additionalProperties": self.type_schema(args[1]) if args else {}}
        if isinstance(tp, type) and issubclass(tp, Component):
            return self.component(tp)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return {"$ref": f"#/$defs/{self.dataclass_def(tp)}"}
        return {}

    def array_schema(self, origin: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
            return {
                "type": "array",
                "prefixItems": [self.type_schema(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        return {"type": "array", "items": self.type_schema(args[0]) if args else {}}

    def component(self, base: type[Component]) -> dict[str, Any]:
        name = f"{base.registry.kind}"
        if name not in self.defs:
            self.defs[name] = {}  # placeholder against recursion
            options = []
            for entry in base.registry.names():
                cls = resolve_component_class(base, entry, "schema")
                ref = self.dataclass_def(cls, type_const=entry)
                options.append({"$ref": f"#/$defs/{ref}"})
            plugin = {
                "type": "object",
                "description": f"A plugin {base.registry.kind}: `type: package.module:Class`.",
                "properties": {"type": {"type": "string", "pattern": PLUGIN_PATTERN}},
                "required": ["type"],
            }
            self.defs[name] = {"description": class_doc(base), "anyOf": [*options, plugin]}
        return {"$ref": f"#/$defs/{name}"}

    def dataclass_def(self, cls: type, type_const: str | None = None) -> str:
        name = f"{typing.cast(Any, cls).registry.kind}.{type_const}" if type_const else cls.__name__
        if name in self.defs:
            return name
        self.defs[name] = {}
        hints = typing.get_type_hints(cls)
        docs = field_docs(cls)
        props: dict[str, Any] = {}
        required = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.name == "type" and type_const:
                props["type"] = {"const": type_const, "description": docs.get("type", "")}
                required.append("type")
                continue
            prop = self.type_schema(hints[f.name])
            if docs.get(f.name):
                prop = {**prop, "description": docs[f.name]}
            if f.default is not dataclasses.MISSING:
                prop["default"] = _jsonable(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                prop["default"] = _jsonable(f.default_factory())
            else:
                required.append(f.name)
            props[f.name] = prop
        schema: dict[str, Any] = {
            "type": "object",
            "description": class_doc(cls),
            "properties": props,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        self.defs[name] = schema
        return name


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        from amago_pipe.config.base import to_dict

        return to_dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def generate_schema() -> dict[str, Any]:
    """The JSON Schema of a pipeline file, with every registered component type."""
    gen = _Generator()
    root = gen.dataclass_def(PipelineConfig)
    top = gen.defs.pop(root)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "amago-pipe pipeline",
        **top,
        "$defs": dict(sorted(gen.defs.items())),
    }


def schema_text() -> str:
    """The pipeline JSON Schema as written to `schemas/pipeline.schema.json`."""
    return json.dumps(generate_schema(), indent=2, sort_keys=False) + "\n"


def installed_schema_text() -> str:
    """The schema file shipped in `amago_pipe.schemas`."""
    return resources.files("amago_pipe.schemas").joinpath("pipeline.schema.json").read_text()
