"""Figures of a trained network (attention maps, gates, predictions, alignments), drawn by its task."""
