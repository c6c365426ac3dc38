"""The knowledge base's texts for people (advice, checklists, reasons), marked in the schema as
`Text` so that they are translated like the code's messages: `make i18n` collects them into the
`knowledge` catalog, the tests fail when one lacks a translation, and whoever shows one passes it
through the reader's catalog.

The schema's classes are msgspec Structs (vllm_triage.knowledge.schema): the walk reads each
field's declared type, Annotated metadata included, through msgspec.structs.fields."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Annotated, Any, get_args, get_origin

import msgspec


class Translatable:
    """Marks a str (or list[str]) field of the schema as a text people read."""

    def __repr__(self) -> str:
        return "Translatable()"


Text = Annotated[str, Translatable()]


def translatable_texts(source: object, where: str = "") -> Iterator[tuple[str, str]]:
    """Every marked text in a knowledge base (or any Struct, list or dict of them), with where it
    sits as a dotted path."""
    if isinstance(source, msgspec.Struct):
        for name, marked in _fields(type(source)):
            value = getattr(source, name)
            path = f"{where}.{name}" if where else name
            if marked:
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


@cache
def _fields(kind: type[msgspec.Struct]) -> tuple[tuple[str, bool], ...]:
    """Each field's name and whether it holds texts (Text, or a list of Text)."""
    return tuple((field.name, _marked(field.type)) for field in msgspec.structs.fields(kind))


def _marked(annotation: Any) -> bool:
    """Text itself, or a container whose item type is Text (the marker sits on the item type);
    constraints (Annotated[list[Text], msgspec.Meta(...)]) wrap either."""
    if get_origin(annotation) is Annotated:
        if any(isinstance(item, Translatable) for item in annotation.__metadata__):
            return True
        annotation = annotation.__origin__
    for argument in get_args(annotation):
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
