"""Config dataclasses of the networks (hyperparameters only; shapes come from the DataSpec at build time).
Config only: no torch.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar, Literal

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.registries import TRAJ_ENCODERS, TSTEP_ENCODERS

Activation = Literal["leaky_relu", "gelu", "relu", "silu"]
Norm = Literal["layer", "rms", "none"]


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is not None and value < 1:
            raise FieldError(name, f"must be at least 1, got {value}")


def _probability(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not 0.0 <= value < 1.0:
            raise FieldError(name, f"must be in [0, 1), got {value}")


# ----------------------------------------------------------------------------------------------
# timestep encoders
# ----------------------------------------------------------------------------------------------


@config
class ObsKeyConfig:
    """How one observation key is fed to a timestep encoder (overrides the automatic choice)."""

    use: Literal["auto", "image", "vector", "ignore"] = "auto"
    """`auto`: text keys (word ids) are read as text, 3-d arrays are images for the cnn encoder, all else vectors;
    `ignore` drops the key."""
    cnn: Literal["nature", "impala"] | None = None
    """CNN for this image key; null uses the encoder's `cnn`."""
    channels_first: bool | None = None
    """Image layout (C, H, W) or (H, W, C); null uses the encoder's setting (or infers it from the shape)."""
    one_hot: int | None = None
    """Read each element of this integer key as a category in [0, N) and one-hot encode it (N classes per
    element; an image gets C x N channels): for grids of object ids such as MiniGrid's `image` (`one_hot: 11`),
    whose ids are labels, not magnitudes. 0: read as numbers. Null: integer keys with known bounds (Discrete,
    MultiDiscrete, integer Box) are one-hot encoded when their bounds span at most 256 values (a vector's, over all
    its elements: 3 or more, and at most 1,024 features per key; uint8 vectors are read as numbers); everything
    else as numbers."""

    def __post_init__(self) -> None:
        if self.one_hot is not None and (self.one_hot < 0 or self.one_hot == 1):
            raise FieldError("one_hot", f"needs at least 2 classes (or 0: read as numbers), got {self.one_hot}")
        if self.one_hot is not None and self.use == "ignore":
            raise FieldError("one_hot", "an ignored key is not encoded; drop `one_hot` or `use: ignore`")


@config
class TextFeaturesConfig:
    """How a timestep encoder reads text keys (token ids marked as text in the data spec): a learned embedding per
    word, pooled over the words of the text (padding left out), concatenated with the other features."""

    d_embed: int = 32
    """Width of each word's embedding."""
    pool: Literal["mean", "max", "mean_max", "gru"] = "mean_max"
    """`mean` or `max` over the words, `mean_max` both side by side (2 x d_embed features per key; the default), or
    `gru`: a GRU of width d_embed read to the last word (word order matters)."""

    def __post_init__(self) -> None:
        _positive(self, "d_embed")

    @property
    def width(self) -> int:
        """Features per text key."""
        return 2 * self.d_embed if self.pool == "mean_max" else self.d_embed


@config
class TstepEncoderConfig(Component):
    """Maps one timestep (observation dict + previous reward and action) to a vector."""

    registry = TSTEP_ENCODERS

    keys: dict[str, ObsKeyConfig] = field(default_factory=dict)
    """Per observation key overrides (`{key: {use: ignore}}`); keys not listed are handled automatically."""
    text: TextFeaturesConfig = field(default_factory=TextFeaturesConfig)
    """How text keys (word ids, see the env's `text:`) are embedded and pooled."""
    hide_rl2: bool | Literal["action"] = False
    """Zero the previous reward and action inputs (`true`), or only the previous action (`action`: meta-RL keeps
    its reward signal while greedy evaluation cannot feed the model action sequences it never saw); keeps the
    layer sizes."""
    activation: Activation = "leaky_relu"
    """Activation of the hidden layers."""
    out_norm: Norm = "layer"
    """Normalisation of the output vector."""


@config
class FFTstepConfig(TstepEncoderConfig):
    """An MLP over every observation key (flattened, images included) and the previous reward and action."""

    impl: ClassVar[str] = "amago_pipe.nets.tstep_encoders:FFTstepEncoder"
    type: str = "ff"
    """Registered name or `package.module:Class` of a plugin."""
    d_hidden: int = 256
    """Width of the hidden layers."""
    n_layers: int = 2
    """Number of hidden layers."""
    d_output: int = 128
    """Width of the timestep vector handed to the trajectory encoder."""
    normalize_inputs: bool = True
    """Normalise observation features with running mean/std statistics updated in training mode."""

    def __post_init__(self) -> None:
        _positive(self, "d_hidden", "n_layers", "d_output")


