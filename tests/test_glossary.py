"""One vocabulary per language: the glossary (src/vllm_triage/i18n/glossary.yaml) gives each
concept the tool names the runbooks' Korean and Japanese term, and the catalogs keep to it.

Checked here: every term says where it comes from (a runbook line that has the rendering, or who
chose it); every ko/ja translation of a message whose English names a term uses the glossary's
rendering and none of the variants it lists as wrong; Korean is phrased so that no particle is
written both ways (을(를)) and none whose form depends on the sound before it follows a {field}
({bundle}을); a message id has one translation whatever domain holds it; and what
the tool shows from its machine values (a verdict, a role, a certainty, a probe's status) and the
reasons its artifacts keep in English (a probe's, a rung's) come out in the reader's language,
on the report page and on the terminal."""

from __future__ import annotations

import importlib
import re
import string
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from babel.messages.catalog import Catalog as PoCatalog
from babel.messages.pofile import read_po
from cli import run_cli
from rich.console import Console
from test_report import build_case

from vllm_triage.baseline.models import Baseline
from vllm_triage.bundle.models import Manifest
from vllm_triage.collect.reasons import REASONS as PROBE_REASONS
from vllm_triage.i18n import DOMAINS, LOCALE_DIR, Language, catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.prefix import check as prefix_texts
from vllm_triage.prefix.models import PrefixReport
from vllm_triage.render.baseline import PROBE_STATUSES, RUNTIMES, capture_renderable
from vllm_triage.render.diagnosis import CERTAINTIES, ROLES, VERDICTS
from vllm_triage.validate.models import ValidationRun
from vllm_triage.validate.reasons import REASONS as RUN_REASONS

REPO = Path(__file__).parent.parent
TRANSLATED: tuple[Language, ...] = ("ko", "ja")
SCRIPT = {"ko": re.compile(r"[\uac00-\ud7a3]"), "ja": re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")}
# A runbook quoted as the source of a rendering: the Korean one (000_...) for ko, the Japanese
# one (004_...) for ja (/work/shared/runbooks/README.md).
RUNBOOK = {"ko": "000: ", "ja": "004: "}

sys.path.insert(0, str(REPO / "scripts"))
i18n_build = importlib.import_module("i18n")


def _po(domain: str, language: str) -> PoCatalog:
    with (LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.po").open("rb") as handle:
        return read_po(handle, locale=language, domain=domain)


def _squeezed(text: str) -> str:
    return "".join(text.split())


CATALOGS = [(domain, language) for domain in DOMAINS for language in TRANSLATED]


# --- the glossary itself -----------------------------------------------------------------------


def test_every_term_names_its_source() -> None:
    """A rendering taken from a runbook quotes the line that has it; any other says whose it is."""
    entries = yaml.safe_load(i18n_build.GLOSSARY.read_text(encoding="utf-8"))["terms"]
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids)), "a term is listed twice"
    assert len(entries) >= 30
    for entry in entries:
        re.compile(entry["en"])
        for language in TRANSLATED:
            rendering, source = entry[language], entry["source"][language]
            if source.startswith(RUNBOOK[language]):
                assert _squeezed(rendering) in _squeezed(source), (entry["id"], language)
            else:
                assert source.startswith(("tool", "issue 20")), (entry["id"], language, source)
            for wrong in (entry.get("wrong") or {}).get(language, []):
                assert not re.search(wrong, rendering), (entry["id"], language, wrong)


def test_the_terms_the_issue_names_are_the_runbooks() -> None:
    terms = {term.id: term.renderings for term in i18n_build.load_glossary()}
    assert terms["maintenance_window"] == {"ko": "유지 보수 창", "ja": "保守枠"}
    assert terms["isolated_environment"] == {"ko": "격리 환경", "ja": "隔離環境"}
    assert terms["isolated_node"] == {"ko": "격리 노드", "ja": "隔離ノード"}
    assert terms["baseline"] == {"ko": "기준선", "ja": "基線"}
    assert terms["rollback"] == {"ko": "롤백", "ja": "ロールバック"}
    assert terms["widen"] == {"ko": "확대", "ja": "拡大"}
    assert terms["custom_build"] == {"ko": "직접 빌드", "ja": "自前ビルド"}
    assert terms["confidence"] == {"ko": "신뢰도", "ja": "信頼度"}


