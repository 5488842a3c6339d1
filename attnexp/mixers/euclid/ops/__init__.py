"""Euclid's fused paths: ``fused`` (torch operations, any device) and ``flex`` (FlexAttention, GPUs)."""
