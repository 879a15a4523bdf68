"""amago_pipe.agents."""
