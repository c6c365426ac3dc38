"""Build the message catalogs (`make i18n`): extract, merge, compile, one gettext domain at a time.

Each part of the tool with texts of its own has its own domain (vllm_triage.i18n.DOMAINS), so
parts are translated and merged independently: a domain's messages are extracted from its package
folder (`tr(...)` and `N_(...)` calls), the core domain's from the rest of the code, and the
`signatures` and `knowledge` domains' from the knowledge base's texts for people (fields typed
`Text` in the schema: the diagnosis' signatures and fact checks, and the rest). New messages are
merged into the ko/ja .po files (a translator fills them; the tests fail until they do) and the .mo
files the tool reads are compiled from them. Then it lists the translations that break the
glossary (src/vllm_triage/i18n/glossary.yaml: the runbooks' term for each concept, one rendering
each), lean on a Korean particle fallback such as 을(를), or glue a Korean particle whose form
depends on the sound before it to a {field} ({bundle}을); tests/test_glossary.py fails on them.

Run: .venv/bin/python scripts/i18n.py [DOMAIN ...]   (every domain when none is named)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from vllm_triage import __version__
from vllm_triage.i18n import (
    DOMAINS,
    KNOWLEDGE_DOMAIN,
    LANGUAGES,
    LOCALE_DIR,
    SIGNATURE_SECTIONS,
    SIGNATURES_DOMAIN,
)
from vllm_triage.knowledge import load_knowledge
from vllm_triage.knowledge.texts import translatable_texts

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "vllm_triage"
KEYWORDS = {"tr": None, "N_": None}
GLOSSARY = LOCALE_DIR.parent / "glossary.yaml"
# What a message id names that is not English prose: code spans, the tool's commands, flags,
# {fields}, and tokens with _ . / = in them (ids, files, settings).
_MACHINE = re.compile(
    r"`[^`]*`|vllm-triage (?:baseline|record|case|fleet|knowledge) [a-z]+|vllm-triage [a-z-]+"
    r"|prefix-check|--[a-z0-9-]+|\{[^}]*\}|\S*\w[_./=]\w\S*"
)
# A Korean particle written both ways because the word before it may end in a vowel or not:
# 을(를), 이(가), 은(는), 과(와), (으)로... A message is phrased so that it needs none.
PARTICLE_FALLBACK = re.compile(
    r"\((?:을|를|이|가|은|는|과|와|으|으로|로|이나|나|이라|라|이며|며|아|야)\)"
)
# A particle whose form depends on how the word before it ends, written right after a {field}:
# the value (a version, a path, a name) decides 을/를, 이/가, 은/는, 과/와, 으로/로... when read
# aloud, so one form is wrong for some values. See placeholder_particle_problems for the rule.
PLACEHOLDER_PARTICLE = re.compile(
    r"\{[^{}]*\}"  # the field
    r"(?:\([^()]*\))?"  # and a parenthesis right after it: "{driver}(CUDA {ceiling})는"
    r"[`'\"\u2019\u201d>\]]*"  # and what closes a span it ends: "`--cuda {cuda}`로", "<{tag}>"
    r"(?:을|를|이|입|였|가(?!지|량)|은|는|과|와|으로|로|나|라|란|며|랑|야|아|여)"
)


def code_messages(domain: str) -> dict[str, list[str]]:
    """The messages a domain's code marks, each with the files it appears in."""
    folder = DOMAINS[domain]
    root = PACKAGE / folder if folder else PACKAGE
    others = {f for d, f in DOMAINS.items() if f and d != domain}
    found: dict[str, list[str]] = {}
    if not root.is_dir():
        return found
    for file, _, message, _, _ in extract_from_dir(
        str(root), method_map=[("**.py", "python")], keywords=KEYWORDS
    ):
        top = Path(file).parts[0] if folder == "" else ""
        if top in others or not isinstance(message, str):
            continue
        found.setdefault(message, []).append(file)
    return found


def knowledge_messages(domain: str) -> dict[str, list[str]]:
    """The knowledge base's texts for people in a data domain, each with where it sits."""
    found: dict[str, list[str]] = {}
    for text, where in translatable_texts(load_knowledge()):
        section = where.split(".")[0].split("[")[0]
        if (section in SIGNATURE_SECTIONS) == (domain == SIGNATURES_DOMAIN):
            found.setdefault(text, []).append(where)
    return found


def _template(domain: str, messages: dict[str, list[str]]) -> Catalog:
    template = Catalog(project="vllm-triage", version=__version__, domain=domain)
    for message in sorted(messages):
        template.add(message, auto_comments=sorted(set(messages[message])))
    return template


def _merge(domain: str, language: str, template: Catalog) -> Catalog:
    po_path = LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.po"
    if po_path.exists():
        with po_path.open("rb") as handle:
            catalog = read_po(handle, locale=language, domain=domain)
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
    else:
        catalog = Catalog(locale=language, domain=domain, project="vllm-triage")
        catalog.update(template, no_fuzzy_matching=True)
    po_path.parent.mkdir(parents=True, exist_ok=True)
    with po_path.open("wb") as handle:
        write_po(handle, catalog, width=100, omit_header=False, sort_output=True, no_location=True)
    return catalog


def _compile(domain: str, language: str, catalog: Catalog) -> int:
    mo_path = LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.mo"
    with mo_path.open("wb") as handle:
        write_mo(handle, catalog)
    return sum(1 for message in catalog if message.id and not message.string)


@dataclass(frozen=True)
class Term:
    """One concept of the glossary: the English it is said with in a message id, its one
    rendering per language, and the renderings no translation may use."""

    id: str
    english: re.Pattern[str]
    renderings: dict[str, str]
    wrong: dict[str, list[re.Pattern[str]]]


