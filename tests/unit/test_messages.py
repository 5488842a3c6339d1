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


def test_lightnings_advice_to_start_under_srun_stays_in_train_log():
    """Wherever SLURM is installed, Lightning advises prepending ``srun`` to every run (twice a run): attnexp reaches
    SLURM through its launcher, so the console leaves the advice to train.log; other library warnings still show."""
    import logging

    from attnexp.cli.console import ConsoleFilter

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, message, None, None)

    srun = "slurm.py:204: PossibleUserWarning: The `srun` command is available on your system but is not used. HINT:"
    assert not ConsoleFilter().filter(record(srun))
    assert ConsoleFilter().filter(record("module.py:3: UserWarning: the learning rate is NaN"))
