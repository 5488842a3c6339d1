"""Figures of a trained network, drawn by its task and written to TensorBoard."""

from attnexp.figures.callback import Figures

__all__ = ["Figures"]
