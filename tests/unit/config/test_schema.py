"""The shipped JSON Schema is generated from the config dataclasses and must not be stale."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from amago_pipe.config.schema import generate_schema, installed_schema_text, schema_text

REPO = Path(__file__).resolve().parents[3]


def test_schema_file_is_current():
    assert installed_schema_text() == schema_text(), "schema is stale: run `amago-pipe schema --write`"


def test_schema_has_field_descriptions_and_stage_types():
    schema = generate_schema()
    assert schema["properties"]["stages"]["description"].startswith("Named stages")
    stage_types = {ref["$ref"].rsplit("/", 1)[-1] for ref in schema["$defs"]["stage"]["anyOf"] if "$ref" in ref}
    assert {"stage.convert", "stage.train", "stage.evaluate", "stage.collect"} <= stage_types


def test_example_pipelines_match_the_schema():
    validator = jsonschema.Draft202012Validator(json.loads(installed_schema_text()))
    for path in sorted((REPO / "pipelines").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        errors = sorted(validator.iter_errors(data), key=str)
        assert not errors, f"{path.name}: {errors[0].message}"
