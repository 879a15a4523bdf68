"""Generated JSON Schemas (installed as amago_pipe.schemas); read them with importlib.resources."""
