"""Euclid's fused path: one autograd function in torch operations, the same on every device."""