def test_the_check_finds_a_wrong_rendering_and_a_particle_fallback() -> None:
    """The checks this file runs over the real catalogs, on a catalog made to break them."""
    po = PoCatalog(locale="ja")
    po.add(
        "in the maintenance window, one isolated node first",
        "メンテナンスウィンドウで、まず隔離環境のノードから",
    )
    po.add("Confidence", "確度")
    found = i18n_build.glossary_problems("ja", po, i18n_build.load_glossary())
    for term in ("maintenance_window", "isolated_node", "confidence"):
        assert any(problem.startswith(f"{term}: ") for problem in found), (term, found)
    korean = PoCatalog(locale="ko")
    korean.add("the bundle {bundle} is newer", "번들 {bundle}이(가) 더 새롭습니다")
    assert i18n_build.particle_problems(korean)
    # A particle whose form depends on the value's last sound, glued to the value: found.
    for glued in (
        "번들 {bundle}을 읽을 수 없습니다",
        "드라이버 >= {driver}가 필요합니다",
        "{cause}로 실패했습니다",
        "{before}와 {after} 사이",
        "재평가일은 {date}입니다",
        "이전에는 {before}였습니다",
        "드라이버 {driver}(CUDA {ceiling})는 지원하지 않습니다",
        "`vllm-triage compat --cuda {cuda}`로 확인하십시오",
    ):
        korean = PoCatalog(locale="ko")
        korean.add("a message", glued)
        assert i18n_build.particle_problems(korean), glued
    # A noun, a colon, a space or a particle of one form after the value: fine.
    korean = PoCatalog(locale="ko")
    for number, fine in enumerate(
        (
            "번들 {bundle} 파일을 읽을 수 없습니다",
            "필요한 드라이버: {driver}",
            "{driver} 이상의 드라이버가 필요합니다",
            "진단된 원인({cause})으로 실패했습니다",
            "계획의 최소 버전({subject})보다 낮습니다",
            "{run}의 {number}번째 시작, {date}({days}일 후)에 재평가",
            "{gpu}에서 {ceiling}까지 지원, {count}가지 방법",
            "요구 조건이 cuda>={cuda}인 이미지",
        )
    ):
        korean.add(f"message {number}", fine)
    assert not i18n_build.particle_problems(korean)


# --- the catalogs ------------------------------------------------------------------------------


@pytest.mark.parametrize(("domain", "language"), CATALOGS)
def test_each_term_has_one_rendering_the_glossarys(domain: str, language: str) -> None:
    problems = i18n_build.glossary_problems(
        language, _po(domain, language), i18n_build.load_glossary()
    )
    assert not problems, f"{domain} {language}:\n" + "\n".join(problems)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_korean_writes_no_particle_both_ways(domain: str) -> None:
    """을(를), 이(가), 은(는), 과(와), (으)로...: each message is phrased to need one form, and
    none glues such a particle to a {field} (scripts/i18n.py, placeholder_particle_problems)."""
    problems = i18n_build.particle_problems(_po(domain, "ko"))
    assert not problems, f"{domain}:\n" + "\n".join(problems)


@pytest.mark.parametrize("language", TRANSLATED)
def test_a_message_has_one_translation_in_every_domain(language: str) -> None:
    said: dict[str, dict[str, list[str]]] = {}
    for domain in DOMAINS:
        for message in _po(domain, language):
            if message.id and message.string:
                said.setdefault(str(message.id), {}).setdefault(str(message.string), []).append(
                    domain
                )
    different = {message: ways for message, ways in said.items() if len(ways) > 1}
    assert not different, different


# --- machine values and stored reasons, said ---------------------------------------------------


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_status_word_has_its_word(language: Language) -> None:
    tr = catalog(language)
    for words in (VERDICTS, ROLES, CERTAINTIES, PROBE_STATUSES):
        for value in words:
            said = tr.word(words, value)
            assert said != value and SCRIPT[language].search(said), (language, value, said)


