"""Errors that mean "bad input": the CLI prints their one-line message and exits 2."""


class InputError(ValueError):
    """Input the tool cannot use (a path, a version, a recipe name); the message is one line."""
