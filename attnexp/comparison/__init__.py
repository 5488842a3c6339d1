"""Comparisons of finished runs, one way: statistics <- tables <- rendering <- files.

:mod:`~attnexp.comparison.stats` (intervals and tests), :mod:`~attnexp.comparison.tables` (rows per configuration,
differences from a baseline, the tuned table, warnings), :mod:`~attnexp.comparison.suite` (data x mixers and knob
curves), :mod:`~attnexp.comparison.render` (Markdown and LaTeX), :mod:`~attnexp.comparison.files` (summary files
and plots)."""
