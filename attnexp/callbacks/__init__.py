"""Lightning callbacks that write the run's record and figures."""

from attnexp.callbacks.figures import AttentionFigures
from attnexp.callbacks.run_record import RunRecord

__all__ = ["AttentionFigures", "RunRecord"]
