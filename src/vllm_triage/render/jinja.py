"""The jinja2 set-up shared by every markdown template (imported only when one is rendered).

Compiling a template costs more than rendering it, and `diagnose` renders diagnosis.md on every
run, so compiled templates are kept in the user's cache folder (vllm_triage.usercache, read back
only when private to the user) under the template source's checksum: an edited template, another
jinja2 or another Python compiles again.
"""

from __future__ import annotations

from functools import cache

from jinja2 import BytecodeCache, Environment, PackageLoader, StrictUndefined
from jinja2.bccache import Bucket

from vllm_triage.usercache import read_cached, write_cached

_MAX_TEMPLATE_BYTES = 4 << 20
# Templates of every installed version of the tool share the folder; the newest are kept.
_KEPT_TEMPLATES = 64


class UserCacheTemplates(BytecodeCache):
    """jinja2's bytecode cache in the user's cache folder."""

    def load_bytecode(self, bucket: Bucket) -> None:
        payload = read_cached(_file_name(bucket), bucket.checksum, _MAX_TEMPLATE_BYTES)
        if payload is not None:
            bucket.bytecode_from_string(payload)  # jinja2 checks its version and the source

    def dump_bytecode(self, bucket: Bucket) -> None:
        payload = bucket.bytecode_to_string()
        write_cached(_file_name(bucket), bucket.checksum, payload, keep_newest=_KEPT_TEMPLATES)


def _file_name(bucket: Bucket) -> str:
    return f"template-{bucket.key}.jinja"


def table_cell(text: object) -> str:
    """A value as one markdown table cell: one line, no column break, no code span break."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


@cache
def markdown_environment() -> Environment:
    """The environment of the templates in vllm_triage/render/templates."""
    env = Environment(
        loader=PackageLoader("vllm_triage.render", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=UserCacheTemplates(),
    )
    env.filters["cell"] = table_cell
    return env
