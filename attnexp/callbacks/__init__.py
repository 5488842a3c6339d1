"""Lightning callbacks that write the run's record and figures."""

from attnexp.callbacks.figures import AttentionFigures
from attnexp.callbacks.run_record import RunRecord
from attnexp.callbacks.token_figures import TokenFigures

__all__ = ["AttentionFigures", "RunRecord", "TokenFigures"]
