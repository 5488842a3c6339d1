"""Tasks (the ``task`` config group, picked by the data config): what is predicted and measured."""

from attnexp.tasks.answer_tokens import AnswerTokens
from attnexp.tasks.base import Task
from attnexp.tasks.image_classification import ImageClassification
from attnexp.tasks.next_token import NextToken
from attnexp.tasks.seq2seq import Seq2SeqTask

__all__ = ["AnswerTokens", "ImageClassification", "NextToken", "Seq2SeqTask", "Task"]
