"""Text observations as word ids: the tokenizer, the spec mark and its JSON, and the env-boundary wrapper on real
MiniGrid/BabyAI envs (single, vector, task set)."""

from __future__ import annotations

import copy
import logging

import gymnasium as gym
import numpy as np
import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig, TextConfig
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.envs.text import TextObservation, TokenIds
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec, flatten_space, text_array_spec
from amago_pipe.tokens import MINIGRID_WORDS, PAD_ID, UNKNOWN_ID, TextSpec, words

pytest.importorskip("minigrid")

SPEC = TextSpec(("go", "to", "the", "red", "ball"), max_tokens=4)
BABYAI = "minigrid:BabyAI-GoToLocalS6N2-v0"


def test_words_lowercase_and_split_on_punctuation() -> None:
    assert words("Go to the red ball, then  pick-up\tA box.") == [
        "go", "to", "the", "red", "ball", "then", "pick", "up", "a", "box",
    ]  # fmt: skip


def test_encode_pads_marks_unknown_words_and_cuts_long_texts() -> None:
    enc = SPEC.encode("go to the ball")
    assert enc.ids.tolist() == [2, 3, 4, 6] and enc.ids.dtype == np.int32 and enc.unknown == ()
    short = SPEC.encode("go purple")
    assert short.ids.tolist() == [2, UNKNOWN_ID, PAD_ID, PAD_ID] and short.unknown == ("purple",)
    cut = SPEC.encode("go to the red ball")
    assert cut.ids.tolist() == [2, 3, 4, 5] and cut.length == 5
    assert SPEC.decode(short.ids) == "go <unk>" and SPEC.vocab_size == 7


def test_minigrid_vocabulary_covers_babyai_missions() -> None:
    spec = TextSpec(MINIGRID_WORDS, 32)
    for env_id in ("BabyAI-GoToLocalS6N2-v0", "BabyAI-PickupLoc-v0", "BabyAI-PutNextLocalS5N3-v0", "BabyAI-GoToSeq-v0"):
        env = gym.make(f"minigrid:{env_id}")
        for seed in range(5):
            mission = env.reset(seed=seed)[0]["mission"]
            assert spec.encode(mission).unknown == (), mission
        env.close()


def test_text_spec_is_stored_with_the_data_spec_and_old_specs_still_read() -> None:
    spec = DataSpec(
        {"mission": text_array_spec(SPEC), "x": ArraySpec((2,), "float32")}, ActionSpec("discrete", (), n=3)
    )
    doc = spec.to_json()
    assert doc["observations"]["mission"]["text"] == {
        "tokenizer": "words",
        "max_tokens": 4,
        "vocabulary": list(SPEC.vocabulary),
    }
    assert "text" not in doc["observations"]["x"]  # old keys keep their old JSON (and store fingerprints)
    back = DataSpec.from_json(doc)
    assert back == spec and back.observations["mission"].kind == "text" and back.observations["x"].kind == "array"
    old = {
        "observations": {"x": {"shape": [2], "dtype": "float32", "low": None, "high": None}},
        "action": doc["action"],
    }
    assert DataSpec.from_json(old).observations["x"].text is None


