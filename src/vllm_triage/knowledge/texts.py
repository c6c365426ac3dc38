"""The knowledge base's texts for people (advice, checklists, reasons), marked in the schema as
`Text` so that they are translated like the code's messages: `make i18n` collects them into the
`knowledge` catalog, the tests fail when one lacks a translation, and whoever shows one passes it
through the reader's catalog."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Annotated, Any

from pydantic import BaseModel


class Translatable:
    """Marks a str (or list[str]) field of the schema as a text people read."""

    def __repr__(self) -> str:
        return "Translatable()"


Text = Annotated[str, Translatable()]


def translatable_texts(source: object, where: str = "") -> Iterator[tuple[str, str]]:
    """Every marked text in a knowledge base (or any model, list or dict of them), with where it
    sits as a dotted path."""
    if isinstance(source, BaseModel):
        for name, info in type(source).model_fields.items():
            value = getattr(source, name)
            path = f"{where}.{name}" if where else name
            if any(isinstance(item, Translatable) for item in info.metadata) or _marked_list(info):
                yield from ((text, path) for text in _strings(value))
            else:
                yield from translatable_texts(value, path)
    elif is_dataclass(source) and not isinstance(source, type):
        for item in fields(source):
            path = f"{where}.{item.name}" if where else item.name
            yield from translatable_texts(getattr(source, item.name), path)
    elif isinstance(source, list | tuple):
        for index, item in enumerate(source):
            yield from translatable_texts(item, f"{where}[{index}]")
    elif isinstance(source, dict):
        for key, item in source.items():
            yield from translatable_texts(item, f"{where}.{key}")


def _marked_list(info: Any) -> bool:
    """A list[Text] field: the marker sits on the list's item type."""
    for argument in getattr(info.annotation, "__args__", ()):
        if any(isinstance(item, Translatable) for item in getattr(argument, "__metadata__", ())):
            return True
    return False


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
