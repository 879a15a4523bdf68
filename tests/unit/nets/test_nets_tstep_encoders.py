"""Timestep encoders: a contract over every TSTEP_ENCODERS entry, multi-modal routing, errors, augmentation."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from nets_testing import random_obs

from amago_pipe.config.build import Problems, build, resolve_component_class
from amago_pipe.config.nets import CnnTstepConfig, FFTstepConfig, ObsKeyConfig, TstepEncoderConfig
from amago_pipe.config.registries import TSTEP_ENCODERS
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.nets import TstepEncoder, build_tstep_encoder
from amago_pipe.nets.cnn import random_shift
from amago_pipe.nets.layers import RunningNorm
from amago_pipe.nets.obs_features import image_batch, vector_features
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec

SMALL: dict[str, dict[str, object]] = {
    "ff": {"d_hidden": 32, "d_output": 16},
    "cnn": {"img_features": 16, "vector_features": 8, "d_output": 16, "cnn": "impala", "impala_channels": (4, 8)},
}


def make(name: str, spec: DataSpec, **extra: object) -> TstepEncoder:
    cls = resolve_component_class(TstepEncoderConfig, name, "test")
    return build_tstep_encoder(cls(type=name, **{**SMALL.get(name, {}), **extra}), spec)


def rl2_for(spec: DataSpec, batch: int, length: int) -> torch.Tensor:
    return torch.randn(batch, length, spec.rl2_dim)


@pytest.mark.parametrize("name", TSTEP_ENCODERS.names())
class TestContract:
    def test_shape_and_per_step_independence(self, name: str, multimodal_spec: DataSpec) -> None:
        enc = make(name, multimodal_spec).eval()
        obs, rl2 = random_obs(multimodal_spec, 2, 5), rl2_for(multimodal_spec, 2, 5)
        out = enc(obs, rl2)
        assert out.shape == (2, 5, enc.out_dim) and torch.isfinite(out).all()
        obs2 = {k: v.clone() for k, v in obs.items()}
        obs2["joints"][:, 3] += 1.0
        out2 = enc(obs2, rl2)
        changed = (out2 - out).abs().amax(dim=(0, 2)) > 0  # (L,)
        assert changed.tolist() == [False, False, False, True, False]

    def test_embed_gives_the_embedding_and_per_step_observation_features(
        self, name: str, multimodal_spec: DataSpec
    ) -> None:
        enc = make(name, multimodal_spec).eval()
        obs, rl2 = random_obs(multimodal_spec, 2, 5), rl2_for(multimodal_spec, 2, 5)
        out, feats = enc.embed(obs, rl2)
        torch.testing.assert_close(out, enc(obs, rl2))
        assert feats is not None and feats.shape == (2, 5, enc.feature_dim)
        obs["joints"][:, 3] += 1.0  # a step's features come from that step's observation alone
        changed = (enc.embed(obs, rl2)[1] - feats).abs().amax(dim=(0, 2)) > 0  # (L,)
        assert changed.tolist() == [False, False, False, True, False]

    def test_gradients_reach_every_parameter(self, name: str, multimodal_spec: DataSpec) -> None:
        enc = make(name, multimodal_spec).train()
        out = enc(random_obs(multimodal_spec, 2, 3), rl2_for(multimodal_spec, 2, 3))
        (out * torch.randn_like(out)).sum().backward()
        missing = [n for n, p in enc.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert not missing

    def test_hide_rl2_ignores_previous_action_and_reward(self, name: str, multimodal_spec: DataSpec) -> None:
        enc = make(name, multimodal_spec, hide_rl2=True).eval()
        obs = random_obs(multimodal_spec, 1, 2)
        a, b = enc(obs, rl2_for(multimodal_spec, 1, 2)), enc(obs, rl2_for(multimodal_spec, 1, 2))
        torch.testing.assert_close(a, b)

    def test_hide_rl2_action_keeps_the_previous_reward(self, name: str, multimodal_spec: DataSpec) -> None:
        enc = make(name, multimodal_spec, hide_rl2="action").eval()
        obs, rl2 = random_obs(multimodal_spec, 1, 2), rl2_for(multimodal_spec, 1, 2)
        other_action = rl2.clone()
        other_action[..., 1:] = torch.randn_like(rl2[..., 1:])
        torch.testing.assert_close(enc(obs, rl2), enc(obs, other_action))
        other_reward = rl2.clone()
        other_reward[..., 0] += 1.0
        assert not torch.allclose(enc(obs, rl2), enc(obs, other_reward))

    def test_wrong_observation_shape_is_a_data_error(self, name: str, multimodal_spec: DataSpec) -> None:
        enc = make(name, multimodal_spec)
        obs = random_obs(multimodal_spec, 2, 3)
        obs["joints"] = torch.randn(2, 3, 6)
        with pytest.raises(DataError, match=r"observation 'joints' has shape \(2, 3, 6\), expected \(2, 3, 5\)"):
            enc(obs, rl2_for(multimodal_spec, 2, 3))
        with pytest.raises(DataError, match=r"rl2 must have shape \(B, L, 3\)"):
            enc(random_obs(multimodal_spec, 2, 3), torch.randn(2, 3, 4))


def test_ff_one_hot_encodes_small_integer_keys(vector_spec: DataSpec) -> None:
    enc = make("ff", vector_spec, normalize_inputs=False)
    widths = {p.key: (p.width, p.one_hot) for p in enc.plans}  # type: ignore[attr-defined]
    assert widths == {"mode": (4, 4), "observation": (4, 0)}
    assert enc(random_obs(vector_spec, 2, 3), rl2_for(vector_spec, 2, 3)).shape == (2, 3, 16)


def test_bounded_integer_vectors_are_one_hot_unless_wide_binary_or_bytes() -> None:
    """MultiDiscrete-like vectors become categories; 0/1 flags, uint8 bytes, unbounded or too wide ones stay
    numbers, and `one_hot: 0` keeps any key as numbers."""
    spec = DataSpec(
        {
            "cards": ArraySpec((2,), "int64", 0.0, 12.0),  # MultiDiscrete([13, 13])
            "flags": ArraySpec((3,), "int8", 0.0, 1.0),  # MultiBinary(3)
            "ram": ArraySpec((4,), "uint8", 0.0, 255.0),
            "count": ArraySpec((3,), "int16"),  # no bounds
            "wide": ArraySpec((5,), "int64", 0.0, 255.0),  # 1,280 features
            "mode": ArraySpec((), "int64", 2.0, 5.0),
        },
        ActionSpec("discrete", (), n=3),
    )
    enc = make("ff", spec, normalize_inputs=False)
    plans = {p.key: (p.width, p.one_hot, p.low) for p in enc.plans}  # type: ignore[attr-defined]
    assert plans == {
        "cards": (26, 13, 0),
        "count": (3, 0, 0),
        "flags": (3, 0, 0),
        "mode": (4, 4, 2),
        "ram": (4, 0, 0),
        "wide": (5, 0, 0),
    }
    cards = torch.tensor([[[3, 12]]])
    feats = vector_features(cards, enc.plans[0])  # type: ignore[attr-defined]
    assert feats.shape == (1, 1, 26) and feats[0, 0].nonzero().flatten().tolist() == [3, 13 + 12]
    numbers = make("ff", spec, keys={"cards": ObsKeyConfig(one_hot=0), "mode": ObsKeyConfig(one_hot=0)})
    widths = {p.key: (p.width, p.one_hot) for p in numbers.plans}  # type: ignore[attr-defined]
    assert widths["cards"] == (2, 0) and widths["mode"] == (1, 0)
    assert numbers(random_obs(spec, 2, 3), rl2_for(spec, 2, 3)).shape == (2, 3, 16)


GRID = DataSpec({"grid": ArraySpec((5, 6, 3), "uint8", 0, 255)}, ActionSpec("discrete", (), n=3))
"""A MiniGrid-like observation: a grid of (object, colour, state) ids declared as uint8 pixels."""


def test_one_hot_key_turns_ids_into_categories() -> None:
    enc = make("ff", GRID, keys={"grid": ObsKeyConfig(one_hot=11)}, normalize_inputs=False).eval()
    (plan,) = enc.plans  # type: ignore[attr-defined]
    assert (plan.width, plan.one_hot, plan.scale) == (5 * 6 * 3 * 11, 11, 1.0)
    grid = torch.randint(0, 11, (2, 4, 5, 6, 3), dtype=torch.uint8)
    feats = vector_features(grid, plan)  # (B, L, 990): one 1 per element, at its id
    assert feats.shape == (2, 4, 990) and torch.equal(feats.sum(-1), torch.full((2, 4), 90.0))
    assert torch.equal(feats.view(2, 4, 5, 6, 3, 11).argmax(-1), grid.long())
    rl2 = rl2_for(GRID, 2, 4)
    assert enc({"grid": grid}, rl2).shape == (2, 4, 16)
    too_big = grid.clone()
    too_big[1, 2, 0, 0, 0] = 12
    with pytest.raises(
        DataError,
        match=r"'grid' has ids from 0 to 12; .* ids in \[0, 11\): set tstep_encoder.keys.grid.one_hot above",
    ):
        enc({"grid": too_big}, rl2)


def test_one_hot_key_traces_and_exports() -> None:
    """The id check runs in eager mode only: traced and exported programs (policy exports) clamp instead."""
    enc = make("ff", GRID, keys={"grid": ObsKeyConfig(one_hot=11)}).eval()
    grid, rl2 = torch.randint(0, 11, (1, 3, 5, 6, 3), dtype=torch.uint8), rl2_for(GRID, 1, 3)
    expected = enc({"grid": grid}, rl2)
    traced = torch.jit.trace(enc, ({"grid": grid}, rl2), strict=False)
    exported = torch.export.export(enc, ({"grid": grid}, rl2), strict=False).module()
    torch.testing.assert_close(traced({"grid": grid}, rl2), expected)
    torch.testing.assert_close(exported({"grid": grid}, rl2), expected)


def test_one_hot_image_has_channels_times_classes() -> None:
    enc = make("cnn", GRID, keys={"grid": ObsKeyConfig(use="image", one_hot=4)}, impala_channels=(4,)).eval()
    (plan,) = enc.image_plans  # type: ignore[attr-defined]
    assert plan.image_chw == (12, 5, 6) and plan.scale == 1.0
    grid = torch.randint(0, 4, (1, 2, 5, 6, 3), dtype=torch.uint8)
    imgs = image_batch(grid, plan)  # (B*L, C*4, H, W): channel c*4 + k is "element c has id k"
    assert imgs.shape == (2, 12, 5, 6)
    assert torch.equal(imgs.view(2, 3, 4, 5, 6).argmax(2), grid.reshape(2, 5, 6, 3).permute(0, 3, 1, 2).long())
    assert enc({"grid": grid}, rl2_for(GRID, 1, 2)).shape == (1, 2, 16)
    first = DataSpec({"grid": ArraySpec((3, 5, 6), "uint8")}, GRID.action)
    flat = DataSpec({"grid": ArraySpec((5, 6), "int64")}, GRID.action)
    for spec, chw in ((first, (12, 5, 6)), (flat, (4, 5, 6))):
        keys = {"grid": ObsKeyConfig(use="image", one_hot=4)}
        plan = make("cnn", spec, keys=keys, impala_channels=(4,)).image_plans[0]  # type: ignore[attr-defined]
        ids = torch.randint(0, 4, (1, 2, *spec.observations["grid"].shape))
        assert plan.image_chw == chw and image_batch(ids, plan).shape == (2, *chw)


def test_one_hot_configuration_errors(vector_spec: DataSpec) -> None:
    floats = DataSpec({"x": ArraySpec((3,), "float32")}, vector_spec.action)
    with pytest.raises(
        ConfigError, match=r"keys.x.one_hot: 'x' holds float32 values; one_hot needs integer ids \(drop it"
    ):
        make("ff", floats, keys={"x": ObsKeyConfig(one_hot=4)})
    problems = Problems()
    build(ObsKeyConfig, {"one_hot": 1}, problems)
    build(ObsKeyConfig, {"one_hot": -3}, problems)
    build(ObsKeyConfig, {"one_hot": 5, "use": "ignore"}, problems)
    assert [message for _, message in problems.items] == [
        "needs at least 2 classes (or 0: read as numbers), got 1",
        "needs at least 2 classes (or 0: read as numbers), got -3",
        "an ignored key is not encoded; drop `one_hot` or `use: ignore`",
    ]


def test_ff_keys_can_be_ignored(vector_spec: DataSpec) -> None:
    enc = make("ff", vector_spec, keys={"mode": ObsKeyConfig(use="ignore")})
    obs = random_obs(vector_spec, 1, 2)
    del obs["mode"]
    assert enc.eval()(obs, rl2_for(vector_spec, 1, 2)).shape == (1, 2, 16)


def test_ff_normalizes_inputs_with_running_statistics(vector_spec: DataSpec) -> None:
    norm = RunningNorm(3).train()
    data = torch.randn(64, 10, 3) * torch.tensor([1.0, 3.0, 0.5]) + torch.tensor([5.0, -2.0, 0.0])
    for chunk in data.split(16):
        norm(chunk)
    out = norm.eval()(data)
    torch.testing.assert_close(out.mean(dim=(0, 1)), torch.zeros(3), atol=1e-4, rtol=0)
    torch.testing.assert_close(out.std(dim=(0, 1)), torch.ones(3), atol=1e-2, rtol=0)
    assert torch.equal(RunningNorm(3).eval()(data), data)  # identity before any update


def test_running_norm_standardises_rare_uint8_flags() -> None:
    """0/1 uint8 channels scaled by 1/255 (variance ~1e-6) come out with unit variance."""
    norm = RunningNorm(2).train()
    flags = (torch.rand(4096, 2) < torch.tensor([0.05, 0.5])).float() / 255.0  # (N, 2)
    norm(flags)
    out = norm.eval()(flags)
    torch.testing.assert_close(out.std(dim=0), torch.ones(2), atol=2e-2, rtol=0)


def _first_conv_input(enc: TstepEncoder, grid: torch.Tensor) -> torch.Tensor:
    """What the first convolution of a cnn encoder saw for `grid` (B, L, H, W, C) in one training forward."""
    seen: list[torch.Tensor] = []
    conv = next(m for m in enc.modules() if isinstance(m, torch.nn.Conv2d))
    handle = conv.register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach()))
    enc.train()({"grid": grid}, rl2_for(GRID, *grid.shape[:2]))
    handle.remove()
    return seen[0]  # (B*L, C, H, W)


def test_cnn_standardises_each_image_channel() -> None:
    """Small uint8 ids (MiniGrid's 0..10, /255 for pixels) reach the CNN at unit scale per channel, not ~0.02."""
    grid = torch.randint(0, 11, (8, 4, 5, 6, 3), dtype=torch.uint8) * torch.tensor([1, 0, 1], dtype=torch.uint8)
    seen = _first_conv_input(make("cnn", GRID, impala_channels=(4,)), grid)
    std = seen.transpose(0, 1).flatten(1).std(dim=1)  # (C,)
    torch.testing.assert_close(std, torch.tensor([1.0, 0.0, 1.0]), atol=0.02, rtol=0)  # a constant channel stays 0
    torch.testing.assert_close(seen.transpose(0, 1).flatten(1).mean(dim=1), torch.zeros(3), atol=1e-4, rtol=0)
    raw = _first_conv_input(make("cnn", GRID, impala_channels=(4,), normalize_images=False), grid)
    assert raw.amax() <= 10 / 255  # the old input: ids scaled as pixels


def test_cnn_routes_images_and_vectors(multimodal_spec: DataSpec) -> None:
    enc = make("cnn", multimodal_spec, cnn="impala", keys={"camera": ObsKeyConfig(cnn="nature")})
    kinds = {p.key: (p.kind, p.cnn, p.channels_first) for p in enc.image_plans}  # type: ignore[attr-defined]
    assert kinds == {"camera": ("image", "nature", True), "wrist/pixels": ("image", "impala", False)}
    assert [p.key for p in enc.vector_plans] == ["joints", "mode"]  # type: ignore[attr-defined]


def test_cnn_channels_first_and_last_agree() -> None:
    action = ActionSpec("discrete", (), n=2)
    first = DataSpec({"img": ArraySpec((3, 9, 10), "uint8")}, action)
    last = DataSpec({"img": ArraySpec((9, 10, 3), "uint8")}, action)
    enc_first = make("cnn", first, cnn="impala").eval()
    enc_last = make("cnn", last, cnn="impala").eval()
    enc_last.load_state_dict(enc_first.state_dict())
    img = torch.randint(0, 256, (2, 4, 3, 9, 10), dtype=torch.uint8)
    rl2 = torch.randn(2, 4, 3)
    a = enc_first({"img": img}, rl2)
    b = enc_last({"img": img.permute(0, 1, 3, 4, 2)}, rl2)
    torch.testing.assert_close(a, b)
    a = enc_first.train()({"img": img}, rl2)  # the per-channel statistics agree too
    b = enc_last.train()({"img": img.permute(0, 1, 3, 4, 2)}, rl2)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(enc_first.state_dict(), enc_last.state_dict())


@pytest.mark.parametrize(
    ("shape", "chw"),
    [((7, 7, 20), (20, 7, 7)), ((20, 7, 7), (20, 7, 7)), ((84, 84, 3), (3, 84, 84)), ((4, 84, 84), (4, 84, 84)),
     ((9, 10, 3), (3, 9, 10)), ((3, 9, 10), (3, 9, 10)), ((2, 9, 10), (2, 9, 10))],
)  # fmt: skip
def test_cnn_infers_the_channel_axis(shape: tuple[int, int, int], chw: tuple[int, int, int]) -> None:
    """A square image decides the axis even with more channels than pixels a side (MiniGrid's one-hot wrapper)."""
    spec = DataSpec({"img": ArraySpec(shape, "uint8")}, ActionSpec("discrete", (), n=2))
    assert make("cnn", spec).image_plans[0].image_chw == chw  # type: ignore[attr-defined]


def test_cnn_configuration_errors(vector_spec: DataSpec, multimodal_spec: DataSpec) -> None:
    with pytest.raises(ConfigError, match=r"found no image observation .* use `type: ff`"):
        make("cnn", vector_spec)
    with pytest.raises(ConfigError, match=r"unknown observation key 'joint' .* did you mean 'joints'\?"):
        make("cnn", multimodal_spec, keys={"joint": ObsKeyConfig(use="ignore")})
    for shape in ((3, 8, 3), (9, 7, 20)):  # equal ends; more channels than the short side
        unclear = DataSpec({"img": ArraySpec(shape, "uint8")}, vector_spec.action)
        with pytest.raises(ConfigError, match=r"cannot tell the channel axis .* set tstep_encoder.channels_first"):
            make("cnn", unclear)
    small = DataSpec({"img": ArraySpec((12, 12, 3), "uint8")}, vector_spec.action)
    with pytest.raises(ConfigError, match=r"nature CNN needs images of at least 36x36, got 12x12; use cnn: impala"):
        make("cnn", small, cnn="nature")
    with pytest.raises(ConfigError, match=r"the 'ff' encoder takes no images; use `type: cnn`"):
        make("ff", multimodal_spec, keys={"camera": ObsKeyConfig(use="image")})


def test_random_shift_moves_whole_images() -> None:
    imgs = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6)
    out = random_shift(imgs, pad=2)
    assert out.shape == imgs.shape
    padded = torch.nn.functional.pad(imgs, (2, 2, 2, 2), mode="replicate")
    for n in range(2):
        crops = [padded[n, :, y : y + 6, x : x + 6] for y in range(5) for x in range(5)]
        assert any(torch.equal(out[n], c) for c in crops)
    assert torch.equal(random_shift(imgs, pad=2, fraction=0.0), imgs)


def test_drqv2_augmentation_only_in_training(multimodal_spec: DataSpec) -> None:
    enc = make("cnn", multimodal_spec, cnn="impala", drqv2_aug=True, aug_fraction=1.0)
    obs, rl2 = random_obs(multimodal_spec, 2, 2), rl2_for(multimodal_spec, 2, 2)
    enc.eval()
    torch.testing.assert_close(enc(obs, rl2), enc(obs, rl2))
    enc.train()
    assert not torch.allclose(enc(obs, rl2), enc(obs, rl2))


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="must be at least 1, got 0"):
        FFTstepConfig(n_layers=0)
    with pytest.raises(ValueError, match=r"must be in \[0, 1\], got 1.5"):
        CnnTstepConfig(aug_fraction=1.5)
    assert dataclasses.replace(CnnTstepConfig(), cnn="impala").type == "cnn"
