"""Hostile input a user really writes: each mistake gets one line saying where, what was found, what was expected
and the fix; nothing a chosen option ignores is accepted silently; `--set` changes exactly the path it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from amago_pipe.config.loader import load_pipeline
from amago_pipe.errors import ConfigError

HEAD = "version: 1\nname: demo\n"
TRAIN = "stages:\n  train:\n    type: train\n    epochs: 2\n"


def _load(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return load_pipeline(path, list(overrides))


def _store(partitions: str) -> str:
    return f"{HEAD}store:\n  path: s.zarr\n  partitions: {partitions}\n{TRAIN}"


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        (
            "{fifo: {capacity_timesteps: -5}}",
            r"store\.partitions\.fifo\.capacity_timesteps: must be at least 1, got -5",
        ),
        (
            "{fifo: {capacity_timestep: 5}}",
            r"store\.partitions\.fifo\.capacity_timestep: unknown key 'capacity_timestep' .*"
            r"did you mean 'capacity_timesteps'\?",
        ),
        (
            "{fifo: 5}",
            r"store\.partitions\.fifo: expected a mapping, got 5 \(an integer\); "
            r"`partitions` reads like `\{fifo: \{capacity_timesteps: 200000\}\}`",
        ),
        (
            '{fifo: {capacity_timesteps: "200k"}}',
            r"capacity_timesteps: expected an integer, got '200k' \(a string\) "
            r"\(suffixes like k or M are not read; write 200_000 without quotes\)",
        ),
        ("[fifo]", r"store\.partitions: expected a mapping, got \['fifo'\] \(a list\); `partitions` reads like"),
    ],
    ids=["negative", "key typo", "bare number", "200k", "list"],
)
def test_store_partition_mistakes_say_what_is_wrong(tmp_path: Path, partitions: str, message: str):
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, _store(partitions))
    assert "(a mapping)" not in str(info.value)  # not "expected ... a mapping, got {...} (a mapping)"
    assert len(info.value.problems) == 1


def test_a_negative_store_cache_is_refused_with_its_path(tmp_path: Path):
    text = f"{HEAD}store:\n  path: s.zarr\n  cache: {{ram_gib: -1}}\n{TRAIN}"
    with pytest.raises(ConfigError, match=r"store\.cache\.ram_gib: must be a number of GiB >= 0, got -1"):
        _load(tmp_path, text)


def test_schedule_without_steps_names_the_missing_key(tmp_path: Path):
    online = "    partitions: {fifo: 1.0}\n    online:\n      env: {id: CartPole-v1}\n"
    text = f"{HEAD}{TRAIN}{online}      exploration: {{type: egreedy, epsilon: {{start: 1.0, end: 0.05}}}}\n"
    with pytest.raises(
        ConfigError, match=r"stages\.train\.online\.exploration\.epsilon\.steps: missing required key 'steps'"
    ) as info:
        _load(tmp_path, text)
    assert "(a mapping)" not in str(info.value)


@pytest.mark.parametrize(
    ("weights", "where"),
    [
        ("    partition_schedule: [{from_epoch: 1, weights: {protectd: 1.0}}]\n", "partition_schedule.0.weights"),
        ("    partitions: {protectd: 1.0}\n", "partitions"),
    ],
    ids=["schedule", "partitions"],
)
def test_misspelt_partition_is_refused(tmp_path: Path, weights: str, where: str):
    with pytest.raises(
        ConfigError,
        match=rf"stages\.train\.{where}\.protectd: no stage of this pipeline writes partition 'protectd' "
        r"\(written or declared: fifo, protected\); did you mean 'protected'\?",
    ):
        _load(tmp_path, f"{HEAD}{TRAIN}{weights}")


def test_partition_another_pipeline_fills_may_be_declared(tmp_path: Path):
    store = "store:\n  path: s.zarr\n  partitions: {fifo_b: {kind: fifo, capacity_timesteps: 1000}}\n"
    loaded = _load(tmp_path, f"{HEAD}{store}{TRAIN}    partitions: {{protected: 0.5, fifo_b: 0.5}}\n")
    assert loaded.config.stages["train"].partitions == {"protected": 0.5, "fifo_b": 0.5}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            "{protected: {capacity_timesteps: 1000}}",
            r"store\.partitions\.protected\.capacity_timesteps: the protected partition is never evicted, so it "
            r"takes no capacity; bound a fifo partition instead",
        ),
        (
            "{protected: {kind: fifo}}",
            r"store\.partitions\.protected\.kind: the partition named protected is always of kind protected",
        ),
    ],
    ids=["capacity", "kind"],
)
def test_protected_partition_is_never_bounded(tmp_path: Path, settings: str, message: str):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, _store(settings))


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            "{type: agent, filter: {type: binary, beta: 3.0}}",
            r"stages\.train\.agent\.filter\.beta: unknown key 'beta' for bc_filter \(allowed: type\)",
        ),
        (
            "{type: agent, filter: {type: exp, slope: 0.2}}",
            r"stages\.train\.agent\.filter\.slope: unknown key 'slope' for bc_filter \(allowed: type, beta, max_weight,",
        ),
        (
            "{type: agent, targets: {correction: tree_backup, n_step: 1}}",
            r"stages\.train\.agent\.targets\.correction: tree_backup has no effect with n_step: 1 .*"
            r"set n_step above 1 or remove correction",
        ),
        (
            "{type: multitask, critic: {output: bins, loss: huber}}",
            r"stages\.train\.agent\.critic\.loss: huber has no effect with output: bins",
        ),
    ],
    ids=["beta with binary", "slope with exp", "tree backup at n_step 1", "huber with bins"],
)
def test_agent_fields_the_options_ignore_are_refused(tmp_path: Path, agent: str, message: str):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, f"{HEAD}{TRAIN}    agent: {agent}\n")


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("{type: agent, filter_beta: 2}", r"agent\.filter_beta: moved: write agent\.filter: \{type: exp, beta: 2\}"),
        ("{type: agent, fbc_filter: binary}", r"agent\.fbc_filter: moved: write agent\.filter: \{type: binary\}"),
        (
            "{type: agent, leak_slope: 0.2}",
            r"agent\.leak_slope: moved: write agent\.filter: \{type: leaky, slope: 0\.2\}",
        ),
        (
            "{type: agent, n_step: 4, nstep_correction: tree_backup}",
            r"agent\.n_step: moved: write agent\.targets: \{n_step: 4, correction: tree_backup\}",
        ),
        ("{type: agent, td_reduce: min}", r"agent\.td_reduce: moved: write agent\.targets: \{reduce: min\}"),
        (
            "{type: agent, critic: {num_critics: 2}, critic_loss: huber}",
            r"agent\.critic_loss: moved: write agent\.critic: \{num_critics: 2, loss: huber\}",
        ),
        ("{type: multitask, value_samples: 5}", r"agent\.value_samples: moved: write agent\.samples: \{value: 5\}"),
    ],
    ids=["filter_beta", "fbc_filter", "leak_slope", "n_step", "td_reduce", "critic_loss", "value_samples"],
)
def test_old_flat_agent_keys_are_refused_with_their_new_form(tmp_path: Path, agent: str, message: str):
    with pytest.raises(
        ConfigError, match=rf"^\S*p\.yaml:\d+: stages\.train\.{message} \(CHANGELOG\.md, upgrade notes\)"
    ):
        _load(tmp_path, f"{HEAD}{TRAIN}    agent: {agent}\n")


def test_old_flat_agent_key_in_a_set_is_refused_with_its_new_form(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"stages\.train\.agent\.n_step: moved: write agent\.targets: \{n_step: 3\}"):
        _load(tmp_path, f"{HEAD}{TRAIN}    agent: {{type: agent}}\n", ("stages.train.agent.n_step=3",))


def test_agent_filter_switches_type_with_a_set_of_the_block(tmp_path: Path):
    """The filter is a typed block: `--set` of the whole block switches it (its fields belong to its type)."""
    text = f"{HEAD}{TRAIN}    agent: {{type: agent, filter: {{type: exp, beta: 2.0}}}}\n"
    loaded = _load(tmp_path, text, ("stages.train.agent.filter={type: leaky, slope: 0.3}",))
    assert loaded.config.stages["train"].agent.filter.slope == 0.3


def test_set_creates_a_missing_section(tmp_path: Path):
    loaded = _load(tmp_path, f"{HEAD}{TRAIN}", ("stages.train.logging.wandb=offline",))
    assert loaded.config.stages["train"].logging.wandb == "offline"


def test_set_into_a_created_section_names_a_typo_at_the_option(tmp_path: Path):
    with pytest.raises(
        ConfigError,
        match=r"^--set stages\.train\.loging\.wandb=offline: stages\.train\.loging: unknown key 'loging' .*"
        r"did you mean 'logging'\?",
    ):
        _load(tmp_path, f"{HEAD}{TRAIN}", ("stages.train.loging.wandb=offline",))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "stages.trian.epochs=3",
            r"--set stages\.trian\.epochs=3: no stage 'trian' \(stages: train\); did you mean 'train'\?; "
            r"--set changes a stage of the file, it does not add one",
        ),
        (
            "store.partitions.fifo.capacity_timesteps=10",
            r"--set store\.partitions\.fifo\.capacity_timesteps=10: 'store' is 's\.zarr' \(a string\), not a "
            r"section, so nothing can be set inside it; set it whole \(--set store=\.\.\.\) or make it a mapping",
        ),
        (
            "stages.train.agent.gammas.0=0.5",
            r"'stages\.train\.agent\.gammas' is not in the file, so it has no item 0; set the whole list instead",
        ),
    ],
    ids=["new stage", "inside a string", "item of an absent list"],
)
def test_set_that_cannot_apply_says_why(tmp_path: Path, override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, f"{HEAD}store: s.zarr\n{TRAIN}    agent: {{type: agent}}\n", (override,))


def test_set_through_a_yaml_anchor_changes_one_stage(tmp_path: Path):
    text = (
        f"{HEAD}stages:\n  a: &train\n    type: train\n    epochs: 2\n    agent: &agent {{type: agent, targets: {{n_step: 3}}}}\n"
        "  b: *train\n  c:\n    type: train\n    agent: *agent\n"
    )
    loaded = _load(tmp_path, text, ("stages.b.epochs=7", "stages.c.agent.targets.n_step=5"))
    stages = loaded.config.stages
    assert [(s.epochs, s.agent.targets.n_step) for s in stages.values()] == [(2, 3), (7, 3), (20, 5)]
    assert loaded.data["stages"]["a"]["agent"]["targets"]["n_step"] == 3


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", r"takes a whole number for memory_length, got 'abc' \(a string\); e\.g\. memory_length: 5"),
        (-5, r"takes a whole number >= 0 for memory_length, got -5 \(an integer\)"),
        (2.5, r"takes a whole number for memory_length, got 2\.5 \(a number\)"),
    ],
    ids=["string", "negative", "fraction"],
)
def test_gymnax_parameter_of_the_wrong_kind(value: object, message: str):
    pytest.importorskip("gymnax", reason="the optional gymnax extra is not installed")
    from amago_pipe.envs.gymnax import make_gymnax

    with pytest.raises(ConfigError, match=r"^env\.kwargs\.memory_length: gymnax env 'MemoryChain-bsuite' " + message):
        make_gymnax("MemoryChain-bsuite", 2, memory_length=value)


def test_cli_prints_one_line_and_exit_2(amago, tmp_path: Path):
    (tmp_path / "p.yaml").write_text(_store("{fifo: 5}"))
    proc = amago("validate", "p.yaml")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: p.yaml:5: store.partitions.fifo: expected a mapping, got 5 (an integer)")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_set_store_path_keeps_the_partition_and_cache_settings(tmp_path: Path):
    text = f"{HEAD}store:\n  path: s.zarr\n  partitions: {{fifo: {{capacity_timesteps: 500}}}}\n  cache: {{ram_gib: 2}}\n{TRAIN}"
    loaded = _load(tmp_path, text, ("store=other.zarr",))
    assert loaded.config.store_path == "other.zarr"
    assert loaded.config.partition_settings["fifo"].capacity_timesteps == 500
    assert loaded.config.store_cache.ram_gib == 2
    assert _load(tmp_path, f"{HEAD}store: s.zarr\n{TRAIN}", ("store=other.zarr",)).config.store == "other.zarr"
