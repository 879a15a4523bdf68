"""`validate` reports every problem of a file at once, and stage names are checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from amago_pipe.config.loader import load_pipeline
from amago_pipe.config.pipeline import NAME_MAX
from amago_pipe.errors import ConfigError

HEAD = "version: 1\nname: demo\n"
EMIT = '"pipeline_stages:Emit"'
TRAIN = f"""\
stages:
  data: {{type: {EMIT}}}
  train:
    type: train
    needs: [dta]
    epochs: -3
    lr: 5.0
    model:
      tstep_encoder: {{type: ff}}
      traj_encoder: {{type: transfomer}}
"""


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    return [p.replace(str(tmp_path) + "/", "") for p in info.value.problems]


def test_every_problem_of_a_stage_in_one_go(tmp_path: Path):
    found = problems_of(tmp_path, HEAD + TRAIN)
    assert found == [
        "p.yaml:12: stages.train.model.traj_encoder.type: unknown traj_encoder 'transfomer' "
        "(known: ff, gru, mamba, transformer); did you mean 'transformer'?",
        "p.yaml:8: stages.train.epochs: must be at least 1, got -3",
        "p.yaml:9: stages.train.lr: must be in (0, 1), got 5.0",
        "p.yaml:7: stages.train.needs.0: unknown stage 'dta' (stages: data, train); did you mean 'data'?",
    ]


def test_checks_of_a_valid_config_all_reported(tmp_path: Path):
    found = problems_of(tmp_path, HEAD + "stages:\n  t: {type: train, epochs: 0, keep_last: 0, lr: 2.0}\n")
    assert [p.split(": ", 2)[1] for p in found] == ["stages.t.epochs", "stages.t.keep_last", "stages.t.lr"]


def test_pipeline_name_reported_with_stage_problems(tmp_path: Path):
    found = problems_of(tmp_path, "version: 1\nname: my demo\nstages:\n  a: {type: trian}\n")
    assert [p.split(": ", 2)[1] for p in found] == ["stages.a.type", "name"]


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        (f"  1: {{type: {EMIT}}}\n", "p.yaml:4: stages.1: stage name 1 (an integer) is not a string; use 1 to 64"),
        (f"  données: {{type: {EMIT}}}\n", "stage name 'données' is not allowed; use 1 to 64 ASCII letters (a-z, A-Z)"),
        (f"  '1st': {{type: {EMIT}}}\n", "starting with a letter or '_'"),
        (
            f"  '{'a' * 300}': {{type: {EMIT}}}\n",
            "stage name 'aaaaaaaaaaaaaaaa...' is 300 characters long; use 1 to",
        ),
        (f"  'a\\n': {{type: {EMIT}}}\n", "is not allowed"),
    ],
    ids=["numeric", "non-ascii", "leading digit", "300 characters", "trailing newline"],
)
def test_bad_stage_names(tmp_path: Path, stages: str, expected: str):
    found = problems_of(tmp_path, HEAD + "stages:\n" + stages)
    assert len(found) == 1 and expected in found[0], found


def test_longest_name_allowed(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(f"version: 1\nname: {'n' * NAME_MAX}\nstages:\n  {'s' * NAME_MAX}: {{type: {EMIT}}}\n")
    assert list(load_pipeline(path).config.stages) == ["s" * NAME_MAX]
    path.write_text(f"version: 1\nname: {'n' * (NAME_MAX + 1)}\nstages:\n  a: {{type: {EMIT}}}\n")
    with pytest.raises(ConfigError, match=f"pipeline name 'nnnnnnnnnnnnnnnn...' is {NAME_MAX + 1} characters"):
        load_pipeline(path)


def test_cli_validate_lists_all_and_run_refuses_long_name(amago, tmp_path: Path):
    (tmp_path / "three.yaml").write_text(HEAD + TRAIN)
    proc = amago("validate", "three.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("three.yaml:") == 4, proc.stderr
    (tmp_path / "numeric.yaml").write_text(HEAD + f"stages:\n  1: {{type: {EMIT}}}\n")
    (tmp_path / "empty.yaml").write_text("")
    proc = amago("validate", "numeric.yaml", "empty.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "numeric.yaml:4: stages.1: stage name 1 (an integer) is not a string" in proc.stderr
    assert "empty.yaml: <root>: the file is empty" in proc.stderr
    (tmp_path / "long.yaml").write_text(HEAD + f"stages:\n  {'a' * 300}: {{type: {EMIT}}}\n")
    proc = amago("run", "long.yaml")
    assert proc.returncode == 2 and "300 characters long" in proc.stderr and "too long" not in proc.stderr
