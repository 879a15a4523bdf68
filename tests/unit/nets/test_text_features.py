"""Text keys in the timestep encoders: routed apart from integer features, embedded and pooled over the words
(padding left out), traceable for exports; and the Policy reads raw strings with the stored vocabulary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from amago_pipe.config.build import build_strict, resolve_component_class
from amago_pipe.config.nets import ModelConfig, TextFeaturesConfig, TstepEncoderConfig
from amago_pipe.config.train import AgentConfig
from amago_pipe.errors import ConfigError
from amago_pipe.export.policy import Policy
from amago_pipe.export.program import StepProgram
from amago_pipe.nets import TstepEncoder, build_tstep_encoder
from amago_pipe.nets.obs_features import TextFeatures, plan_keys
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec, text_array_spec
from amago_pipe.tokens import TextSpec
from amago_pipe.train.runtime import build_agent

WORDS = TextSpec(("go", "to", "the", "red", "blue", "ball", "key"), max_tokens=6)
SPEC = DataSpec(
    {
        "mission": text_array_spec(WORDS),
        "ids": ArraySpec((6,), "int32", 0.0, 8.0),  # same shape and dtype, but plain integer features
        "image": ArraySpec((5, 5, 3), "uint8", 0.0, 10.0),
    },
    ActionSpec("discrete", (), n=3),
)
SMALL = {
    "ff": {"d_hidden": 32, "d_output": 16},
    "cnn": {"img_features": 8, "vector_features": 8, "d_output": 16, "cnn": "impala", "impala_channels": (4,)},
}


def make(name: str, **extra: object) -> TstepEncoder:
    cls = resolve_component_class(TstepEncoderConfig, name, "test")
    return build_tstep_encoder(build_strict(cls, {"type": name, **SMALL[name], **extra}), SPEC)


def ids(*texts: str) -> torch.Tensor:
    return torch.as_tensor(np.stack([WORDS.encode(t).ids for t in texts]))  # (N, T)


def obs_for(mission: torch.Tensor) -> dict[str, torch.Tensor]:
    n = mission.shape[0]
    return {
        "mission": mission[:, None],  # (N, 1, T)
        "ids": torch.randint(0, 9, (n, 1, 6), dtype=torch.int32),
        "image": torch.randint(0, 11, (n, 1, 5, 5, 3), dtype=torch.uint8),
    }


def test_text_keys_are_planned_apart_from_integer_features() -> None:
    cls = resolve_component_class(TstepEncoderConfig, "ff", "test")
    plans = {p.key: p for p in plan_keys(SPEC, build_strict(cls, {"type": "ff"}), images=False)}
    assert (plans["mission"].kind, plans["mission"].vocab, plans["mission"].width) == ("text", 9, 0)
    assert plans["ids"].kind == "vector" and plans["ids"].one_hot == 9  # the automatic one-hot of small ints


@pytest.mark.parametrize("name", ["ff", "cnn"])
@pytest.mark.parametrize("pool", ["mean", "max", "mean_max", "gru"])
def test_the_mission_changes_the_embedding(name: str, pool: str) -> None:
    torch.manual_seed(0)
    enc = make(name, text={"pool": pool, "d_embed": 8}).eval()
    obs, rl2 = obs_for(ids("go to the red ball", "go to the blue key")), torch.zeros(2, 1, SPEC.rl2_dim)
    same = {**obs, "mission": ids("go to the red ball", "go to the red ball")[:, None]}
    out, other = enc(obs, rl2), enc(same, rl2)
    assert out.shape == (2, 1, 16) and torch.isfinite(out).all()
    torch.testing.assert_close(out[0], other[0])
    assert (out[1] - other[1]).abs().max() > 1e-4


@pytest.mark.parametrize("pool", ["mean", "max", "gru"])
def test_pooled_features_equal_the_unpadded_words(pool: str) -> None:
    cls = resolve_component_class(TstepEncoderConfig, "ff", "test")
    plan = next(p for p in plan_keys(SPEC, build_strict(cls, {"type": "ff"}), images=False) if p.kind == "text")
    feats = TextFeatures([plan], TextFeaturesConfig(d_embed=4, pool=pool)).eval()
    words = ids("go to the red")  # (1, T): 4 words, 2 pads
    out = feats({"mission": words[:, None]})[0, 0]  # (E,)
    emb = feats.embeds["mission"](words[0, :4].long())  # (4, E)
    if pool == "mean":
        expected = emb.mean(0)
    elif pool == "max":
        expected = emb.amax(0)
    else:
        expected = feats.grus["mission"](emb[None])[0][0, -1]
    torch.testing.assert_close(out, expected)
    empty = feats({"mission": torch.zeros(1, 1, 6, dtype=torch.int32)})
    assert torch.equal(empty, torch.zeros_like(empty))
    outside = feats({"mission": torch.tensor([[[2, 99, 0, 0, 0, 0]]])})  # an id past the vocabulary: unknown
    torch.testing.assert_close(outside, feats({"mission": torch.tensor([[[2, 1, 0, 0, 0, 0]]])}))


def test_a_text_key_cannot_be_read_as_numbers() -> None:
    with pytest.raises(ConfigError, match=r"keys.mission: 'mission' holds word ids of a text .*use: ignore"):
        make("ff", keys={"mission": {"use": "vector"}})
    make("ff", keys={"mission": {"use": "ignore"}})  # dropping it is fine


def _agent(pool: str = "gru") -> object:
    model = {
        "tstep_encoder": {"type": "cnn", **SMALL["cnn"], "text": {"pool": pool, "d_embed": 8}},
        "traj_encoder": {"type": "gru", "d_model": 16},
    }
    return build_agent(
        build_strict(AgentConfig, {"type": "agent"}), build_strict(ModelConfig, model), SPEC, max_seq_len=4
    )


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore::DeprecationWarning")
def test_step_programs_take_word_ids_and_trace() -> None:
    program = StepProgram(_agent())  # type: ignore[arg-type]
    example = program.example_inputs(2)
    assert program.input_names()[program.obs_keys.index("mission")] == "obs/mission"
    assert example[program.obs_keys.index("mission")].dtype == torch.int32
    traced = torch.jit.trace(program, example, check_trace=False)
    inputs = list(example)
    inputs[program.obs_keys.index("mission")] = ids("go to the red ball", "go to the blue key")
    torch.testing.assert_close(traced(*inputs)[0], program(*inputs)[0])


def test_the_policy_reads_raw_missions_with_the_stored_vocabulary() -> None:
    agent = _agent("mean_max")
    image = np.random.default_rng(0).integers(0, 11, (2, 5, 5, 3), dtype=np.uint8)
    base = {"ids": np.zeros((2, 6), np.int32), "image": image}
    texts = ["go to the red ball", "Go to the BLUE key!"]
    by_text, by_ids = Policy(agent, {"policy": {"max_seq_len": 4}}), Policy(agent, {"policy": {"max_seq_len": 4}})  # type: ignore[arg-type]
    a = by_text.act({**base, "mission": texts})
    b = by_ids.act({**base, "mission": np.stack([WORDS.encode(t).ids for t in texts])})
    assert np.array_equal(a, b)
    single = Policy(agent, {"policy": {"max_seq_len": 4}})  # type: ignore[arg-type]
    one = single.act({"ids": base["ids"][0], "image": image[0], "mission": "go to the purple box"})
    assert np.ndim(one) == 0
    assert dict(single.text_tallies["mission"].unknown) == {"purple": 1, "box": 1}
