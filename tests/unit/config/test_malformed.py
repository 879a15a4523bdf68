"""Malformed pipelines, as a new user would write them: each gives one precise line per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from amago_pipe.config.loader import load_pipeline
from amago_pipe.errors import ConfigError

HEAD = "version: 1\nname: demo\n"
EMIT = '"pipeline_stages:Emit"'

CASES: list[tuple[str, str, list[str]]] = [
    (
        "yaml syntax: unclosed bracket",
        HEAD + "stages:\n  a: {type: x\n",
        ["p.yaml:5", "YAML syntax error", "starts at line 4"],
    ),
    (
        "yaml syntax: bad indentation",
        HEAD + "stages:\n  a:\n    type: x\n   value: 2\n",
        ["p.yaml:", "YAML syntax error"],
    ),
    ("tabs for indentation", HEAD + "stages:\n\ta: {type: x}\n", ["p.yaml:4", "tabs"]),
    ("empty file", "", ["p.yaml: <root>: the file is empty", "`version: 1`, `name:` and `stages:`"]),
    ("only comments", "# nothing yet\n", ["the file is empty"]),
    ("top level is a list", "- a\n- b\n", ["expected a mapping"]),
    (
        "missing name",
        "version: 1\nstages:\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:1: name: missing required key 'name'"],
    ),
    ("missing stages", HEAD, ["stages: missing required key 'stages'"]),
    (
        "unknown top-level key",
        HEAD + "stagse:\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:3: stagse: unknown key 'stagse'", "did you mean 'stages'?"],
    ),
    (
        "wrong version",
        "version: 2\nname: demo\nstages:\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:1: version: version 2 is not supported"],
    ),
    (
        "version as string",
        "version: '1'\nname: demo\nstages:\n  a: {type: " + EMIT + "}\n",
        ["version: expected an integer, got '1' (a string)"],
    ),
    (
        "bad name",
        "version: 1\nname: my demo!\nstages:\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:2: name: pipeline name 'my demo!' is not allowed; use 1 to 64 ASCII letters"],
    ),
    ("stages is a list", HEAD + "stages:\n  - {type: " + EMIT + "}\n", ["p.yaml:3: stages: expected a mapping"]),
    (
        "stage without type",
        HEAD + "stages:\n  a: {value: 2}\n",
        ["p.yaml:4: stages.a: missing 'type'", "known stage types"],
    ),
    ("stage is a scalar", HEAD + "stages:\n  a: convert\n", ["stages.a: expected a mapping with a 'type' key"]),
    (
        "unknown stage type",
        HEAD + "stages:\n  a: {type: trian}\n",
        ["p.yaml:4: stages.a.type: unknown stage 'trian'", "did you mean 'train'?"],
    ),
    (
        "plugin module missing",
        HEAD + "stages:\n  a: {type: 'no_such_pkg.mod:Stage'}\n",
        ["stages.a.type: cannot import module 'no_such_pkg.mod'"],
    ),
    (
        "plugin attribute missing",
        HEAD + "stages:\n  a: {type: 'pipeline_stages:Nope'}\n",
        ["stages.a.type: module 'pipeline_stages' has no attribute 'Nope'"],
    ),
    ("plugin is not a stage", HEAD + "stages:\n  a: {type: 'pipeline_stages:time'}\n", ["is not a stage config"]),
    (
        "unknown stage key",
        HEAD + "stages:\n  a: {type: " + EMIT + ", valeu: 2}\n",
        ["p.yaml:4: stages.a.valeu: unknown key 'valeu'", "did you mean 'value'?"],
    ),
    (
        "wrong type int",
        HEAD + "stages:\n  a:\n    type: " + EMIT + "\n    value: ten\n",
        ["p.yaml:6: stages.a.value: expected an integer, got 'ten' (a string)"],
    ),
    (
        "quoted number",
        HEAD + "stages:\n  a:\n    type: " + EMIT + "\n    value: '10'\n",
        ["write numbers without quotes"],
    ),
    (
        "float for int",
        HEAD + "stages:\n  a:\n    type: " + EMIT + "\n    value: 2.5\n",
        ["stages.a.value: expected an integer, got 2.5"],
    ),
    (
        "bool as string",
        HEAD + "stages:\n  a:\n    type: " + EMIT + "\n    fail: 'yes'\n",
        ["stages.a.fail: expected a boolean"],
    ),
    ("needs is a string", HEAD + "stages:\n  a: {type: " + EMIT + ", needs: b}\n", ["stages.a.needs: expected a list"]),
    (
        "unknown needs",
        HEAD + "stages:\n  data: {type: " + EMIT + "}\n  train: {type: " + EMIT + ", needs: [dta]}\n",
        ["p.yaml:5: stages.train.needs.0: unknown stage 'dta'", "did you mean 'data'?"],
    ),
    ("needs itself", HEAD + "stages:\n  a: {type: " + EMIT + ", needs: [a]}\n", ["stage 'a' cannot need itself"]),
    (
        "cycle",
        HEAD + "stages:\n  a: {type: " + EMIT + ", needs: [b]}\n  b: {type: " + EMIT + ", needs: [a]}\n",
        ["dependency cycle: a -> b -> a"],
    ),
    (
        "duplicate stage",
        HEAD + "stages:\n  a: {type: " + EMIT + "}\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:5: stages.a: duplicate key 'a' (first defined on line 4)"],
    ),
    (
        "bad stage name",
        HEAD + "stages:\n  'my stage': {type: " + EMIT + "}\n",
        ["stage name 'my stage' is not allowed; use 1 to 64 ASCII letters (a-z, A-Z), digits, '-' or '_'"],
    ),
    (
        "unknown reference",
        HEAD + "store: runs/${nme}/store.zarr\nstages:\n  a: {type: " + EMIT + "}\n",
        ["p.yaml:3: store: unknown reference '${nme}'", "did you mean 'name'?"],
    ),
    (
        "reference cycle",
        HEAD + "description: ${seed}\nseed: ${description}\nstages:\n  a: {type: " + EMIT + "}\n",
        ["reference cycle"],
    ),
    (
        "null for a required value",
        "version: 1\nname:\nstages:\n  a: {type: " + EMIT + "}\n",
        ["name: expected a string, got None"],
    ),
    ("no stages", HEAD + "stages: {}\n", ["stages: a pipeline needs at least one stage"]),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in CASES], ids=[c[0] for c in CASES])
def test_malformed_pipeline_message(tmp_path: Path, text: str, expected: list[str]):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    message = str(info.value).replace(str(tmp_path) + "/", "")
    for part in expected:
        assert part in message, message


def test_every_problem_reported_at_once(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(
        HEAD + "stages:\n  a: {type: " + EMIT + ", valeu: 2}\n  b: {type: trian}\n  c: {type: " + EMIT + ", value: x}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert len(info.value.problems) == 3
    assert [p.split(": ")[1] for p in info.value.problems] == ["stages.a.valeu", "stages.b.type", "stages.c.value"]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("stages.a.value", "expected KEY.PATH=VALUE"),
        ("=3", "expected KEY.PATH=VALUE"),
        ("stages.zz.value=3", "no stage 'zz' (stages: a); --set changes a stage of the file, it does not add one"),
        ("stagse.a.value=3", "did you mean 'stages'?"),
        ("stages.a.value=ten", "--set stages.a.value=ten: stages.a.value: expected an integer"),
        ("stages.a.colour=red", "--set stages.a.colour=red: stages.a.colour: unknown key 'colour'"),
    ],
)
def test_bad_set_overrides(tmp_path: Path, override: str, expected: str):
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + "stages:\n  a: {type: " + EMIT + "}\n")
    with pytest.raises(ConfigError, match=None) as info:
        load_pipeline(path, [override])
    assert expected in str(info.value)


def test_overrides_and_references_resolve(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(
        HEAD + "store: runs/${name}/store.zarr\nseed: 3\nstages:\n  a: {type: " + EMIT + ", value: '${seed}'}\n"
    )
    loaded = load_pipeline(path, ["seed=5", "stages.a.counter=c.json", "stages.a.step_seconds=1e-3"])
    assert loaded.config.store == "runs/demo/store.zarr"
    stage = loaded.config.stages["a"]
    assert (stage.value, stage.counter, stage.step_seconds) == (5, "c.json", 0.001)
    assert loaded.needs == {"a": []}


def test_cli_reports_without_traceback(amago, tmp_path: Path):
    (tmp_path / "bad.yaml").write_text(HEAD + "stages:\n  a: {type: trian, valeu: 1}\n")
    proc = amago("validate", "bad.yaml")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: bad.yaml:4: stages.a.type: unknown stage 'trian'")
    assert "Traceback" not in proc.stderr
    debug = amago("--debug", "validate", "bad.yaml")
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    missing = amago("run", "nope.yaml")
    assert missing.returncode == 2 and "nope.yaml: no such pipeline file" in missing.stderr
