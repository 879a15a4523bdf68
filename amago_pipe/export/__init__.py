"""Exports of trained policies: self-contained, verified folders (`Policy.load`), TorchScript and ONNX step
programs with the memory state as explicit inputs and outputs, and `amago-pipe play`.
"""
