"""`knowledge check`'s tie between the data and the message catalogs: every text for people in the
knowledge base (a field typed `Text`) has a Korean and a Japanese translation in the compiled
catalog of its domain (`signatures` for the diagnosis' signatures and fact checks, `knowledge` for
the rest), with the same {fields}. A text edited or added in the data without its translations
fails the check, one line naming the file and the text, so the approvers never get half their
advice in English."""

from __future__ import annotations

import gettext
import re
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_triage.i18n import (
    KNOWLEDGE_DOMAIN,
    LANGUAGES,
    LOCALE_DIR,
    SIGNATURE_SECTIONS,
    SIGNATURES_DOMAIN,
)
from vllm_triage.knowledge.texts import translatable_texts

if TYPE_CHECKING:
    from vllm_triage.knowledge.loader import KnowledgeBase

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SHOWN = 90  # characters of a text a problem line quotes
_SECTION = re.compile(r"^([a-z_]+)(?:\[([0-9]+)\]|\.([A-Za-z0-9_.-]+?)(?=\.|\[|$))?")


class _Missing(gettext.NullTranslations):
    """The last fallback: says that no catalog of the chain holds the message."""

    MARK = "\x00missing\x00"

    def gettext(self, message: str) -> str:
        return self.MARK


def _compiled(domain: str, language: str, locale_dir: Path) -> gettext.NullTranslations | None:
    path = locale_dir / language / "LC_MESSAGES" / f"{domain}.mo"
    try:
        with path.open("rb") as handle:
            translations: gettext.NullTranslations = gettext.GNUTranslations(handle)
    except OSError:
        return None
    translations.add_fallback(_Missing())
    return translations


def _file(kb: KnowledgeBase, where: str) -> str:
    """The knowledge file a text sits in, from its dotted path (signatures[3].summary)."""
    match = _SECTION.match(where)
    section = match.group(1) if match else where
    if section == "signatures" and match and match.group(2) is not None:
        index = int(match.group(2))
        if index < len(kb.signatures):
            return kb.signature_file(kb.signatures[index])
    if section == "recipes" and match and match.group(3):
        return kb.file(f"recipes/{match.group(3)}.yaml")
    return kb.file(f"{section}.yaml")


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _SHOWN else flat[: _SHOWN - 1] + "…")


def translation_problems(kb: KnowledgeBase, locale_dir: Path = LOCALE_DIR) -> list[str]:
    """One line per text without a translation (or with other {fields} in one), naming its file;
    one line per catalog that is not compiled at all."""
    problems: list[str] = []
    catalogs: dict[tuple[str, str], gettext.NullTranslations | None] = {}
    for language in LANGUAGES:
        if language == "en":
            continue
        for domain in (SIGNATURES_DOMAIN, KNOWLEDGE_DOMAIN):
            catalogs[domain, language] = _compiled(domain, language, locale_dir)
            if catalogs[domain, language] is None:
                problems.append(
                    f"i18n/locale/{language}/LC_MESSAGES/{domain}.mo: no {language} catalog of "
                    "the knowledge base's texts (run `make i18n` and translate)"
                )
    seen: set[tuple[str, str]] = set()
    for text, where in translatable_texts(kb):
        section = where.split(".")[0].split("[")[0]
        domain = SIGNATURES_DOMAIN if section in SIGNATURE_SECTIONS else KNOWLEDGE_DOMAIN
        if (domain, text) in seen:
            continue
        seen.add((domain, text))
        fields = set(_FIELD.findall(text))
        for (known, tongue), translations in catalogs.items():
            if known != domain or translations is None:
                continue
            found = translations.gettext(text)
            if found == _Missing.MARK:
                problems.append(
                    f"{_file(kb, where)}: {where}: no {tongue} translation in the {domain} "
                    f"catalog: {_shown(text)} (run `make i18n` and translate)"
                )
            elif set(_FIELD.findall(found)) != fields:
                problems.append(
                    f"{_file(kb, where)}: {where}: the {tongue} translation has other "
                    f"{{fields}} than {_shown(text)}"
                )
    return problems
