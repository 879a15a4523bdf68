"""Converters from public dataset formats into the trajectory store (installed as amago_pipe.converters)."""
