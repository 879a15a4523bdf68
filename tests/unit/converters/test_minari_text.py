"""Minari converter: `obs_keys` keeps only some keys; `text:` reads string observations (a `Text` space) as word
ids with the configured vocabulary, unknown words and cut texts counted in the report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from converter_helpers import run, stored
from gymnasium import spaces

from amago_pipe.errors import ConfigError, DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.testing import synthetic as syn
from amago_pipe.tokens import MINIGRID_WORDS, TextSpec

OBS = spaces.Dict(
    {
        "image": spaces.Box(0, 10, (3, 3, 3), np.uint8),
        "direction": spaces.Discrete(4),
        "mission": spaces.Text(80, charset="abcdefghijklmnopqrstuvwxyz ,"),
    }
)
MISSIONS = ["go to the red ball", "pick up the purple key", "go to the green banana, then open the door"]


def write(dataset_id: str = "text/babyai-v0") -> None:
    from minari.data_collector import EpisodeBuffer

    rng = np.random.default_rng(0)
    buffers = []
    for i, mission in enumerate(MISSIONS):
        n = 3 + i
        buffers.append(
            EpisodeBuffer(
                observations={
                    "image": rng.integers(0, 11, (n + 1, 3, 3, 3), dtype=np.uint8),
                    "direction": rng.integers(0, 4, n + 1),
                    "mission": [mission] * (n + 1),
                },
                actions=rng.integers(0, 3, n),
                rewards=np.zeros(n),
                terminations=np.array([False] * (n - 1) + [True]),
                truncations=np.zeros(n, bool),
            )
        )
    syn.write_minari(dataset_id, buffers, OBS, spaces.Discrete(3))


def test_missions_become_word_ids_with_the_stored_vocabulary(tmp_path: Path) -> None:
    write()
    text = {"vocabulary": "minigrid", "max_tokens": 6}
    report = run(tmp_path / "s.zarr", source="minari", dataset="text/babyai-v0", text=text)
    spec = TrajectoryStore.open(tmp_path / "s.zarr").spec.observations["mission"]
    assert spec.text == TextSpec(MINIGRID_WORDS, 6) and spec.shape == (6,) and spec.dtype == "int32"
    episodes = stored(tmp_path / "s.zarr")
    first = episodes[0].obs["mission"]
    assert first.shape == (4, 6) and first.dtype == np.int32
    assert spec.text.decode(first[0]) == "go to the red ball"
    assert spec.text.decode(episodes[2].obs["mission"][0]) == "go to the green <unk> then"
    unknown, cut = report.adjustments["text_unknown:mission"], report.adjustments["text_truncated:mission"]
    assert "['banana']" in unknown.message and "add them to `text.vocabulary`" in unknown.message
    assert (unknown.episodes, unknown.timesteps) == (1, 6) and (cut.episodes, cut.timesteps) == (1, 6)
    assert "cut to max_tokens 6" in cut.message
    assert episodes[1].obs["image"].shape == (5, 3, 3, 3)


def test_obs_keys_keep_only_the_named_keys(tmp_path: Path) -> None:
    write()
    run(tmp_path / "s.zarr", source="minari", dataset="text/babyai-v0", obs_keys=["image", "direction"])
    assert sorted(TrajectoryStore.open(tmp_path / "s.zarr").spec.observations) == ["direction", "image"]
    assert sorted(stored(tmp_path / "s.zarr")[0].obs) == ["direction", "image"]
    with pytest.raises(DataError, match=r"obs_keys: \['imag'\] not in the observations .*did you mean 'image'"):
        run(tmp_path / "t.zarr", source="minari", dataset="text/babyai-v0", obs_keys=["imag"])


def test_text_without_config_is_refused_naming_both_fixes(tmp_path: Path) -> None:
    write()
    with pytest.raises(DataError, match=r"'mission' \(text\) unless read as word ids: set `text: .*`obs_keys`"):
        run(tmp_path / "s.zarr", source="minari", dataset="text/babyai-v0")
    with pytest.raises(
        DataError, match=r"text: .* has no text observation \['image'\] \(its text keys: \['mission'\]\)"
    ):
        run(
            tmp_path / "s.zarr",
            source="minari",
            dataset="text/babyai-v0",
            text={"vocabulary": "minigrid", "keys": ["image"]},
        )
    with pytest.raises(ConfigError, match=r"source.text.vocabulary: unknown vocabulary 'minigrd'"):
        run(tmp_path / "s.zarr", source="minari", dataset="text/babyai-v0", text={"vocabulary": "minigrd"})


def test_a_given_word_list_is_the_vocabulary(tmp_path: Path) -> None:
    write()
    words = ["go", "to", "the", "red", "ball", "pick", "up", "purple", "key"]
    report = run(tmp_path / "s.zarr", source="minari", dataset="text/babyai-v0", episodes=2, text={"vocabulary": words})
    spec = TrajectoryStore.open(tmp_path / "s.zarr").spec.observations["mission"].text
    assert spec is not None and spec.vocabulary == tuple(words) and spec.max_tokens == 32
    assert stored(tmp_path / "s.zarr")[1].obs["mission"][0, :6].tolist() == [7, 8, 4, 9, 10, 0]
    assert not any(k.startswith("text_") for k in report.adjustments)
