"""The command line: the ``attnexp``, ``attnexp-predict`` and ``attnexp-compare`` entrypoints, run folders,
their records (``metrics.json``), sweeps and checkpoint checks."""