def test_spec_compatibility_names_a_different_vocabulary() -> None:
    act = ActionSpec("discrete", (), n=3)
    mine = DataSpec({"mission": text_array_spec(SPEC)}, act)
    other = TextSpec(("go", "to", "the", "blue", "ball"), max_tokens=4)
    with pytest.raises(DataError, match=r"text vocabularies differ .*data adds \['blue'\]"):
        mine.check_compatible(DataSpec({"mission": text_array_spec(other)}, act))
    numbers = DataSpec({"mission": ArraySpec((4,), "int32", 0.0, 6.0)}, act)
    with pytest.raises(DataError, match=r"token ids of a text in the store, numbers in the other"):
        mine.check_compatible(numbers)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"vocabulary": "minigird"}, r"unknown vocabulary 'minigird' \(builtin: minigrid, babyai\)"),
        ({"vocabulary": ["red", "Red ball"]}, r"not single lowercase words"),
        ({"vocabulary": ["red", "red"]}, r"words listed twice: \['red'\]"),
        ({"vocabulary": "minigrid", "max_tokens": 0}, r"max_tokens: must be at least 1"),
    ],
)
def test_text_config_refuses_bad_vocabularies(data: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_strict(TextConfig, data)


def test_babyai_missions_become_word_ids_in_the_stored_spec() -> None:
    cfg = build_strict(EnvConfig, {"id": BABYAI, "n_envs": 2, "text": {"vocabulary": "minigrid", "max_tokens": 8}})
    with make_batched_env(cfg) as env:
        mission = env.spec.observations["mission"]
        assert mission.shape == (8,) and mission.dtype == "int32" and mission.text is not None
        assert mission.text.vocabulary == MINIGRID_WORDS and mission.high == len(MINIGRID_WORDS) + 1
        first = env.reset(seed=0)
        ids = first.obs["mission"]
        assert ids.shape == (2, 8) and ids.dtype == np.int32
        raw = [e.unwrapped.mission for e in env.vector_env.unwrapped.envs]  # type: ignore[attr-defined]
        assert [mission.text.decode(row) for row in ids] == raw
        step = env.step(np.zeros(2, np.int64))
        assert step.obs["mission"].shape == (2, 8)


def test_async_envs_and_task_sets_carry_the_text_mark() -> None:
    tasks = [{"id": BABYAI, "name": "goto"}, {"id": "minigrid:BabyAI-PickupLoc-v0", "name": "pickup"}]
    cfg = build_strict(
        EnvConfig, {"tasks": tasks, "n_envs": 2, "mode": "async", "text": {"vocabulary": "babyai", "max_tokens": 12}}
    )
    with make_batched_env(cfg) as env:
        assert env.spec.observations["mission"].text == TextSpec(MINIGRID_WORDS, 12)
        ids = env.reset(seed=1).obs["mission"]
        texts = [env.spec.observations["mission"].text.decode(row) for row in ids]  # type: ignore[union-attr]
        assert texts[0].startswith("go to") and texts[1].startswith("pick up"), texts


def test_unknown_words_and_cut_missions_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    factory = EnvFactory(id=BABYAI, text=TextSpec(("go", "to", "the"), 3), where="stages.collect.env")
    env = factory()
    assert isinstance(env, TextObservation)
    with caplog.at_level(logging.WARNING, logger="amago_pipe"):
        ids = env.reset(seed=0)[0]["mission"]
        env.close()
    assert ids.tolist() == [2, 3, 4]  # "go to the <color> <object>" cut to 3 words
    tally = env.tallies["mission"]
    assert tally.truncated == 1 and sum(tally.unknown.values()) == 2
    text = caplog.text
    assert "is not in the vocabulary (read as the unknown id 1)" in text and "cut to max_tokens 3" in text
    assert "text 'mission': 1 texts, 2 unknown words" in text


def test_token_space_copies_by_reduction_and_flattens_as_text() -> None:
    space = copy.deepcopy(gym.spaces.Dict({"mission": TokenIds(SPEC)}))  # __reduce_ex__, as pickling to a worker
    assert isinstance(space["mission"], TokenIds) and space["mission"].text_spec == SPEC
    assert flatten_space(space) == {"mission": text_array_spec(SPEC)}


def test_a_text_env_without_text_config_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"'mission' \(text\) unless read as word ids: set `text: \{vocabulary") as e:
        make_batched_env(build_strict(EnvConfig, {"id": BABYAI, "n_envs": 1}), where="stages.evaluate.env")
    assert e.value.path == "stages.evaluate.env.text"


def test_text_config_on_an_env_without_text_is_refused() -> None:
    cfg = build_strict(EnvConfig, {"id": "CartPole-v1", "n_envs": 1, "text": {"vocabulary": "minigrid"}})
    with pytest.raises(ConfigError, match=r"env.text: the env has no text observation"):
        make_batched_env(cfg)
    keyed = {"id": BABYAI, "n_envs": 1, "text": {"vocabulary": "minigrid", "keys": ["image"]}}
    with pytest.raises(ConfigError, match=r"text.keys: \['image'\] are not text observations .*\['mission'\]"):
        make_batched_env(build_strict(EnvConfig, keyed))


def test_dropping_the_mission_with_obs_keys_still_works() -> None:
    cfg = build_strict(EnvConfig, {"id": BABYAI, "n_envs": 1, "obs_keys": ["image", "direction"]})
    with make_batched_env(cfg) as env:
        assert sorted(env.spec.observations) == ["direction", "image"]


def babyai_vector(num_envs: int) -> gym.vector.VectorEnv:
    """A factory for `mode: already_vectorized`: N BabyAI envs as one gymnasium VectorEnv (missions as a tuple)."""
    return gym.vector.SyncVectorEnv([lambda: gym.make(BABYAI) for _ in range(num_envs)])


def test_already_vectorized_envs_read_their_batch_of_missions() -> None:
    text = {"vocabulary": "minigrid", "max_tokens": 6}
    cfg = build_strict(
        EnvConfig, {"factory": f"{__name__}:babyai_vector", "mode": "already_vectorized", "n_envs": 3, "text": text}
    )
    with make_batched_env(cfg) as env:
        assert env.spec.observations["mission"].text == TextSpec(MINIGRID_WORDS, 6)
        ids = env.reset(seed=0).obs["mission"]
        assert ids.shape == (3, 6) and ids.dtype == np.int32
        assert all(TextSpec(MINIGRID_WORDS, 6).decode(row).startswith("go to") for row in ids)
