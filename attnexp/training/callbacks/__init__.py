"""The Lightning callbacks of a run: its metrics file, its TensorBoard HParams and config, the best checkpoint,
a deferred Ctrl-C, attention telemetry and the task's figures."""
