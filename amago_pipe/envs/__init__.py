"""Environments: gymnasium wrapper (`wrapper`, `vector`, `factory`), policies and rollouts, Minari output.

Import the submodules directly (`from amago_pipe.envs.rollout import rollout`); this package imports nothing.
Policies implement `amago_pipe.envs.protocol.RolloutPolicy`. No module here imports torch.
"""