@config
class CnnTstepConfig(TstepEncoderConfig):
    """CNNs over image keys plus an MLP over vector keys and rl2, merged into one vector (any mix of keys)."""

    impl: ClassVar[str] = "amago_pipe.nets.tstep_encoders:CnnTstepEncoder"
    type: str = "cnn"
    """Registered name or `package.module:Class` of a plugin."""
    cnn: Literal["nature", "impala"] = "nature"
    """Default CNN of image keys: `nature` (the DQN CNN, images >= 36x36) or `impala` (residual, any size)."""
    channels_first: bool | None = None
    """Image layout: true (C, H, W), false (H, W, C), null to infer from the shape (ambiguous shapes raise)."""
    impala_channels: tuple[int, ...] = (16, 32, 32)
    """Output channels of each IMPALA block."""
    img_features: int = 256
    """Width of the linear map after each CNN."""
    vector_features: int = 64
    """Width of the MLP over the vector keys and rl2."""
    d_output: int = 128
    """Width of the timestep vector handed to the trajectory encoder."""
    normalize_vectors: bool = True
    """Normalise vector features with running mean/std statistics updated in training mode."""
    normalize_images: bool = True
    """Standardise each image channel with running mean/std statistics (uint8 ids or flags are ~255x small)."""
    drqv2_aug: bool = False
    """Random-shift augmentation of images in training mode (DrQ-v2)."""
    aug_pad: int = 4
    """Pixels of padding for the random shift."""
    aug_fraction: float = 0.75
    """Fraction of the images in a batch that are shifted."""

    def __post_init__(self) -> None:
        _positive(self, "img_features", "vector_features", "d_output")
        if not self.impala_channels or min(self.impala_channels) < 1:
            raise FieldError(
                "impala_channels", f"must be a non-empty list of positive ints, got {self.impala_channels}"
            )
        if self.aug_pad < 0:
            raise FieldError("aug_pad", f"must be >= 0, got {self.aug_pad}")
        if not 0.0 <= self.aug_fraction <= 1.0:
            raise FieldError("aug_fraction", f"must be in [0, 1], got {self.aug_fraction}")


# ----------------------------------------------------------------------------------------------
# trajectory encoders
# ----------------------------------------------------------------------------------------------


@config
class TrajEncoderConfig(Component):
    """A sequence model over timestep vectors; its state makes stepwise inference equal the full forward."""

    registry = TRAJ_ENCODERS
    recurrent: ClassVar[bool] = False
    """Whether it carries memory through a recurrent state (its sequence model learns faster with a larger
    learning rate: `model_lr_scale: auto`); a plugin sets it on its config class."""


@config
class FFTrajConfig(TrajEncoderConfig):
    """No memory: a residual MLP applied to each timestep alone (the memory ablation)."""

    impl: ClassVar[str] = "amago_pipe.nets.traj_ff_gru:FFTrajEncoder"
    type: str = "ff"
    """Registered name or `package.module:Class` of a plugin."""
    d_model: int = 128
    """Width of the residual stream and of the output."""
    n_layers: int = 2
    """Number of residual MLP blocks."""
    activation: Activation = "leaky_relu"
    """Activation inside the blocks."""
    norm: Norm = "layer"
    """Normalisation (pre-norm blocks and output)."""
    dropout: float = 0.0
    """Dropout inside the blocks."""

    def __post_init__(self) -> None:
        _positive(self, "d_model", "n_layers")
        _probability(self, "dropout")


