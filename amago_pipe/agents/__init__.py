"""Agents: `Agent` (AMAGO's multi-gamma actor-critic update), `MultiTaskAgent` (AMAGO-2), `AgentPolicy` (acting).

Modules: agent, multitask, losses (td_targets, critic_loss, actor_loss, filters, Polyak), popart, policy.
Nothing is imported here, so `import amago_pipe.agents` stays cheap.
"""
