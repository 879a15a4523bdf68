"""amago_pipe.config."""