@config
class GruConfig(TrajEncoderConfig):
    """A multi-layer GRU (cuDNN on GPU); its state is the hidden vector of each layer."""

    impl: ClassVar[str] = "amago_pipe.nets.traj_ff_gru:GruTrajEncoder"
    recurrent: ClassVar[bool] = True
    type: str = "gru"
    """Registered name or `package.module:Class` of a plugin."""
    d_model: int = 256
    """Hidden size of each GRU layer and width of the output."""
    n_layers: int = 2
    """Number of stacked GRU layers."""
    norm: Norm = "layer"
    """Normalisation of the output."""
    dropout: float = 0.0
    """Dropout between GRU layers."""
    gate_init: Literal["mixed", "chrono", "uniform"] = "mixed"
    """Update-gate biases at the start. `chrono`: every unit's drawn as log U(1, max_seq_len - 1), so units start
    out keeping their state for 2 to max_seq_len steps (chrono initialisation: best for long-range recall);
    `uniform`: PyTorch's default, under which a unit keeps about half its state per step (short memories, e.g.
    the last few observations); `mixed`: half the units each way."""

    def __post_init__(self) -> None:
        _positive(self, "d_model", "n_layers")
        _probability(self, "dropout")


@config
class TransformerConfig(TrajEncoderConfig):
    """Pre-norm causal Transformer with NormFormer norms; rollouts use a rolling per-environment KV cache."""

    impl: ClassVar[str] = "amago_pipe.nets.transformer:TransformerTrajEncoder"
    type: str = "transformer"
    """Registered name or `package.module:Class` of a plugin."""
    d_model: int = 128
    """Width of the residual stream and of the output."""
    n_heads: int = 4
    """Attention heads; d_model must be divisible by it (default: heads of 32, as AMAGO's 8 heads at d_model 256)."""
    d_ff: int | None = None
    """Hidden width of the feed-forward blocks; null means 4 * d_model."""
    n_layers: int = 3
    """Number of Transformer blocks."""
    attention: Literal["sdpa", "flash", "vanilla"] = "sdpa"
    """Attention backend: torch's scaled_dot_product_attention, the flash-attn package (GPU, half precision), or a plain reference."""
    window: int | None = None
    """Sliding-window attention: each step attends to at most this many steps (itself included); null or larger means max_seq_len."""
    pos_emb: Literal["fixed", "learned", "rope", "none"] = "fixed"
    """Position embedding of the absolute timestep: sinusoidal, a learned table, rotary, or none."""
    max_time: int = 4096
    """Size of the `learned` position table; later timesteps share its last row."""
    activation: Activation = "leaky_relu"
    """Activation of the feed-forward blocks."""
    norm: Norm = "layer"
    """Normalisation (pre-norm, NormFormer's extra norms and the output)."""
    normformer_norms: bool = True
    """NormFormer's extra norms after attention and inside the feed-forward block."""
    head_scaling: bool = True
    """NormFormer's learned per-head scale of the attention output."""
    sigma_reparam: bool = True
    """Spectrally reparametrised linear layers (sigma-reparam) for training stability."""
    dropout_emb: float = 0.05
    """Dropout on the input embedding."""
    dropout_ff: float = 0.05
    """Dropout in the feed-forward blocks and on the residual branches."""
    dropout_attn: float = 0.0
    """Dropout on the attention probabilities."""
    dropout_qkv: float = 0.0
    """Dropout on the query/key/value projections."""

    def __post_init__(self) -> None:
        _positive(self, "d_model", "n_heads", "d_ff", "n_layers", "window", "max_time")
        _probability(self, "dropout_emb", "dropout_ff", "dropout_attn", "dropout_qkv")
        if self.d_model % self.n_heads:
            raise FieldError("n_heads", f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.pos_emb == "rope" and (self.d_model // self.n_heads) % 2:
            raise FieldError(
                "pos_emb", f"rope needs an even head size; d_model/n_heads = {self.d_model // self.n_heads}"
            )


@config
class MambaConfig(TrajEncoderConfig):
    """Mamba (selective state space) blocks: mamba-ssm kernels on GPU when installed, a PyTorch scan otherwise."""

    impl: ClassVar[str] = "amago_pipe.nets.mamba:MambaTrajEncoder"
    recurrent: ClassVar[bool] = True
    type: str = "mamba"
    """Registered name or `package.module:Class` of a plugin."""
    d_model: int = 128
    """Width of the residual stream and of the output."""
    n_layers: int = 3
    """Number of Mamba blocks."""
    d_state: int = 16
    """SSM state size per channel."""
    d_conv: int = 4
    """Width of the causal depthwise convolution."""
    expand: int = 2
    """Inner width = expand * d_model."""
    norm: Norm = "layer"
    """Normalisation (pre-norm blocks and output)."""
    backend: Literal["auto", "torch", "cuda"] = "auto"
    """`auto`: mamba-ssm kernels for CUDA tensors when installed, else PyTorch; `cuda` requires mamba-ssm."""
    scan_chunk: int = 16
    """Steps per chunk of the PyTorch scan; backward recomputes a chunk's states, so memory keeps L / scan_chunk states."""

    def __post_init__(self) -> None:
        _positive(self, "d_model", "n_layers", "d_state", "expand", "scan_chunk")
        if self.d_conv < 2:
            raise FieldError("d_conv", f"must be at least 2, got {self.d_conv}")


# ----------------------------------------------------------------------------------------------
# heads and the model
# ----------------------------------------------------------------------------------------------


@config
class ActorHeadConfig:
    """The actor: an MLP from the trajectory state to one action distribution per discount factor."""

    d_hidden: int = 256
    """Width of the hidden layers."""
    n_layers: int = 2
    """Number of hidden layers."""
    activation: Activation = "leaky_relu"
    """Activation of the hidden layers."""
    dropout: float = 0.0
    """Dropout after each hidden layer."""
    continuous_dist: Literal["tanh_gaussian", "beta", "gmm"] = "tanh_gaussian"
    """Distribution of continuous actions (in [-1, 1]): tanh-squashed Gaussian, scaled Beta, or tanh-squashed Gaussian mixture."""
    gmm_components: int = 5
    """Mixture components of the `gmm` distribution."""
    log_std_min: float = -5.0
    """Lowest log standard deviation of the tanh-Gaussian (and of each `gmm` component)."""
    log_std_max: float = 2.0
    """Highest log standard deviation of the tanh-Gaussian (and of each `gmm` component)."""

    def __post_init__(self) -> None:
        _positive(self, "d_hidden", "n_layers", "gmm_components")
        _probability(self, "dropout")
        if self.log_std_min >= self.log_std_max:
            raise FieldError("log_std_min", f"must be below log_std_max ({self.log_std_min} >= {self.log_std_max})")


@config
class CriticHeadConfig:
    """An ensemble of critics computed in one fused op, with one output per discount factor."""

    num_critics: int = 4
    """Critics in the ensemble."""
    d_hidden: int = 256
    """Width of the hidden layers."""
    n_layers: int = 2
    """Number of hidden layers."""
    activation: Activation = "leaky_relu"
    """Activation of the hidden layers."""
    output: Literal["scalar", "bins"] = "scalar"
    """`scalar` values (regression) or logits over symlog-spaced bins (two-hot / HL-Gauss classification)."""
    num_bins: int = 128
    """Number of bins when output is `bins`."""
    symlog_low: float = -20.0
    """Lowest bin centre, in symlog space."""
    symlog_high: float = 20.0
    """Highest bin centre, in symlog space."""
    discrete_as_continuous: bool = False
    """Discrete actions only: take the one-hot action as an input and output one value (AMAGO-2) instead of Q of every action."""
    loss: Literal["mse", "huber"] = "mse"
    """How `scalar` outputs regress their PopArt-normalised TD errors: `mse`, or `huber` (linear beyond 1: a
    surprising target moves the critics by a bounded step). `bins` outputs are trained by cross-entropy instead
    (the multitask agent's `labels`) and keep `mse` here."""

    def __post_init__(self) -> None:
        _positive(self, "num_critics", "d_hidden", "n_layers")
        if self.output == "bins" and self.loss != "mse":
            raise FieldError("loss", f"{self.loss} has no effect with output: bins (trained by cross-entropy)")
        if self.num_bins < 2:
            raise FieldError("num_bins", f"must be at least 2, got {self.num_bins}")
        if self.symlog_low >= self.symlog_high:
            raise FieldError("symlog_low", f"must be below symlog_high ({self.symlog_low} >= {self.symlog_high})")


@config
class ModelConfig:
    """The shared sequence model: a timestep encoder followed by a trajectory encoder."""

    tstep_encoder: TstepEncoderConfig = field(default_factory=FFTstepConfig)
    """Per-timestep encoder (`type: ff | cnn | package.module:Class`)."""
    traj_encoder: TrajEncoderConfig = field(default_factory=TransformerConfig)
    """Sequence model (`type: transformer | mamba | gru | ff | package.module:Class`)."""
