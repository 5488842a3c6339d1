"""The command line: the ``attnexp``, ``attnexp-compare`` and ``attnexp-predict`` entrypoints, the sweep callback,
and the checks of a composed config."""
