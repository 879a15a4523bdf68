"""Agents: `Agent` (AMAGO's multi-gamma actor-critic update), `MultiTaskAgent` (AMAGO-2), `AgentPolicy` (acting).

Modules: agent, terms (the loss terms per kind of critic), multitask, history (the history objective), losses
(td_targets, critic_loss, actor_loss, filters, Polyak), popart, averaging, loading, policy.
Nothing is imported here, so `import amago_pipe.agents` stays cheap.
"""
