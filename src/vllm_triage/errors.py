"""What the tool tells a user went wrong, and the exit codes: one base class, one table.

Every error a user can cause (or the knowledge base can) is a TriageError with a one-line message
and the exit code it means; the command line prints `vllm-triage: error: <message>` and exits
with it. Exit codes are a contract that users' scripts rely on.
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_NO_GO = 1
"""A verdict says no: compat cannot run as the host stands, a validation rung failed, a knowledge
check found problems."""
EXIT_BAD_INPUT = 2
EXIT_BROKEN_KNOWLEDGE = 3
EXIT_INCOMPLETE = 4
"""An answer that covers less than was asked: `record check` could not check a trigger (its
registry could not be read), and none of those it could check makes the decision due."""
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


class FileSystemError(InputError):
    """The file system refused what a command writes or reads for a reason of the machine's, not
    the tool's: full, over quota, read-only, no permission. One line naming the path, exit 2."""


# The reasons a file system gives that the environment decides (what a user can mend: free
# space, a writable folder, a permission), worded in the tool's lower case. An OSError with
# another errno (a file vanished under the tool, a bad descriptor) stays a bug.
_FILE_SYSTEM_REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large",
    errno.EIO: "input/output error",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files in the system",
    errno.ENAMETOOLONG: "file name too long",
    errno.ESTALE: "stale file handle (a network file system went away)",
}


def file_system_reason(exc: OSError) -> str:
    """Why the file system refused, in the tool's words (`no space left on device`)."""
    if exc.errno in _FILE_SYSTEM_REASONS:
        return _FILE_SYSTEM_REASONS[exc.errno]
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def file_system_error(exc: OSError, shown: str | None) -> FileSystemError | None:
    """The one-line error for an OSError the environment causes, naming the path `shown`
    (`triage/diagnosis.json: no space left on device`); None for any other OSError."""
    if exc.errno not in _FILE_SYSTEM_REASONS:
        return None
    reason = file_system_reason(exc)
    return FileSystemError(f"{shown}: {reason}" if shown else reason)
