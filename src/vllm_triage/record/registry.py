"""A registry's tag list through the OCI distribution API: GET /v2/<name>/tags/list, with the
anonymous token flow public registries use (a 401 whose WWW-Authenticate names a Bearer realm:
a token is fetched from the realm without credentials, then the list again with it), following
the Link header's pages.

Everything that comes from the registry is hostile input: the whole exchange ends by one total
deadline (every socket operation clamped to it, vllm_triage.deadline_http), every body is
read within a cap, pages and tags are counted, and the token is kept in memory only. Any failure
is a RegistryError with one line saying what went wrong; the caller reports the trigger as
unknown, never as an error of the command.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from urllib.parse import urljoin, urlsplit

import httpx

from vllm_triage.deadline_http import DeadlineTransport, deadline_scope
from vllm_triage.errors import InputError
from vllm_triage.safejson import parse_json
from vllm_triage.validate.body import BodyError, read_body

DEFAULT_DEADLINE_S = 20.0
MAX_PAGE_BYTES = 4 * 1024**2
MAX_TOKEN_BYTES = 64 * 1024
MAX_PAGES = 50
MAX_TAGS = 100_000
PAGE_SIZE = 1000
_CHALLENGE = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_LINK = re.compile(r"<([^>]+)>\s*;\s*rel=\"?next\"?")
_USER_AGENT = "vllm-triage (record check)"


class RegistryError(Exception):
    """The tag list could not be read (unreachable, refused, not the API's answer)."""


def check_registry_url(url: str) -> str:
    """A registry's base URL as given (--registry): http(s)://host[:port][/prefix], no user part;
    InputError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"--registry {url!r}: give the registry's URL, e.g. https://registry-1.docker.io"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InputError(f"--registry {url!r}: no user, query or fragment in the registry's URL")
    return url.strip().rstrip("/")


def list_tags(
    registry: str,
    repository: str,
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
    client: httpx.Client | None = None,
) -> list[str]:
    """Every tag of `repository` at `registry` (all pages, up to the caps)."""
    deadline = time.monotonic() + deadline_s
    own = client is None
    client = client or httpx.Client(
        transport=DeadlineTransport(httpx.Limits(max_connections=2)),
        timeout=httpx.Timeout(deadline_s),
        follow_redirects=True,
        max_redirects=3,
        headers={"User-Agent": _USER_AGENT, "Accept": "application/json"},
        trust_env=True,
    )
    try:
        with deadline_scope(deadline):
            return list(_tags(client, registry.rstrip("/"), repository))
    except httpx.TimeoutException:
        raise RegistryError(f"no answer within {deadline_s:g} s") from None
    except httpx.HTTPError as exc:
        raise RegistryError(f"{type(exc).__name__}: {_short(str(exc))}") from None
    except BodyError as exc:
        raise RegistryError(str(exc)) from None
    finally:
        if own:
            client.close()


def _tags(client: httpx.Client, registry: str, repository: str) -> Iterator[str]:
    url: str | None = f"{registry}/v2/{repository}/tags/list?n={PAGE_SIZE}"
    token: str | None = None
    count = 0
    for _ in range(MAX_PAGES):
        if url is None:
            return
        status, body, headers = _get(client, url, token)
        if status == 401 and token is None:
            token = _token(client, headers.get("www-authenticate", ""), repository)
            status, body, headers = _get(client, url, token)
        if status != 200:
            raise RegistryError(f"GET {_path(url)} answered HTTP {status}")
        document = _json(body, "the tag list")
        tags = document.get("tags") if isinstance(document, dict) else None
        if tags is None and isinstance(document, dict) and "tags" in document:
            tags = []  # a repository without tags answers "tags": null
        if not isinstance(tags, list):
            raise RegistryError(f"GET {_path(url)}: not a tag list (no 'tags' array)")
        for tag in tags:
            if isinstance(tag, str):
                count += 1
                if count > MAX_TAGS:
                    raise RegistryError(f"more than {MAX_TAGS} tags; not read further")
                yield tag
        url = _next(url, headers.get("link", ""))
    raise RegistryError(f"more than {MAX_PAGES} pages of tags; not read further")


def _get(client: httpx.Client, url: str, token: str | None) -> tuple[int, bytes, httpx.Headers]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            return response.status_code, b"", response.headers
        return 200, read_body(response, MAX_PAGE_BYTES, f"GET {_path(url)}"), response.headers


def _token(client: httpx.Client, challenge: str, repository: str) -> str:
    """A token from the challenge's realm, asked for without credentials (anonymous pull)."""
    if not challenge.lower().startswith("bearer "):
        raise RegistryError("the registry asks for credentials (no anonymous Bearer token flow)")
    params = {key.lower(): value for key, value in _CHALLENGE.findall(challenge)}
    realm = params.get("realm", "")
    if urlsplit(realm).scheme not in ("http", "https"):
        raise RegistryError(f"the registry's token realm {realm[:80]!r} is not an http(s) URL")
    query = {"scope": params.get("scope") or f"repository:{repository}:pull"}
    if params.get("service"):
        query["service"] = params["service"]
    with client.stream("GET", realm, params=query) as response:
        if response.status_code != 200:
            raise RegistryError(f"the token realm answered HTTP {response.status_code}")
        body = read_body(response, MAX_TOKEN_BYTES, "the token")
    document = _json(body, "the token")
    token: object = None
    if isinstance(document, dict):
        token = document.get("token") or document.get("access_token")
    if not isinstance(token, str) or not token or not token.isprintable() or " " in token:
        raise RegistryError("the token realm answered no usable token")
    return token


def _json(body: bytes, what: str) -> object:
    try:
        return parse_json(body, what, max_bytes=MAX_PAGE_BYTES)
    except InputError as exc:
        raise RegistryError(str(exc)) from None


def _next(url: str, link: str) -> str | None:
    """The next page the Link header names (relative to this page), on the same host."""
    found = _LINK.search(link)
    if found is None:
        return None
    following: str = urljoin(url, str(found.group(1)))
    here, there = urlsplit(url), urlsplit(following)
    if (here.scheme, here.netloc) != (there.scheme, there.netloc):
        raise RegistryError("the next page of tags is on another host; not followed")
    return following


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path[:120]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text[:200]


def matching(
    tags: list[str], exact: list[str], pattern: str | None, min_version: str | None
) -> list[str]:
    """The tags that meet a trigger: one of `exact`, or matching `pattern` whole with its
    `version` group at least `min_version`."""
    compiled = re.compile(pattern) if pattern else None
    floor = _version(min_version) if min_version else None
    found = []
    for tag in tags:
        if tag in exact:
            found.append(tag)
            continue
        if compiled is None:
            continue
        match = compiled.fullmatch(tag)
        if match is None:
            continue
        if floor is not None:
            version = match.groupdict().get("version")
            if version is None or _version(version) < floor:
                continue
        found.append(tag)
    return found


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", text))
