"""Text from outside the tool (log lines, request content, file names) made safe to print.

An artifact quotes what users and servers wrote: a lone surrogate there cannot be encoded as UTF-8
(JSON and text output would fail), and a terminal control character (ESC, or a C1 code such as
CSI) would drive the reader's terminal. Both are replaced before anything is printed, in one place.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls as their visible Unicode pictures (ESC prints as ␛); newline and tab stay.
_CONTROL_PICTURES = {code: 0x2400 + code for code in range(32) if chr(code) not in "\n\t"}
_TERMINAL = str.maketrans(
    {**_CONTROL_PICTURES, 0x7F: 0x2421, **dict.fromkeys(range(0x80, 0xA0), 0xFFFD)}
)

Model = TypeVar("Model", bound=BaseModel)


def printable(artifact: Model, *, terminal: bool) -> Model:
    """The artifact with lone surrogates replaced, and for a terminal or a ticket (`terminal`)
    control characters shown as symbols; JSON output escapes control characters itself."""
    return type(artifact).model_validate(_clean(artifact.model_dump(), terminal))


def _clean(value: Any, terminal: bool) -> Any:
    if isinstance(value, str):
        if not value.isascii():
            value = _SURROGATE.sub("\ufffd", value)
        return value.translate(_TERMINAL) if terminal else value
    if isinstance(value, dict):
        return {_clean(key, terminal): _clean(item, terminal) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item, terminal) for item in value]
    return value