def _filled(template: str) -> dict[str, str]:
    return {name: f"<{name}>" for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("language", TRANSLATED)
@pytest.mark.parametrize(
    ("templates", "where"), [(PROBE_REASONS, "collect"), (RUN_REASONS, "validate")]
)
def test_a_stored_reason_is_found_again_and_said(
    language: Language, templates: tuple[str, ...], where: str
) -> None:
    """A reason as an artifact keeps it (English, filled in) comes out in the reader's language,
    through its own template (not a more general one that also matches it)."""
    tr = catalog(language)
    for template in templates:
        values = _filled(template)
        english = template.format(**values)
        said = tr.composed(english, templates)
        assert said == tr(template, **values), (where, template)
        words = template.format(**dict.fromkeys(values, ""))
        assert SCRIPT[language].search(said) or not re.search("[a-z]", words), (where, template)
    assert catalog("en").composed("no --pod given", templates) == "no --pod given"


def test_reasons_joined_with_semicolons_are_said_one_by_one() -> None:
    ja = catalog("ja")
    joined = "the NCCL test exited 3; the NCCL test found 2 wrong values; a line a server wrote"
    said = ja.composed(joined, RUN_REASONS).split("; ")
    assert said[0] == ja("the NCCL test exited {code}", code="3")
    assert said[1] == ja("the NCCL test found {count} wrong values", count="2")
    assert said[2] == "a line a server wrote"


class _Prose(HTMLParser):
    """The page's text for people: without code, log lines, styles, titles."""

    _SKIP = frozenset({"code", "style", "title", "pre"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if self._skipping or tag in self._SKIP or {"line", "mono"} & set(classes):
            self._skipping.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skipping and self._skipping[-1] == tag:
            self._skipping.pop()

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _prose(page: str) -> str:
    parser = _Prose()
    parser.feed(page)
    return " ".join(" ".join(parser.parts).split())


def _english_words(words: dict[str, str]) -> set[str]:
    return set(words) | set(words.values())


@pytest.fixture(scope="module")
def whole_case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    return build_case(tmp_path_factory.mktemp("glossary"), kb)


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_report_page_says_status_words_and_reasons(
    whole_case: Path, language: Language
) -> None:
    tr = catalog(language)
    result = run_cli("report", "--case", str(whole_case), "--lang", language)
    assert result.exit_code == 0, result.stderr
    text = _prose((whole_case / "report.html").read_text(encoding="utf-8"))
    for word in _english_words(VERDICTS) | _english_words(ROLES) | _english_words(CERTAINTIES):
        assert not _as_words(word).search(text), (language, word)
    (bundle,) = [p for p in (whole_case / "bundles").iterdir() if p.is_dir()]
    manifest = Manifest.model_validate_json((bundle / "manifest.json").read_text())
    probe_reasons = [probe.reason for probe in manifest.probes if probe.reason]
    (summary,) = (whole_case / "runs").glob("*/summary.json")
    run = ValidationRun.model_validate_json(summary.read_text())
    rung_reasons = [rung.reason for rung in run.rungs if rung.reason]
    assert probe_reasons and rung_reasons
    for reason, templates in [(r, PROBE_REASONS) for r in probe_reasons] + [
        (r, RUN_REASONS) for r in rung_reasons
    ]:
        said = tr.composed(reason, templates)
        assert said != reason and reason not in text and said.split(": ")[0] in text, reason
    left = [english for english in _phrases(language) if _as_words(english).search(text)]
    assert not left, f"{language}: left in English: {left}"


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_report_page_says_the_prefix_check_the_facts_and_the_baselines(
    whole_case: Path, language: Language, kb: KnowledgeBase
) -> None:
    """What the artifacts keep in English and the page shows: the prefix check's launch check
    (the recipe's reason it quotes included), its first pair and unit; the container's state and
    where vLLM came from; a baseline's container runtimes and where it read NCCL's version and
    transport."""
    tr = catalog(language)
    result = run_cli("report", "--case", str(whole_case), "--lang", language)
    assert result.exit_code == 0, result.stderr
    text = _prose((whole_case / "report.html").read_text(encoding="utf-8"))
    for english in (
        "needs --enable-prefix-caching given explicitly",
        "to the launch command",
        "Prefix caching is off by default",
        "lines 1 and 2",
        "(characters)",
        "(runtimes:",
        "settings and RDMA ports",
        "(log nccl",
    ):
        assert english not in text, (language, english)
    for value in ("exited", "image-bundled"):
        assert not _as_words(value).search(text), (language, value)
    (path,) = (whole_case / "prefix-check").glob("*.json")
    launch = PrefixReport.model_validate_json(path.read_text()).launch
    assert launch is not None and launch.fix
    why = next(f.why for f in kb.recipes["kimi-k3"].profiles[0].flags if "128" in f.why)
    assert tr(why) != why and tr(why) in text
    for said in (
        prefix_texts.launch_said(tr, launch.summary),
        prefix_texts.launch_said(tr, launch.fix),
        tr(prefix_texts.FIRST_PAIR, a=1, b=2),
        tr("{compared} requests compared ({unit})", compared=4, unit=tr("characters")),
        tr("exited"),
        tr("bundled in the image"),
        tr(RUNTIMES, runtimes="nvidia, runc"),
        tr("settings and RDMA ports"),
    ):
        assert SCRIPT[language].search(said) and said in text, (language, said)


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_terminal_says_a_baselines_runtimes_and_where_nccl_was_read(
    whole_case: Path, language: Language
) -> None:
    tr = catalog(language)
    baseline = Baseline.model_validate_json(
        (whole_case / "baselines" / "after" / "baseline.json").read_text()
    )
    assert baseline.communication and baseline.communication.nccl_version_source
    assert baseline.communication.nccl_version_source.startswith("log ")
    console = Console(width=200, record=True)
    console.print(capture_renderable(baseline, "baselines/after", language))
    out = console.export_text()
    for english in ("runtimes:", "settings and RDMA ports", "(log "):
        assert english not in out, (language, english)
    name = baseline.communication.nccl_version_source.removeprefix("log ")
    for said in (
        tr(RUNTIMES, runtimes="nvidia, runc"),
        tr("settings and RDMA ports"),
        tr("log {name}", name=name),
    ):
        assert said in out, (language, said)


def _as_words(phrase: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])")


def _phrases(language: Language) -> set[str]:
    """Every message of three words or more that a catalog says otherwise (its English left on a
    page means a text went around the catalog)."""
    return {
        str(message.id)
        for domain in DOMAINS
        for message in _po(domain, language)
        if message.id and message.string and message.string != message.id
        if "{" not in str(message.id) and len(str(message.id).split()) >= 3
    }


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_terminal_says_the_verdict_role_and_certainty(whole_case: Path, language: str) -> None:
    result = run_cli(
        "diagnose", "--case", str(whole_case), "--lang", language, env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for english in ("incompatible", "secondary", "cascade", "related"):
        assert not re.search(rf"\b{english}\b", out), (language, english)
    tr = catalog(language)
    for said in (tr("incompatible"), tr("secondary"), tr("cascade")):
        assert said in out, (language, said)
