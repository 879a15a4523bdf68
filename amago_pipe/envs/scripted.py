"""Builtin scripted controllers (CartPole-v1 PD rule, Pendulum-v1 energy pumping + PD) for making datasets.

Each controller maps one env's flat observation dict to an env-space action. numpy only, no torch.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.config.policies import CartpolePdConfig, PendulumEnergyConfig
from amago_pipe.envs.policies import PolicyContext, ScriptedPolicy, check_env_shape
from amago_pipe.spec import DEFAULT_OBS_KEY

CARTPOLE_GAINS = np.array([0.1, 0.5, 3.0, 1.0])
"""Weights on [x, x_dot, theta, theta_dot]: push right when their dot product with the state is positive."""
PENDULUM_TOP_ENERGY = 15.0
"""Energy 0.5 w^2 + 1.5 g cos(theta) of Pendulum-v1 (g=10, m=l=1) at rest upright."""


def cartpole_pd(obs: dict[str, np.ndarray], rng: np.random.Generator) -> int:
    """CartPole-v1: a PD rule on pole angle/angular velocity plus weak cart centring; returns 500 noise-free."""
    state = np.asarray(obs[DEFAULT_OBS_KEY], dtype=np.float64)  # (4,)
    return int(np.dot(CARTPOLE_GAINS, state) > 0.0)


def pendulum_energy(
    obs: dict[str, np.ndarray], rng: np.random.Generator, *, kp: float = 10.0, kd: float = 2.0
) -> np.ndarray:
    """Pendulum-v1: pump energy towards the upright level, then hold the top with PD (mean about -140)."""
    cos_th, sin_th, omega = (float(v) for v in np.asarray(obs[DEFAULT_OBS_KEY]).ravel()[:3])
    if cos_th > 0.85:  # near the top: PD on the angle (0 = upright)
        torque = -(kp * np.arctan2(sin_th, cos_th) + kd * omega)
    else:  # dE/dt = 3 * torque * omega, so push along omega while below the upright energy
        energy = 0.5 * omega * omega + PENDULUM_TOP_ENERGY * cos_th
        torque = (PENDULUM_TOP_ENERGY - energy) * (1.0 if omega >= 0.0 else -1.0)
    return np.array([np.clip(torque, -2.0, 2.0)], dtype=np.float32)


def cartpole_pd_policy(config: CartpolePdConfig, ctx: PolicyContext) -> ScriptedPolicy:
    """Policy factory for `policy: {type: cartpole-pd}`."""
    check_env_shape(ctx, name="cartpole-pd", obs_shape=(4,), action="discrete(2)")
    return ScriptedPolicy(cartpole_pd, ctx, name="cartpole-pd")


def pendulum_energy_policy(config: PendulumEnergyConfig, ctx: PolicyContext) -> ScriptedPolicy:
    """Policy factory for `policy: {type: pendulum-energy}`."""
    check_env_shape(ctx, name="pendulum-energy", obs_shape=(3,), action="continuous(1,)")
    return ScriptedPolicy(pendulum_energy, ctx, name="pendulum-energy")