def load_glossary(path: Path = GLOSSARY) -> list[Term]:
    """The glossary's terms (the runbooks' renderings, each with its source in the file)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Term(
            id=entry["id"],
            english=re.compile(entry["en"], re.IGNORECASE),
            renderings={language: entry[language] for language in LANGUAGES if language != "en"},
            wrong={
                language: [re.compile(pattern) for pattern in patterns]
                for language, patterns in (entry.get("wrong") or {}).items()
            },
        )
        for entry in document["terms"]
    ]


def _squeezed(text: str) -> str:
    return "".join(text.split())


def glossary_problems(language: str, catalog: Catalog, terms: list[Term]) -> list[str]:
    """A catalog's translations that render a glossary term otherwise than the glossary says,
    or use a rendering it lists as wrong; one line each."""
    problems = []
    for message in catalog:
        if not message.id or not message.string or not isinstance(message.id, str):
            continue
        english = _MACHINE.sub(" ", message.id)
        translation = str(message.string)
        for term in terms:
            rendering = term.renderings.get(language)
            if (
                rendering is not None
                and term.english.search(english)
                and _squeezed(rendering) not in _squeezed(translation)
            ):
                problems.append(f"{term.id}: {rendering!r} missing in {message.id!r}")
            for wrong in term.wrong.get(language, ()):
                if wrong.search(translation):
                    problems.append(f"{term.id}: {wrong.pattern!r} used in {translation!r}")
    return problems


def _strings(message: Message) -> list[str]:
    """A message's translations: one, or one per plural form."""
    said = message.string if isinstance(message.string, (list, tuple)) else [message.string]
    return [text for text in said if isinstance(text, str) and text]


def placeholder_particle_problems(catalog: Catalog) -> list[str]:
    """Korean translations that glue a sound-dependent particle to a {field}: "{bundle}을",
    "{driver}가", "{cause}로". Which form is right depends on how the value ends when read aloud
    (12.8 and 550 end in a consonant, 12.4 and 535 in a vowel), which a translation cannot know:
    a message puts a noun after the value ("드라이버 {driver} 버전이", "{path} 파일을"), uses a
    colon ("필요한 드라이버: {driver}") or is reordered.

    The rule: right after the field's closing brace, with no space, these begin a finding: 을 를
    이 가 은 는 과 와 으로 로 (이)나 (이)라 (이)란 (이)며 (이)랑 야 아 여, and 였 (the copula's
    past after a vowel; 이었 after a consonant). Every word that begins with the syllable 이
    counts (이, 이나, 이라, 이며, 이고, 이다, 이었다), and so does 입 (입니다): the copula may be
    written after any sound, but after a vowel it is usually shortened (12.4다, 12.4였다), and a
    bare value as the predicate reads better with a noun ("약 {estimate} 토큰입니다") or a colon.
    Not findings: 인, 일 and 임 (never shortened; 일 is also the day counter, "{days}일 후"), 가지
    and 가량 (counters), and the particles with one form after any sound: 의 에 에서 에게 도 만
    까지 부터 보다 처럼. A space ends the check ("{x} 이상", "{x} 로그" are other words). The
    field also decides after a parenthesis right after it ("{driver}(CUDA {ceiling})는") and
    after a code span, quote or tag that it ends ("`--cuda {cuda}`로", "<{tag}>입니다"); after a
    noun with the field in parentheses ("최소 버전({subject})보다", "원인({cause})으로") the noun
    decides, which is fine."""
    return [
        f"particle glued to a field ({found.group(0)!r}) in {text!r}"
        for message in catalog
        if message.id
        for text in _strings(message)
        for found in PLACEHOLDER_PARTICLE.finditer(text)
    ]


def particle_problems(catalog: Catalog) -> list[str]:
    """Korean translations that write a particle both ways (을(를)) instead of being phrased to
    need one form only, or glue a sound-dependent particle to a {field} (the rule:
    placeholder_particle_problems)."""
    return [
        f"particle fallback in {text!r}"
        for message in catalog
        if message.id
        for text in _strings(message)
        if PARTICLE_FALLBACK.search(text)
    ] + placeholder_particle_problems(catalog)


def build(domains: Iterable[str]) -> list[str]:
    """Extract, merge and compile each domain; the lines to print (what is left to translate)."""
    report = []
    terms = load_glossary()
    for domain in domains:
        data = domain in (KNOWLEDGE_DOMAIN, SIGNATURES_DOMAIN)
        messages = knowledge_messages(domain) if data else code_messages(domain)
        pot = LOCALE_DIR.parent / f"{domain}.pot"
        if not messages and not pot.exists():
            report.append(f"{domain}: no messages yet, no catalog")
            continue
        template = _template(domain, messages)
        with pot.open("wb") as handle:
            write_po(handle, template, width=100, sort_output=True, no_location=True)
        for language in LANGUAGES:
            if language == "en":
                continue
            catalog = _merge(domain, language, template)
            missing = _compile(domain, language, catalog)
            report.append(f"{domain} {language}: {len(messages)} messages, {missing} untranslated")
            found = glossary_problems(language, catalog, terms)
            if language == "ko":
                found += particle_problems(catalog)
            report += [f"  {domain} {language}: {problem}" for problem in found]
    return report


def main(argv: list[str] | None = None) -> int:
    asked = sys.argv[1:] if argv is None else argv
    unknown = [domain for domain in asked if domain not in DOMAINS]
    if unknown:
        print(f"i18n: unknown domain {unknown[0]!r} (known: {', '.join(DOMAINS)})", file=sys.stderr)
        return 2
    for line in build(asked or DOMAINS):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
