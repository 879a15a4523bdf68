"""amago_pipe.train."""
