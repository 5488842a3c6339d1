"""Comparisons of finished runs, one way: statistics <- tables <- rendering <- files.

:mod:`~attnexp.comparison.stats` (intervals and tests), :mod:`~attnexp.comparison.naming` (runs grouped by what ran,
one table per task and data set), :mod:`~attnexp.comparison.tables` (rows per configuration, differences from a
baseline of the same table), :mod:`~attnexp.comparison.summary` (the whole comparison, the tuned tables, warnings),
:mod:`~attnexp.comparison.suite` (data x mixers and knob curves), :mod:`~attnexp.comparison.render` (Markdown) and
:mod:`~attnexp.comparison.latex`, :mod:`~attnexp.comparison.files` (summary files and plots)."""
