"""amago_pipe.envs."""
