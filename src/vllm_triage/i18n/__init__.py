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
