"""The knowledge base loads, validates, and names the file and row of any malformed fact."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli import Result, run_cli
from fakeserver import FakeServer

from vllm_triage.errors import InputError
from vllm_triage.knowledge import DATA_DIR, KnowledgeError, load_knowledge
from vllm_triage.launch import LaunchArgs, parse_launch_command
from vllm_triage.prefix import PrefixCheckOptions, prefix_check
from vllm_triage.prefix.check import check_launch
from vllm_triage.ties import check_knowledge


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


@pytest.mark.slow
def test_packaged_knowledge_is_sound():
    kb = load_knowledge(cached=False)  # validated from the files, as `knowledge check` does
    assert check_knowledge(kb) == []
    assert {row.cuda_version.major for row in kb.toolkits} == {11, 12, 13}
    assert "kimi-k3" in kb.recipes


def test_every_fact_has_source_date_and_certainty(kb):
    rows = [*kb.toolkits, *kb.families, *kb.branches, *kb.gpus, *kb.signatures, *kb.fact_checks]
    rows += [*kb.prefix.shapes, *kb.prefix.fixes, *kb.redaction.rules, *kb.recipes.values()]
    rows += kb.gpu_limits
    rows += [kb.forward_compat, kb.images, kb.phases, kb.vllm_args, kb.vllm_metrics]
    for row in rows:
        assert row.source and row.as_of, row
        assert row.certainty in {"primary", "secondary", "inferred", "memory"}, row


@pytest.mark.parametrize(
    ("relative", "old", "where"),
    [
        ("signatures/gpu.yaml", "    certainty: primary\n", r"gpu\.yaml rule [0-9]+ \(VT203\)"),
        ("phases.yaml", "certainty: secondary\n", r"phases\.yaml"),
        ("fact_checks.yaml", "    certainty: secondary\n", r"fact_checks\.yaml check 6 \(VF006\)"),
        (
            "prefix_shapes.yaml",
            "    certainty: primary\n",
            r"prefix_shapes\.yaml shape 1 \(VP001\)",
        ),
    ],
)
def test_certainty_is_never_assumed(data_copy, relative, old, where):
    """A fact without its certainty is refused, naming the file and row (no default primary)."""
    path = data_copy / relative
    path.write_text(path.read_text().replace(old, "", 1))
    with pytest.raises(KnowledgeError, match=where + r".*certainty: Field required"):
        load_knowledge(data_copy)


def test_table_covers_every_release_from_11_0_to_13(kb):
    releases = {(row.cuda_version.major, row.cuda_version.minor) for row in kb.toolkits}
    expected = {(11, m) for m in range(9)} | {(12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)}
    expected |= {(13, m) for m in range(4)}
    assert expected <= releases


def test_family_minimums(kb):
    assert {f.major: str(f.min_linux_driver) for f in kb.families} == {
        11: "450.80.02",
        12: "525.60.13",
        13: "580",
    }


def test_kimi_recipe_facts(kb):
    recipe = kb.recipes["kimi-k3"]
    assert recipe.min_vllm_version == "0.27.0"
    assert str(recipe.image_cuda) == "13.0"
    assert recipe.cuda_variants_available == ["13.0"]
    assert recipe.min_driver_branch == "r580"
    assert {f.flag for f in recipe.required_flags} == {"--trust-remote-code"}
    assert recipe.default_profile == "blackwell"
    profiles = {p.id: p for p in recipe.profiles}
    assert {p.mode for p in profiles.values()} == {"aggregated", "decode"}
    flags = {name: {f.flag for f in kb.recipe_flags(recipe, name)} for name in profiles}
    # prefix caching: explicit in the aggregated Blackwell profile, off on the PD decode side
    assert "--enable-prefix-caching" in flags["blackwell"]
    assert "--no-enable-prefix-caching" in flags["pd-decode"]
    assert "--enable-prefix-caching" not in flags["pd-decode"] | flags["hopper"]
    assert all("--trust-remote-code" in named for named in flags.values())
    assert kb.recipe_flags(recipe) == kb.recipe_flags(recipe, "blackwell")
    assert recipe.all2all_backends.rdma == "deepep_v2"
    assert recipe.all2all_backends.nvlink == "flashinfer_nvlink_one_sided"


def test_malformed_csv_row_names_file_and_row(data_copy):
    path = data_copy / "cuda_toolkits.csv"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[2], "five-seventy", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(KnowledgeError, match=r"cuda_toolkits\.csv row 4: min_linux_driver"):
        load_knowledge(data_copy)


def test_wrong_column_count_is_reported(data_copy):
    path = data_copy / "gpus.csv"
    path.write_text(path.read_text() + "Broken,^X$,8.0\n")
    with pytest.raises(KnowledgeError, match=r"gpus\.csv row [0-9]+: wrong number of columns"):
        load_knowledge(data_copy)


def test_non_portable_pattern_is_refused(data_copy):
    path = data_copy / "signatures" / "memory.yaml"
    path.write_text(path.read_text().replace('"CUDA out of memory"', '"CUDA out of memory \\\\d+"'))
    with pytest.raises(KnowledgeError, match=r"memory\.yaml rule 1 \(VT301\).*grep"):
        load_knowledge(data_copy)


def test_invalid_yaml_names_the_line(data_copy):
    path = data_copy / "recipes" / "kimi-k3.yaml"
    path.write_text(path.read_text() + "\n  broken: [unclosed\n")
    with pytest.raises(KnowledgeError, match=r"kimi-k3\.yaml line [0-9]+: not valid YAML"):
        load_knowledge(data_copy)


def test_duplicate_signature_ids_are_refused(data_copy):
    path = data_copy / "signatures" / "api.yaml"
    path.write_text(path.read_text().replace("id: VT611", "id: VT601"))
    with pytest.raises(KnowledgeError, match="VT601 is defined twice"):
        load_knowledge(data_copy)


@pytest.mark.slow
def test_check_reports_an_example_that_no_longer_matches(data_copy):
    path = data_copy / "signatures" / "gpu.yaml"
    path.write_text(path.read_text().replace('"No CUDA GPUs are available"', '"No GPUs at all"', 1))
    problems = check_knowledge(load_knowledge(data_copy))
    assert problems == [
        "data/signatures/gpu.yaml VT203 no-cuda-gpus-available: positive example not matched: "
        "'RuntimeError: No CUDA GPUs are available'"
    ]


def test_check_reports_a_prefix_shape_against_its_examples(data_copy):
    path = data_copy / "prefix_shapes.yaml"
    path.write_text(
        path.read_text().replace(
            'negative: ["version 1.2.3-4"]', 'negative: ["4f1c2a9e-8b7d-4e3f-9a21-0c5d6e7f8a9b"]'
        )
    )
    problems = check_knowledge(load_knowledge(data_copy))
    assert problems == [
        "data/prefix_shapes.yaml VP001 uuid: negative example matched: "
        "'4f1c2a9e-8b7d-4e3f-9a21-0c5d6e7f8a9b'"
    ]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("(?i:\\b(?:today is", "(?i)\\b(?:(?:today is", "use scoped flags"),
        ("name: date\n", "name: uuid\n", "shape name uuid defined twice"),
        ("kind: timestamp", "kind: clock", "kind: Input should be 'timestamp' or 'random_id'"),
        ("  - id: random_id\n", "  - id: timestamp\n", "fix timestamp defined twice"),
    ],
)
def test_malformed_prefix_shapes_are_refused(data_copy, old, new, message):
    path = data_copy / "prefix_shapes.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(KnowledgeError, match=r"prefix_shapes\.yaml.*" + re.escape(message)):
        load_knowledge(data_copy)


@pytest.mark.slow
def test_cli_knowledge_check_and_show():
    def run(*args: str) -> Result:
        return run_cli("knowledge", *args)

    done = run("check")
    assert done.exit_code == 0 and done.stdout.startswith("ok:")
    shown = run("show", "VT101")
    assert shown.exit_code == 0 and "torch-driver-too-old" in shown.stdout
    assert "580.65.06" in run("show", "cuda").stdout
    assert "vllm:gpu_prefix_cache_hits" in run("show", "metrics").stdout
    assert "VF004" in run("show", "fact-checks").stdout
    unknown = run("show", "nonsense")
    assert unknown.exit_code == 2 and "unknown topic" in unknown.stderr


def test_every_fact_check_has_a_condition_and_every_condition_has_data(kb) -> None:
    from vllm_triage.diagnose.facts import known_check_ids

    assert {check.id for check in kb.fact_checks} == known_check_ids()
    assert all(check.source.startswith("https://") for check in kb.fact_checks)


def test_launch_table_fields_exist(kb) -> None:
    from vllm_triage.launch import LaunchArgs

    for argument in kb.vllm_args.arguments:
        assert argument.field in LaunchArgs.model_fields, argument.flag
    for field in kb.vllm_args.environment.values():
        assert field in LaunchArgs.model_fields


# --- the 2026-12-01 audit: rows added or corrected, each with its source and certainty --------


def test_audited_cuda_releases(kb):
    rows = {str(row.cuda_version): row for row in kb.toolkits}
    assert str(rows["13.0.3"].min_linux_driver) == "580.126.20"
    assert rows["13.0.3"].certainty == "secondary" and "cuda_13.0.3" in rows["13.0.3"].source_note
    for release in ("13.4.2", "13.5.0"):
        assert rows[release].min_linux_driver is None, release
        assert rows[release].source.startswith("https://") and rows[release].certainty
    assert rows["13.4.1"].certainty == "inferred"
    assert {rows["13.3.0"].certainty, rows["13.3.1"].certainty} == {"secondary"}


def test_audited_driver_branches(kb):
    r575, r590, r615 = kb.branch(575), kb.branch(590), kb.branch(615)
    assert r575 is not None and r590 is not None and r615 is not None
    assert r575.type == "new_feature" and r575.type_certainty == "secondary"
    assert "end of life" in r575.notes.lower()
    assert (r590.type, r590.type_certainty) == ("new_feature", "secondary")
    assert (r615.type, r615.type_certainty) == ("new_feature", "inferred")
    for branch in kb.branches:
        assert branch.type_certainty_or_row in {"primary", "secondary", "inferred", "memory"}
        if branch.type_certainty not in (None, "primary"):
            assert branch.type_source, branch.branch


def test_audited_image_defaults(kb):
    defaults = {row.since: row for row in kb.images.default_cuda_by_release}
    assert str(defaults["0.9.0"].cuda) == "12.8" and defaults["0.9.0"].certainty == "primary"
    assert "0.10.0" not in defaults
    assert defaults["0.12.0"].certainty == "secondary"


def test_a_recipe_default_profile_must_be_one_of_its_profiles(data_copy):
    path = data_copy / "recipes" / "kimi-k3.yaml"
    path.write_text(path.read_text().replace("default_profile: blackwell", "default_profile: x"))
    with pytest.raises(KnowledgeError, match=r"kimi-k3\.yaml.*default_profile 'x' is not one"):
        load_knowledge(data_copy)


def test_an_unknown_profile_is_one_line(kb):
    with pytest.raises(InputError, match=r"^recipe kimi-k3 has no profile 'decode' \(known: "):
        kb.recipe_profile(kb.recipes["kimi-k3"], "decode")


# --- the recipe's profiles in the checks that read its flags ----------------------------------


def _launch(text: str) -> LaunchArgs:
    return parse_launch_command(text)


def test_launch_check_follows_the_profile():
    off = _launch("vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching --trust-remote-code")
    decode = check_launch(off, profile="pd-decode")
    assert decode.status == "disabled" and not decode.problem and decode.fix is None
    assert decode.profile == "pd-decode" and "pd-decode" in decode.summary
    default = check_launch(off)  # the default profile (blackwell) asks for it
    assert default.status == "disabled" and default.problem and default.profile == "blackwell"
    assert "pd-decode profile" in default.summary
    plain = _launch("vllm serve moonshotai/Kimi-K3 --trust-remote-code")
    assert check_launch(plain).status == "required_not_given"
    hopper = check_launch(plain, profile="hopper")
    assert hopper.status == "not_given" and not hopper.problem
    decode_plain = check_launch(plain, profile="pd-decode")
    assert decode_plain.status == "not_given" and not decode_plain.problem
    assert decode_plain.fix == "Give --no-enable-prefix-caching as the recipe does."


def test_prefix_check_takes_the_profile():
    requests = [
        {"messages": [{"role": "user", "content": f"question {n} " * 30}]} for n in range(2)
    ]
    launch = "vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching"
    report = prefix_check(PrefixCheckOptions(requests, launch=launch, profile="pd-decode"))
    assert report.launch is not None and not report.launch.problem


def test_validate_profile_needs_a_known_recipe_profile(tmp_path: Path):
    alone = run_cli("validate", "http://127.0.0.1:9", "--profile", "pd-decode")
    assert alone.exit_code == 2 and "give --recipe too" in alone.stderr
    unknown = run_cli(
        "validate", "http://127.0.0.1:9", "--recipe", "kimi-k3", "--profile", "decode"
    )
    assert unknown.exit_code == 2
    assert unknown.stderr.strip().endswith(
        "has no profile 'decode' (known: blackwell, hopper, pd-decode)"
    )


@pytest.mark.slow
def test_validate_same_prefix_on_the_decode_side(tmp_path: Path):
    launch = tmp_path / "launch.sh"
    launch.write_text("vllm serve moonshotai/Kimi-K3 --no-enable-prefix-caching\n")
    common = ["--launch-cmd", str(launch), "--recipe", "kimi-k3", "--max-concurrency", "1"]
    with FakeServer("no_metrics", model="moonshotai/Kimi-K3") as server:
        decode = run_cli(
            "validate", server.url, *common, "--profile", "pd-decode", "--keep-going",
            "--case", str(tmp_path / "decode"), "--format", "json",
        )  # fmt: skip
        default = run_cli(
            "validate", server.url, *common, "--keep-going",
            "--case", str(tmp_path / "default"), "--format", "json",
        )  # fmt: skip
    rungs = {r["name"]: r for r in json.loads(decode.stdout)["rungs"]}
    assert rungs["same_prefix"]["status"] == "skipped", rungs["same_prefix"]
    assert "pd-decode profile" in rungs["same_prefix"]["reason"]
    rungs = {r["name"]: r for r in json.loads(default.stdout)["rungs"]}
    assert rungs["same_prefix"]["status"] == "failed"
    assert "disabled" in rungs["same_prefix"]["reason"]
