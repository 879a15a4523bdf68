"""`convert minari|d4rl|amago-buffer`, `datasets` and `to-minari` through click (in-process, real files)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from gymnasium import spaces

from amago_pipe.cli.common import AmagoGroup
from amago_pipe.cli.convert_cmds import COMMANDS, STORE_COMMANDS, parse_episodes
from amago_pipe.errors import ConfigError
from amago_pipe.testing import synthetic as syn


@click.group(cls=AmagoGroup)
def cli() -> None:
    """Test root: the commands as the lead attaches them."""


for _command in [*COMMANDS, *STORE_COMMANDS]:
    cli.add_command(_command)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def d4rl_file(tmp_path: Path, rng) -> Path:
    eps = [syn.continuous_episode(rng, n, e) for n, e in [(4, "terminal"), (5, "timeout")]]
    return syn.write_d4rl_hdf5(tmp_path / "d.hdf5", eps)


def test_d4rl_prints_report_then_json_says_skipped(tmp_path: Path, d4rl_file: Path):
    code, out, _ = invoke("convert", "d4rl", str(d4rl_file), "--store", str(tmp_path / "s.zarr"))
    assert code == 0 and "conversion: d4rl:" in out and "all timesteps accounted for" in out
    code, out, _ = invoke("convert", "d4rl", str(d4rl_file), "--store", str(tmp_path / "s.zarr"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "skipped" and doc["timesteps"] == 9


def test_options_reach_the_converter(tmp_path: Path, d4rl_file: Path):
    code, out, _ = invoke(
        "convert",
        "d4rl",
        str(d4rl_file),
        "--store",
        str(tmp_path / "s.zarr"),
        "--json",
        "--episodes",
        "1:2",
        "--filter",
        "min_length=2",
        "--partition",
        "demos",
        "--report",
        str(tmp_path / "r.json"),
    )
    doc = json.loads(out)
    assert code == 0 and doc["partition"] == "demos" and doc["episodes"] == 1 and doc["timesteps"] == 5
    assert json.loads((tmp_path / "r.json").read_text())["source_fingerprint"] == doc["source_fingerprint"]


def test_errors_become_one_line_and_exit_codes(tmp_path: Path):
    code, _, err = invoke("convert", "minari", "nope/missing-v0", "--store", str(tmp_path / "s.zarr"))
    assert code == 3 and err.startswith("error: dataset: unknown Minari dataset 'nope/missing-v0'")
    code, _, err = invoke("convert", "d4rl", str(tmp_path / "d.hdf5"), "--store", "s", "--filter", "oops")
    assert code == 2 and "--filter: 'oops' is not KEY=VALUE" in err


def test_minari_datasets_and_to_minari(tmp_path: Path):
    box, act = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)
    buffers, _ = syn.sampled_minari_episodes(box, act, [3, 4], ["terminal", "timeout"])
    syn.write_minari("cli/src-v0", buffers, box, act)
    code, out, _ = invoke("datasets", "--json")
    assert code == 0 and [d["id"] for d in json.loads(out)["datasets"]] == ["cli/src-v0"]
    code, out, _ = invoke("convert", "minari", "cli/src-v0", "--store", str(tmp_path / "s.zarr"), "--json")
    assert code == 0 and json.loads(out)["episodes"] == 2
    code, out, _ = invoke("to-minari", str(tmp_path / "s.zarr"), "--dataset-id", "cli/back-v0", "--json")
    assert code == 0 and json.loads(out)["timesteps"] == 7
    code, out, _ = invoke("datasets")
    assert code == 0 and "cli/back-v0" in out and "cli/src-v0" in out


def test_amago_buffer_command(tmp_path: Path, rng):
    syn.write_amago_npz(tmp_path / "run/buffer/fifo", syn.continuous_episode(rng, 3, "terminal"))
    code, out, _ = invoke(
        "convert",
        "amago-buffer",
        str(tmp_path / "run"),
        "--store",
        str(tmp_path / "s.zarr"),
        "--buffer-partition",
        "fifo",
        "--action-kind",
        "continuous",
        "--json",
    )
    assert code == 0 and json.loads(out)["timesteps"] == 3


def test_parse_episodes():
    assert parse_episodes("5") == 5 and parse_episodes("2:7") == [2, 7] and parse_episodes(":3") == [0, 3]
    with pytest.raises(ConfigError, match=r"--episodes: 'a:b' is not N or START:STOP"):
        parse_episodes("a:b")


def test_source_commands_are_generated_from_the_config_fields(tmp_path: Path, d4rl_file: Path):
    code, out, _ = invoke("convert", "d4rl", "--help")
    assert code == 0 and "--repeat-last-obs" in out and "--no-split-on-discontinuity" in out and "--info-key" in out
    assert "--goals-from-obs" not in out  # a minari field is not offered for d4rl
    code, out, _ = invoke("convert", "amago-buffer", "--help")
    assert "--action-kind [auto|discrete|continuous|multibinary]" in out and "--buffer-partition" in out
    args = ("convert", "d4rl", str(d4rl_file), "--store", str(tmp_path / "s.zarr"), "--json")
    code, out, _ = invoke(*args, "--no-split-on-discontinuity")
    joined = json.loads(out)
    code, out, _ = invoke(*args)
    doc = json.loads(out)  # the option reached the converter: another fingerprint, the earlier copy replaced
    assert code == 0 and doc["source_fingerprint"] != joined["source_fingerprint"] and doc["replaced_segments"]


def test_plugins_and_unknown_sources_on_the_command_line(tmp_path: Path):
    plugin = "test_convert_run:TinyConverter"
    code, out, _ = invoke("convert", plugin, "--store", str(tmp_path / "s.zarr"), "--opt", "seed=3", "--json")
    assert code == 0 and json.loads(out)["episodes"] == 2
    code, _, err = invoke("convert", plugin, "--store", str(tmp_path / "s.zarr"), "--opt", "sead=3")
    assert code == 2 and "source.sead: unknown key 'sead'" in err and "did you mean 'seed'" in err
    code, _, err = invoke("convert", "minary", "x", "--store", "s")
    assert code == 2 and "No such command 'minary'" in err
