"""Driver and CUDA version parsing: examples and hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from vllm_triage.errors import InputError
from vllm_triage.versions import CudaVersion, DriverVersion, VersionError

# ---------------------------------------------------------------------------------------------
# DriverVersion: examples


@pytest.mark.parametrize(
    ("text", "key", "shown"),
    [
        ("575.57.08", (575, 57, 8), "575.57.08"),
        ("580.82.07", (580, 82, 7), "580.82.07"),
        ("535.230.02", (535, 230, 2), "535.230.02"),
        ("570.124", (570, 124, 0), "570.124"),
        ("575", (575, 0, 0), "575"),
        ("r575", (575, 0, 0), "575"),
        ("R575", (575, 0, 0), "575"),
        ("r575.57.08", (575, 57, 8), "575.57.08"),
        ("  575.57.08\n", (575, 57, 8), "575.57.08"),
    ],
)
def test_driver_examples(text: str, key: tuple[int, int, int], shown: str) -> None:
    version = DriverVersion.parse(text)
    assert (version.major, version.minor, version.patch) == key
    assert str(version) == shown
    assert version.branch == f"r{key[0]}"


def test_r_prefix_is_the_same_version() -> None:
    assert DriverVersion.parse("r575") == DriverVersion.parse("575")
    assert DriverVersion.parse("r575") == DriverVersion.parse("575.00.00")
    assert hash(DriverVersion.parse("r575")) == hash(DriverVersion.parse("575.0.0"))
    assert DriverVersion.parse("r575").branch == "r575"


def test_text_does_not_take_part_in_equality() -> None:
    assert DriverVersion.parse("575.57.08") == DriverVersion(575, 57, 8)
    assert DriverVersion.parse("575.57.8") == DriverVersion.parse("575.57.08")


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "abc",
        "575.",
        ".575",
        "575..57",
        "575.57.08.1",
        "575-57-08",
        "575 57",
        "rr575",
        "v575",
        "99",
        "5",
        "10000",
        "575.1234",
        "575.57.1234",
        "-575",
        "575.57.08 beta",
        "575,57",
        "NVIDIA-SMI 575.57.08",
    ],
)
def test_driver_malformed_raises_version_error(text: str) -> None:
    with pytest.raises(VersionError) as info:
        DriverVersion.parse(text)
    assert "\n" not in str(info.value)


def test_driver_none_raises_version_error() -> None:
    with pytest.raises(VersionError):
        DriverVersion.parse(None)  # type: ignore[arg-type]


def test_version_error_is_a_value_error_and_input_error() -> None:
    assert issubclass(VersionError, ValueError)
    assert issubclass(VersionError, InputError)


# ---------------------------------------------------------------------------------------------
# DriverVersion: properties

majors = st.integers(min_value=100, max_value=9999)
parts = st.integers(min_value=0, max_value=999)
driver_tuples = st.tuples(majors, parts, parts)


@given(driver_tuples)
def test_driver_round_trips_through_str(key: tuple[int, int, int]) -> None:
    version = DriverVersion(*key)
    again = DriverVersion.parse(str(version))
    assert again == version
    assert (again.major, again.minor, again.patch) == key


@given(driver_tuples, st.booleans())
def test_driver_round_trips_through_text(key: tuple[int, int, int], prefix: bool) -> None:
    major, minor, patch = key
    text = f"{major}.{minor:02d}.{patch:02d}"
    version = DriverVersion.parse(("r" if prefix else "") + text)
    assert str(version) == text
    assert (version.major, version.minor, version.patch) == key
    assert DriverVersion.parse(str(version)) == version
    assert version.branch == f"r{major}"


@given(driver_tuples, driver_tuples)
def test_driver_orders_like_tuples(a: tuple[int, int, int], b: tuple[int, int, int]) -> None:
    va = DriverVersion.parse("{}.{}.{}".format(*a))
    vb = DriverVersion.parse("{}.{}.{}".format(*b))
    assert (va < vb) == (a < b)
    assert (va <= vb) == (a <= b)
    assert (va > vb) == (a > b)
    assert (va >= vb) == (a >= b)
    assert (va == vb) == (a == b)
    if a == b:
        assert hash(va) == hash(vb)


@given(st.lists(driver_tuples, max_size=20))
def test_driver_sorting_matches_tuple_sorting(keys: list[tuple[int, int, int]]) -> None:
    versions = [DriverVersion(*key) for key in keys]
    assert [v._key() for v in sorted(versions)] == sorted(keys)


@given(st.text())
@example("575.57.08\x00")
@example("\u0663\u0663")
def test_driver_parse_raises_only_version_error(text: str) -> None:
    """Whatever the string, parse returns a version or raises VersionError, never anything else."""
    try:
        version = DriverVersion.parse(text)
    except VersionError:
        return
    assert 100 <= version.major <= 9999
    assert DriverVersion.parse(str(version)) == version


_DRIVER_CHARS = set("0123456789.rR")


@given(st.text().filter(lambda s: any(c not in _DRIVER_CHARS and not c.isspace() for c in s)))
@example("\uff15\uff17\uff15.\uff15\uff17.\uff10\uff18")  # full-width digits
@example("\u0665\u0667\u0665")  # Arabic-Indic digits
def test_driver_rejects_anything_outside_the_grammar(text: str) -> None:
    """A string with any character that is not an ASCII digit, '.', 'r' or space is malformed."""
    with pytest.raises(VersionError):
        DriverVersion.parse(text)


# ---------------------------------------------------------------------------------------------
# CudaVersion: examples


@pytest.mark.parametrize(
    ("text", "expected", "shown"),
    [
        ("13.0", CudaVersion(13, 0), "13.0"),
        ("12.9.1", CudaVersion(12, 9, 1), "12.9.1"),
        ("12.8", CudaVersion(12, 8), "12.8"),
        ("cu130", CudaVersion(13, 0), "13.0"),
        ("cu129", CudaVersion(12, 9), "12.9"),
        ("cu128", CudaVersion(12, 8), "12.8"),
        ("CU126", CudaVersion(12, 6), "12.6"),
        ("cu118", CudaVersion(11, 8), "11.8"),
        ("12080", CudaVersion(12, 8), "12.8"),
        ("13000", CudaVersion(13, 0), "13.0"),
        ("12090", CudaVersion(12, 9), "12.9"),
        ("cuda 12.8", CudaVersion(12, 8), "12.8"),
        ("v12.4", CudaVersion(12, 4), "12.4"),
        (" 13.0 ", CudaVersion(13, 0), "13.0"),
    ],
)
def test_cuda_examples(text: str, expected: CudaVersion, shown: str) -> None:
    version = CudaVersion.parse(text)
    assert version == expected
    assert str(version) == shown


def test_cuda_patch_fields() -> None:
    assert CudaVersion.parse("12.9.1").patch == 1
    assert CudaVersion.parse("13.0").patch is None
    assert CudaVersion.parse("cu130").patch is None
    assert CudaVersion.parse("12.9.1").minor_release == (12, 9)


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (12080, CudaVersion(12, 8)),
        (13000, CudaVersion(13, 0)),
        (12090, CudaVersion(12, 9)),
        (11080, CudaVersion(11, 8)),
        (12020, CudaVersion(12, 2)),
    ],
)
def test_cuda_from_api_int(number: int, expected: CudaVersion) -> None:
    assert CudaVersion.from_api_int(number) == expected
    assert CudaVersion.parse(str(number)) == expected


def test_cuda_ordering_examples() -> None:
    assert CudaVersion.parse("12.9") < CudaVersion.parse("13.0")
    assert CudaVersion.parse("12.9") < CudaVersion.parse("12.9.1")
    assert CudaVersion.parse("cu129") == CudaVersion.parse("12.9")
    assert CudaVersion.parse("12.9") == CudaVersion.parse("12.9.0")
    assert CudaVersion.parse("12.10") > CudaVersion.parse("12.9")


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "13",
        "13.",
        ".0",
        "13.0.0.0",
        "cu1",
        "cu13",
        "cu13000",
        "cuda",
        "6.0",
        "31.0",
        "1208",
        "100000",
        "0",
        "abc",
        "13,0",
        "13.0-rc",
        "cu130x",
        "13.0 beta",
        "12.9.1234",
    ],
)
def test_cuda_malformed_raises_version_error(text: str) -> None:
    with pytest.raises(VersionError) as info:
        CudaVersion.parse(text)
    assert "\n" not in str(info.value)


def test_cuda_none_raises_version_error() -> None:
    with pytest.raises(VersionError):
        CudaVersion.parse(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# CudaVersion: properties


@given(st.integers(min_value=10, max_value=20), st.integers(min_value=0, max_value=9))
def test_cuda_api_int_encoding(major: int, minor: int) -> None:
    assert CudaVersion.from_api_int(1000 * major + 10 * minor) == CudaVersion(major, minor)
    assert CudaVersion.parse(str(1000 * major + 10 * minor)) == CudaVersion(major, minor)


@given(st.integers(min_value=10, max_value=20), st.integers(min_value=0, max_value=9))
def test_cuda_tag_encoding(major: int, minor: int) -> None:
    assert CudaVersion.parse(f"cu{major}{minor}") == CudaVersion(major, minor)


cuda_versions = st.builds(
    CudaVersion,
    st.integers(min_value=7, max_value=30),
    st.integers(min_value=0, max_value=99),
    st.one_of(st.none(), st.integers(min_value=0, max_value=999)),
)


@given(cuda_versions)
def test_cuda_round_trips_through_str(version: CudaVersion) -> None:
    again = CudaVersion.parse(str(version))
    assert again == version
    assert again.patch == version.patch


@given(cuda_versions, cuda_versions)
@pytest.mark.slow
def test_cuda_orders_like_tuples(a: CudaVersion, b: CudaVersion) -> None:
    ka = (a.major, a.minor, a.patch or 0)
    kb = (b.major, b.minor, b.patch or 0)
    assert (a < b) == (ka < kb)
    assert (a == b) == (ka == kb)
    assert (a >= b) == (ka >= kb)
    if ka == kb:
        assert hash(a) == hash(b)


@given(st.text())
@example("\u0661\u0663.\u0660")
def test_cuda_parse_raises_only_version_error(text: str) -> None:
    try:
        version = CudaVersion.parse(text)
    except VersionError:
        return
    assert 7 <= version.major <= 30
    assert CudaVersion.parse(str(version)) == version


_CUDA_CHARS = set("0123456789.cCuUdDaAvV")


@given(st.text().filter(lambda s: any(c not in _CUDA_CHARS and not c.isspace() for c in s)))
@example("\uff11\uff13.\uff10")  # full-width digits
@example("\u0661\u0663.\u0660")  # Arabic-Indic digits
def test_cuda_rejects_anything_outside_the_grammar(text: str) -> None:
    with pytest.raises(VersionError):
        CudaVersion.parse(text)
