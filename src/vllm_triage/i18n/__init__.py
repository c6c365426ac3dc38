"""Messages in the reader's language (English, Korean, Japanese) through gettext catalogs.

Artifacts keep their machine fields (causes, paths, rung names) in English; the sentences people
read go through `tr`, whose English text is the message id. A machine value that is a word (a
verdict, a status) is said with `tr.word`, and a sentence an artifact keeps composed in English
(a probe's or a rung's reason) with `tr.composed`, which finds its template again. The catalogs
live in locale/ as .po files (edited by translators, checked complete by the tests, their terms
the glossary's: glossary.yaml) and the .mo files compiled from them (`make i18n`), which the
standard library's gettext reads at run time without Babel.
"""

from __future__ import annotations

import gettext
import os
import re
import string
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Literal, get_args

from vllm_triage.errors import InputError

Language = Literal["en", "ko", "ja"]
LANGUAGES: tuple[Language, ...] = get_args(Language)
LOCALE_DIR = Path(__file__).parent / "locale"
KNOWLEDGE_DOMAIN = "knowledge"
SIGNATURES_DOMAIN = "signatures"
# The knowledge base's sections whose texts form the signatures catalog (the diagnosis' advice);
# every other section's texts are in the knowledge catalog.
SIGNATURE_SECTIONS = ("signatures", "fact_checks")
DOMAINS: dict[str, str] = {
    "vllm_triage": "",
    "plan": "plan",
    "baseline": "baseline",
    "record": "record",
    "report": "report",
    KNOWLEDGE_DOMAIN: "knowledge/data",
    SIGNATURES_DOMAIN: "knowledge/data/signatures",
}
"""One catalog per part of the tool with texts of its own (domain -> its folder in the package), so
that parts are translated and merged independently: the core domain ("") holds the code outside
the other folders; `signatures` the diagnosis' texts in the knowledge data (signatures and fact
checks), `knowledge` the rest of the data's texts for people (fields typed `Text` in the schema).
scripts/i18n.py (`make i18n`) builds them; a domain whose folder does not exist yet is empty."""
# Where the default language comes from, first set wins: the tool's own variable, then POSIX.
_LANGUAGE_VARIABLES = ("VLLM_TRIAGE_LANG", "LC_ALL", "LC_MESSAGES", "LANG")


class Catalog:
    """One language's messages: `tr(message, **fields)` translates, then fills {fields}."""

    def __init__(self, language: Language, translations: gettext.NullTranslations) -> None:
        self.language = language
        self._translations = translations

    def __call__(self, message: str, /, **fields: object) -> str:
        text = self._translations.gettext(message)
        return text.format(**fields) if fields else text

    def word(self, words: Mapping[str, str], value: str) -> str:
        """A machine value that is an English word (a verdict, a status, a certainty), in this
        catalog's language through `words` (value -> message id); in English, or for a value
        not among them, the value as it is."""
        if self.language == "en" or value not in words:
            return value
        return self(words[value])

    def composed(self, text: str, templates: Sequence[str]) -> str:
        """A sentence the code composed from one of `templates` (message ids with {fields}) and
        stored in English, in this catalog's language: the template is found again by its fixed
        words, translated, and filled with the same values, each said the same way in turn.
        Sentences joined with "; " are said one by one. Artifacts keep their English, so one
        written before reads the same; a text made from none of the templates (a server's own
        error) is returned as it is."""
        if self.language == "en" or not text:
            return text
        return self._pieces(text, _most_specific_first(tuple(templates)))

    def _pieces(self, text: str, templates: tuple[str, ...]) -> str:
        """`text` split at "; " and said run by run: of the ways to group its pieces into
        sentences, the one whose templates cover the most fixed words (so "a; b" is two
        sentences when each is one, and one when only a template with "; " in it fits)."""
        pieces = text.split("; ")
        best: list[tuple[int, list[str]]] = [(0, [])] * (len(pieces) + 1)
        for start in range(len(pieces) - 1, -1, -1):
            covered, rest = best[start + 1]
            chosen = (covered, [pieces[start], *rest])  # this piece as it is
            for end in range(start + 1, len(pieces) + 1):
                sentence = self._sentence("; ".join(pieces[start:end]), templates)
                if sentence is not None:
                    said, fixed = sentence
                    covered, rest = best[end]
                    if fixed + covered > chosen[0]:
                        chosen = (fixed + covered, [said, *rest])
            best[start] = chosen
        return "; ".join(best[0][1])

    def _sentence(self, text: str, templates: tuple[str, ...]) -> tuple[str, int] | None:
        """One sentence said, with how many of its characters are fixed words: a message id
        (all of them), or made from a template; None when it is neither."""
        translated = self._translations.gettext(text)
        if translated != text:
            return translated, len(text)
        for template in templates:
            found = _template_pattern(template).fullmatch(text)
            if found is not None:
                values = {k: self._pieces(v, templates) for k, v in found.groupdict().items()}
                return self(template, **values), _fixed_length(template)
        return None


@cache
def _template_pattern(template: str) -> re.Pattern[str]:
    """A template as a pattern of its sentences: its fixed words as they are, each {field} any
    text (the shortest that lets the whole sentence match), a field named twice the same text."""
    pattern, named = "", set()
    for literal, field, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if field is not None:
            pattern += f"(?P={field})" if field in named else f"(?P<{field}>.+?)"
            named.add(field)
    return re.compile(pattern, re.DOTALL)


def _fixed_length(template: str) -> int:
    return sum(len(literal) for literal, _, _, _ in string.Formatter().parse(template))


@cache
def _most_specific_first(templates: tuple[str, ...]) -> tuple[str, ...]:
    """Templates with more fixed words first, so that "{kind}: {problem}" is tried last."""
    return tuple(sorted(templates, key=_fixed_length, reverse=True))


def N_(message: str) -> str:
    """Mark a message for extraction where it is defined; `tr` translates it where it is shown."""
    return message


def resolve_language(value: str | None = None) -> Language:
    """The language asked for (`--lang`), else the locale's (ko_KR.UTF-8 -> ko), else English."""
    if value is not None:
        chosen = value.strip().lower()
        for language in LANGUAGES:
            if chosen == language:
                return language
        raise InputError(f"unknown language {value!r} (use one of: {', '.join(LANGUAGES)})")
    for variable in _LANGUAGE_VARIABLES:
        setting = os.environ.get(variable, "").strip()
        if setting:
            return _from_locale(setting)
    return "en"


def _from_locale(setting: str) -> Language:
    code = setting.split(".")[0].split("@")[0].replace("-", "_").split("_")[0].lower()
    return next((language for language in LANGUAGES if language == code), "en")


@cache
def catalog(language: Language = "en") -> Catalog:
    """The catalog of a language (English needs none: the message ids are English)."""
    if language == "en":
        return Catalog(language, gettext.NullTranslations())
    translations = gettext.NullTranslations()
    for domain in reversed(DOMAINS):  # the first domain asked first, the others its fallbacks
        found = gettext.translation(domain, LOCALE_DIR, languages=[language], fallback=True)
        found.add_fallback(translations)
        translations = found
    return Catalog(language, translations)
