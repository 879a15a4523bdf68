"""Converters from public dataset formats into the trajectory store (installed as amago_pipe.converters).

`run.convert(config, store_url)` converts one source (`minari`, `d4rl`, `amago-buffer` or a plugin) into a
store partition and returns a `ConversionReport`; `to_minari.export_to_minari` goes the other way.
Importing this package imports nothing heavy; never imports torch or click.
"""
