"""How a message shows what the user gave: whole, or a long value by its start and end."""

from __future__ import annotations

from attnexp.errors import AttnexpError, explain, shortened


def test_a_long_value_is_shown_by_its_start_and_end_and_a_path_whole():
    path = "/home/someone/experiments/outputs/runs/dot_digits_3f2a9c01/seed=0/checkpoints/epoch012-best0.9876.ckpt"
    value = "0123456789" * 500
    told = shortened(f"data.path={value} is not allowed; {path} holds the run.")
    assert f"data.path={value[:50]}...{value[-30:]} is not allowed" in told and path in told
    assert len(told) < 300
    assert explain(AttnexpError(f"model.heads='{value}'")).endswith(f"...{value[-29:]}'")
