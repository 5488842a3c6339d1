"""Errors that reach the user as one clear paragraph instead of a traceback."""


class AttnexpError(Exception):
    """A problem with the user's input or environment, explained in the message."""
