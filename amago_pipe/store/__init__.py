"""amago_pipe.store."""
