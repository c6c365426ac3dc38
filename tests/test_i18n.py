"""The message catalogs: every message the code marks has a Korean and a Japanese translation with
the same {fields}, the compiled .mo files match their .po sources, and the language is chosen from
--lang or the locale."""

from __future__ import annotations

import importlib
import io
import string
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from vllm_triage.errors import InputError
from vllm_triage.i18n import (
    DOMAINS,
    KNOWLEDGE_DOMAIN,
    LOCALE_DIR,
    SIGNATURES_DOMAIN,
    Catalog,
    catalog,
    resolve_language,
)

REPO = Path(__file__).parent.parent
TRANSLATED = ("ko", "ja")

# The messages as `make i18n` extracts them: the same code (scripts/i18n.py) builds the catalogs.
sys.path.insert(0, str(REPO / "scripts"))
i18n_build = importlib.import_module("i18n")


def _messages(domain: str) -> set[str]:
    if domain in (KNOWLEDGE_DOMAIN, SIGNATURES_DOMAIN):
        return set(i18n_build.knowledge_messages(domain))
    return set(i18n_build.code_messages(domain))


def _po(domain: str, language: str):
    path = LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.po"
    if not path.exists():
        return None
    with path.open("rb") as handle:
        return read_po(handle, locale=language)


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


CATALOGS = [(domain, language) for domain in DOMAINS for language in TRANSLATED]


@pytest.mark.parametrize(("domain", "language"), CATALOGS)
@pytest.mark.slow
def test_every_message_is_translated_with_the_same_fields(domain: str, language: str):
    messages = _messages(domain)
    po = _po(domain, language)
    if po is None:
        assert not messages, f"{domain} {language}: no catalog for {len(messages)} messages"
        return
    problems = []
    for message in sorted(messages):
        entry = po.get(message)
        if entry is None or not entry.string or entry.fuzzy:
            problems.append(f"missing: {message!r}")
        elif _fields(entry.string) != _fields(message):
            problems.append(f"fields differ: {message!r} -> {entry.string!r}")
    assert not problems, (
        f"{domain} {language}: " + "; ".join(problems) + " (run `make i18n`, translate)"
    )


@pytest.mark.parametrize(("domain", "language"), CATALOGS)
def test_compiled_catalog_matches_its_source(domain: str, language: str):
    po = _po(domain, language)
    mo = LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.mo"
    if po is None:
        assert not mo.exists(), f"{mo} has no .po source"
        return
    compiled = io.BytesIO()
    write_mo(compiled, po)
    assert mo.read_bytes() == compiled.getvalue(), f"{mo} is stale: run `make i18n`"


def test_a_translation_from_any_domain_is_found():
    """The catalogs are chained: a message is found whichever domain holds it."""
    for domain in DOMAINS:
        po = _po(domain, "ko")
        entry = next((m for m in po or () if m.id and m.string and not _fields(m.id)), None)
        if entry is not None:
            assert catalog("ko")(entry.id) == entry.string, domain


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"LANG": "ko_KR.UTF-8"}, "ko"),
        ({"LC_ALL": "ja_JP.eucJP", "LANG": "ko_KR.UTF-8"}, "ja"),
        ({"VLLM_TRIAGE_LANG": "en", "LC_ALL": "ja_JP.UTF-8"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "de_DE@euro"}, "en"),
        ({}, "en"),
    ],
)
def test_language_from_the_locale(monkeypatch, environment: dict[str, str], expected: str):
    for variable in ("VLLM_TRIAGE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    assert resolve_language(None) == expected


def test_explicit_language_wins_and_unknown_is_one_line(monkeypatch):
    monkeypatch.setenv("LANG", "ja_JP.UTF-8")
    assert resolve_language("KO") == "ko"
    with pytest.raises(InputError, match=r"unknown language 'fr' \(use one of: en, ko, ja\)"):
        resolve_language("fr")


def test_fields_are_filled_after_translation():
    english = catalog("en")
    assert isinstance(english, Catalog)
    assert english("{count} nodes need {branch}", count=3, branch="r580") == "3 nodes need r580"
    assert english("braces {kept} as written") == "braces {kept} as written"
