"""Messages in the reader's language (English, Korean, Japanese) through gettext catalogs.

Artifacts keep their machine fields (causes, paths, rung names) in English; the sentences people
read go through `tr`, whose English text is the message id. The catalogs live in locale/ as .po
files (edited by translators, checked complete by the tests) and the .mo files compiled from them
(`make i18n`), which the standard library's gettext reads at run time without Babel.
"""

from __future__ import annotations

import gettext
import os
from functools import cache
from pathlib import Path
from typing import Literal, get_args

from vllm_triage.errors import InputError

Language = Literal["en", "ko", "ja"]
LANGUAGES: tuple[Language, ...] = get_args(Language)
DOMAIN = "vllm_triage"
LOCALE_DIR = Path(__file__).parent / "locale"
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
    translations = gettext.translation(DOMAIN, LOCALE_DIR, languages=[language], fallback=True)
    return Catalog(language, translations)
