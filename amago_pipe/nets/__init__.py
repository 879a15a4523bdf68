"""amago_pipe.nets."""
