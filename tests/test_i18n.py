"""The message catalogs: every message the code marks has a Korean and a Japanese translation with
the same {fields}, the compiled .mo files match their .po sources, and the language is chosen from
--lang or the locale."""

from __future__ import annotations

import io
import string
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from vllm_triage.errors import InputError
from vllm_triage.i18n import DOMAIN, LOCALE_DIR, Catalog, catalog, resolve_language

REPO = Path(__file__).parent.parent
TRANSLATED = ("ko", "ja")


def _extracted() -> set[str]:
    """The message ids as `make i18n` extracts them (babel.cfg, keywords tr and N_)."""
    found = extract_from_dir(
        str(REPO / "src"), method_map=[("**.py", "python")], keywords={"tr": None, "N_": None}
    )
    return {message for _, message, _, _ in found if isinstance(message, str)}


def _po(language: str):
    with (LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as handle:
        return read_po(handle, locale=language)


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_message_is_translated_with_the_same_fields(language: str):
    po = _po(language)
    problems = []
    for message in sorted(_extracted()):
        entry = po.get(message)
        if entry is None or not entry.string or entry.fuzzy:
            problems.append(f"missing: {message!r}")
        elif _fields(entry.string) != _fields(message):
            problems.append(f"fields differ: {message!r} -> {entry.string!r}")
    assert not problems, f"{language}: " + "; ".join(problems) + " (run `make i18n`, translate)"


@pytest.mark.parametrize("language", TRANSLATED)
def test_compiled_catalog_matches_its_source(language: str):
    compiled = io.BytesIO()
    write_mo(compiled, _po(language))
    mo = LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.mo"
    assert mo.read_bytes() == compiled.getvalue(), f"{mo} is stale: run `make i18n`"


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
