"""Test helpers shipped with the package: the store contract suite and example specs/episodes.

`amago_pipe.testing.store_contract.StoreContract` (pytest-style checks for any store) and
`amago_pipe.testing.episodes` (example DataSpecs, random and counting episodes). Imports nothing here.
"""
