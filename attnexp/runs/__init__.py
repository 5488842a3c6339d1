"""Run folders and the ``metrics.json`` each holds: where runs write, how they are found and named again."""
