"""`diagnose --lang ko|ja` and the report speak the reader's language: the signature texts (the
diagnosis' advice) and the sentences the analyzer composes come from the catalogs, the labels with
them, while the JSON stays English (a machine contract). `knowledge check` fails, one line naming
the file, when a text of the knowledge base lacks a translation or its translation has other
{fields}."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from cli import run_cli
from markupsafe import escape

from vllm_triage.case import Case
from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.i18n import LOCALE_DIR, SIGNATURES_DOMAIN, Language, catalog
from vllm_triage.knowledge import DATA_DIR, KnowledgeBase, load_knowledge
from vllm_triage.knowledge.translations import translation_problems
from vllm_triage.models import CompatVerdict, Diagnosis, Said
from vllm_triage.render.diagnosis import Words, localized, localized_compat, localized_finding
from vllm_triage.render.markdown import diagnosis_markdown
from vllm_triage.report import ReportOptions
from vllm_triage.report import report as make_report
from vllm_triage.ties import check_knowledge
from vllm_triage.versions import CudaVersion, DriverVersion

REPO = Path(__file__).parent.parent
CORPUS = Path(__file__).parent / "data" / "corpus" / "logs"
LOGS = [
    REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log",  # driver_too_old, facts cited
    CORPUS / "kv_cache_insufficient__QwenLM_Qwen3_295.log",  # a signature with its estimate
    CORPUS / "no_failure__vllm-project_vllm_45288.log",  # healthy: a summary composed in code
]
TRANSLATED: tuple[Language, ...] = ("ko", "ja")
_SPACE = re.compile(r"\s+")


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge()


def _signature_texts(kb: KnowledgeBase) -> set[str]:
    """Every English sentence of the signatures and fact checks a reader could be shown."""
    texts: set[str] = set()
    for sig in kb.signatures:
        texts.update([sig.summary, sig.explanation, *sig.next_steps, *sig.avoid])
    for check in kb.fact_checks:
        texts.update([check.summary, *check.next_steps, *check.avoid])
    return texts


def _flat(text: str) -> str:
    """Text without whitespace or box drawing: the terminal wraps lines inside its panels."""
    return _SPACE.sub("", re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻┣┫]", "", text))


def _diagnosis(log: Path) -> Diagnosis:
    return diagnose(DiagnoseOptions(logs=(str(log),)))


@pytest.mark.parametrize("language", TRANSLATED)
@pytest.mark.parametrize("log", LOGS, ids=lambda path: path.stem[:40])
def test_diagnose_speaks_the_language(
    kb: KnowledgeBase, log: Path, language: Language, tmp_path: Path
) -> None:
    english = _diagnosis(log)
    tr = catalog(language)
    expected = localized_finding(english.primary, Words(language))
    # the summary is the catalog's: a signature's own summary translated as it is, a composed one
    # sentence by sentence from its templates
    assert expected.summary != english.primary.summary
    signature = kb.signature((english.primary.rule or "").split(" ")[0])
    if signature is not None:
        assert expected.summary.startswith(tr(signature.summary))
        assert expected.next_steps == [tr(step) for step in signature.next_steps]
        assert expected.avoid == [tr(item) for item in signature.avoid]
    else:
        assert english.primary.wording is not None and english.primary.wording.summary

    case = tmp_path / "case"
    done = run_cli(
        "diagnose", str(log), "--lang", language, "--format", "markdown", "--case", str(case)
    )
    assert done.exit_code == 0, done.stderr
    text = run_cli("diagnose", str(log), "--lang", language, "--explain")
    assert text.exit_code == 0, text.stderr
    saved = (case / "diagnosis.md").read_text(encoding="utf-8")
    for rendered in (done.stdout, saved):
        assert expected.summary in rendered
        for step in expected.next_steps + expected.avoid:
            assert step in rendered
        assert f"### {tr('Next steps')}" in rendered and f"### {tr('Do not')}" in rendered
    assert _flat(expected.summary) in _flat(text.stdout)
    for rendered in (done.stdout, saved, text.stdout):
        shown = _flat(rendered)
        leaked = [t for t in _signature_texts(kb) if _flat(t) in shown]
        assert not leaked, f"{language}: English signature texts rendered: {leaked}"
        assert "Next steps" not in rendered and "Evidence" not in rendered


def test_composed_sentences_keep_their_english_and_translate_after(kb: KnowledgeBase) -> None:
    """A composed summary is its template sentences filled with the same values in every language:
    the English rendering of its wording is the summary the JSON holds."""
    for log in LOGS:
        result = _diagnosis(log)
        for finding in [result.primary, *result.findings]:
            if finding.wording is None:
                continue
            english = localized_finding(finding, Words("en"))
            assert english.summary == finding.summary
            assert " ".join(s.say() for s in finding.wording.summary) == finding.summary
            for language in TRANSLATED:
                said = localized_finding(finding, Words(language)).summary
                for sentence in finding.wording.summary:
                    for name, value in sentence.fields.items():
                        if isinstance(value, str) and value.strip():
                            assert value in said, (name, value, said)


def test_json_is_the_same_in_every_language() -> None:
    shown: dict[str, dict[str, object]] = {}
    for language in ("en", "ko", "ja"):
        done = run_cli("diagnose", str(LOGS[0]), "--lang", language, "--format", "json")
        assert done.exit_code == 0, done.stderr
        data = json.loads(done.stdout)
        data.pop("created_at")
        shown[language] = data
    assert shown["ko"] == shown["en"] == shown["ja"]
    assert "NVIDIA driver is older" in json.dumps(shown["ko"])


def test_unknown_language_is_one_line_and_exit_2() -> None:
    done = run_cli("diagnose", str(LOGS[0]), "--lang", "fr")
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown language 'fr'" in lines[0], done.stderr


def test_the_language_comes_from_the_locale_by_default() -> None:
    done = run_cli("diagnose", str(LOGS[0]), "--format", "markdown", env={"LANG": "ja_JP.UTF-8"})
    assert done.exit_code == 0, done.stderr
    assert f"### {catalog('ja')('Next steps')}" in done.stdout


def test_report_shows_the_diagnosis_in_its_language(tmp_path: Path) -> None:
    case = tmp_path / "case"
    result = _diagnosis(LOGS[2])
    Case(case).save_diagnosis(result, diagnosis_markdown(result))
    make_report(ReportOptions(case=case, lang="ko"))
    page = (case / "report.html").read_text(encoding="utf-8")
    expected = localized(result, "ko").primary
    assert _flat(str(escape(expected.summary))) in _flat(page)
    assert "Nothing failed." not in page


# --- knowledge check: a text without its translations ----------------------------------------------


@pytest.fixture
def data(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def _edit_a_summary(data: Path, new: str) -> str:
    """Give the first signature whose summary sits on one YAML line a new summary; its file."""
    kb = load_knowledge(data)
    for sig in kb.signatures:
        relative = kb.signature_files.get(sig.id, "")
        path = data / relative
        text = path.read_text(encoding="utf-8")
        line = f"    summary: {sig.summary}\n"
        if relative and text.count(line) == 1:
            path.write_text(text.replace(line, f"    summary: {new}\n"), encoding="utf-8")
            return f"data/{relative}"
    raise AssertionError("no signature summary on one line")


@pytest.mark.slow
def test_knowledge_check_fails_on_a_text_without_translations(data: Path) -> None:
    assert translation_problems(load_knowledge(data)) == []
    where = _edit_a_summary(data, "A summary no translator has seen yet.")
    problems = check_knowledge(load_knowledge(data))
    missing = [p for p in problems if " translation " in p]
    assert len(missing) == 2, problems  # Korean and Japanese, one line each
    for problem, language in zip(missing, TRANSLATED, strict=True):
        assert "\n" not in problem
        assert problem.startswith(f"{where}: signatures[")
        assert f"no {language} translation in the signatures catalog" in problem
        assert "'A summary no translator has seen yet.'" in problem


@pytest.mark.slow
def test_knowledge_check_fails_when_a_translation_has_other_fields(
    data: Path, tmp_path: Path
) -> None:
    text = "Driver {driver} is below {needed}."
    where = _edit_a_summary(data, text)
    locale = tmp_path / "locale"
    shutil.copytree(LOCALE_DIR, locale)
    for language, translation in (("ko", "드라이버 {driver}가 {need}보다 낮습니다."), ("ja", None)):
        po_path = LOCALE_DIR / language / "LC_MESSAGES" / f"{SIGNATURES_DOMAIN}.po"
        with po_path.open("rb") as handle:
            po = read_po(handle, locale=language)
        po.add(text, translation or "ドライバー {driver} は {needed} より古いです。")
        with (locale / language / "LC_MESSAGES" / f"{SIGNATURES_DOMAIN}.mo").open("wb") as handle:
            write_mo(handle, po)
    problems = translation_problems(load_knowledge(data), locale)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{where}: signatures[")
    assert "the ko translation has other {fields}" in problems[0]


def test_a_missing_catalog_is_one_line(data: Path, tmp_path: Path) -> None:
    locale = tmp_path / "locale"
    shutil.copytree(LOCALE_DIR, locale)
    (locale / "ja" / "LC_MESSAGES" / f"{SIGNATURES_DOMAIN}.mo").unlink()
    problems = translation_problems(load_knowledge(data), locale)
    assert problems == [
        "i18n/locale/ja/LC_MESSAGES/signatures.mo: no ja catalog of the knowledge base's texts "
        "(run `make i18n` and translate)"
    ]


# ---------------------------------------------------------------------------------------------
# the compat verdict: every sentence said in the reader's language

# One input per way the verdict is composed: native, minor-version compatibility (with and without
# a GPU, a require string met or not), forward compatibility (data-center, uncertain, consumer,
# unknown and unnamed GPU), no package, a New Feature Branch, an architecture CUDA dropped, a GPU
# past its last branch.
COMPAT_INPUTS = [
    ("575.57.08", "12.9", None, None),
    ("575.57.08", "12.9", None, "cuda>=13.0"),
    ("535.183.01", "12.8", None, None),
    ("535.183.01", "12.8", "NVIDIA H100 80GB HBM3", "cuda>=12.8"),
    ("535.183.01", "12.8", "NVIDIA A100-SXM4-80GB", "cuda>=12.2"),
    ("570.86.10", "13.0", "NVIDIA H100 80GB HBM3", None),
    ("570.86.10", "13.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", None),
    ("570.86.10", "13.0", "NVIDIA GeForce RTX 4090", None),
    ("570.86.10", "13.0", "Mystery Accelerator 9000", None),
    ("570.86.10", "13.0", None, None),
    ("575.57.08", "13.0", "NVIDIA H100 80GB HBM3", None),
    ("520.61.05", "12.0", None, None),
    ("580.105.08", "13.0", "Tesla V100-SXM2-32GB", None),
    ("535.183.01", "13.4", "Tesla V100-SXM2-32GB", None),
    ("535.183.01", "13.4", "Tesla P100-PCIE-16GB", None),
    ("450.80.02", "12.9", "Tesla V100-SXM2-32GB", None),
]


def _compat(driver: str, cuda: str, gpu: str | None, require: str | None) -> CompatVerdict:
    from vllm_triage.diagnose.threshold import check_compat

    kb = load_knowledge()
    return check_compat(kb, DriverVersion.parse(driver), CudaVersion.parse(cuda), gpu, require)


def _templates(sentences: list[Said]) -> list[str]:
    """Every template in these sentences, nested ones included."""
    found: list[str] = []
    for sentence in sentences:
        found.append(sentence.text)
        for value in sentence.fields.values():
            if isinstance(value, list):
                found.extend(_templates(value))
    return found


@pytest.mark.parametrize(("driver", "cuda", "gpu", "require"), COMPAT_INPUTS)
def test_every_compat_sentence_has_its_wording_and_translations(
    driver: str, cuda: str, gpu: str | None, require: str | None
) -> None:
    verdict = _compat(driver, cuda, gpu, require)
    wording = verdict.wording
    assert wording is not None
    # the English fields (the JSON contract) are the wording said without a catalog
    assert verdict.explanation == " ".join(s.say() for s in wording.explanation)
    assert verdict.conditions == [s.say() for s in wording.conditions]
    assert verdict.advice == [s.say() for s in wording.advice]
    assert verdict.table_rows == [s.say() for s in wording.table_rows]
    said_all = [*wording.explanation, *wording.conditions, *wording.advice, *wording.table_rows]
    templates = _templates(said_all)
    for language in TRANSLATED:
        tr = catalog(language)
        missing = [t for t in templates if tr(t) == t and not t.startswith(_MACHINE_ONLY)]
        assert not missing, f"{language}: no translation for {missing}"
        said = localized_compat(verdict, Words(language))
        assert said.explanation != verdict.explanation
        for english, shown in zip(
            [*verdict.advice, *verdict.table_rows], [*said.advice, *said.table_rows], strict=True
        ):
            assert english != shown
        for sentence in wording.explanation:  # the values stay as they are
            for value in sentence.fields.values():
                if isinstance(value, str) and value:
                    assert value in said.explanation, (value, said.explanation)


# templates that are a machine key and a value only: the same in every language
_MACHINE_ONLY = ("forward_compat: {", "forward_compat_limit: {", "gpu_arch: {")


@pytest.mark.parametrize("language", TRANSLATED)
def test_compat_speaks_the_language_and_its_json_stays_english(language: Language) -> None:
    flags = ("--driver", "570.86.10", "--cuda", "13.0", "--gpu", "Tesla V100-SXM2-32GB")
    english = run_cli("compat", *flags, "--format", "json")
    shown = run_cli("compat", *flags, "--format", "json", "--lang", language)
    assert english.exit_code == shown.exit_code == 1
    assert json.loads(english.stdout) == json.loads(shown.stdout)
    verdict = CompatVerdict.model_validate_json(english.stdout)
    said = localized_compat(verdict, Words(language))
    for output_format in ("markdown", "text"):
        done = run_cli("compat", *flags, "--format", output_format, "--lang", language)
        assert done.exit_code == 1, done.stderr
        flat = _flat(done.stdout)
        for text in [said.explanation, *said.conditions, *said.advice, *said.table_rows]:
            assert _flat(text) in flat
        for text in [verdict.explanation, *verdict.conditions, *verdict.advice]:
            assert _flat(text) not in flat
        for row in verdict.table_rows:
            assert _flat(row) not in flat
        assert Words(language).label("what_to_do") in done.stdout


@pytest.mark.parametrize("language", TRANSLATED)
def test_a_diagnosis_cites_the_compat_verdict_in_the_language(language: Language) -> None:
    options = DiagnoseOptions(
        logs=(str(LOGS[0]),), driver="575.57.08", image_cuda="13.0", recipe="kimi-k3"
    )
    english = diagnose(options)
    assert english.compat is not None and english.compat.wording is not None
    rendered = diagnosis_markdown(english, language=language)
    said = localized_compat(english.compat, Words(language))
    assert said.explanation in rendered
    assert english.compat.explanation not in rendered  # neither as evidence nor as the verdict
    for step in english.primary.next_steps:
        assert step not in rendered
