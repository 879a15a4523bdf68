"""Test helpers shipped with the package: the store contract suite, example specs/episodes, synthetic sources.

`amago_pipe.testing.store_contract.StoreContract` (pytest-style checks for any store),
`amago_pipe.testing.episodes` (example DataSpecs, random and counting episodes) and
`amago_pipe.testing.synthetic` (datasets in each converter source layout). Imports nothing here.
"""
