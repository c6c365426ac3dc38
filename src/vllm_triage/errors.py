"""What the tool tells a user went wrong, and the exit codes: one base class, one table.

Every error a user can cause (or the knowledge base can) is a TriageError with a one-line message
and the exit code it means; the command line prints `vllm-triage: error: <message>` and exits
with it. Exit codes are a contract that users' scripts rely on.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NO_GO = 1
"""A verdict says no: compat cannot run as the host stands, a validation rung failed, a knowledge
check found problems."""
EXIT_BAD_INPUT = 2
EXIT_BROKEN_KNOWLEDGE = 3
EXIT_INTERNAL = 70
"""A bug in the tool (sysexits' EX_SOFTWARE): one line, the traceback with VLLM_TRIAGE_TRACEBACK=1."""
EXIT_INTERRUPTED = 130


class TriageError(Exception):
    """Base of the errors the tool reports to its user: a one-line message and an exit code."""

    exit_code = EXIT_BAD_INPUT


class InputError(TriageError, ValueError):
    """Input the tool cannot use (a path, a version, a recipe name); the message is one line."""


class KnowledgeError(TriageError):
    """A knowledge file that cannot be used; the message names the file and the row."""

    exit_code = EXIT_BROKEN_KNOWLEDGE
