"""Secrets `validate` holds: credentials in the server URL (`http://user:password@host`) and the API
key. They go into the requests (basic auth, bearer token) and never into anything the tool writes
or prints: the URL is shown without its user part, and text a server sends back (an error page
that echoes the Authorization header) has every form of them masked.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

MASK = "[redacted]"
# Shorter values are not masked: replacing every "ab" in a page would garble it for no secrecy.
_MIN_SECRET = 4
# The user part of any URL-like string: after "scheme://" (or the start), up to the last "@"
# before the query or fragment, so even a password with a raw "/" is caught.
Model = TypeVar("Model", bound=BaseModel)
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)?[^?#]*@")


def public_url(url: str) -> str:
    """The URL without `user:password@`, for anything written or printed (works on any string)."""
    return _USERINFO.sub(lambda match: match.group("scheme") or "", url, count=1)


class Credentials:
    """Basic-auth credentials from a URL and a bearer API key, and every form they may be seen in."""

    def __init__(self, basic: tuple[str, str] | None = None, api_key: str | None = None) -> None:
        self.basic = basic
        self.api_key = api_key
        secrets = [api_key] if api_key else []
        if basic is not None:  # the password, and the user:password a Basic header encodes
            secrets += [basic[1], ":".join(basic)] if basic[1] else []
        forms = {form for secret in secrets for form in _forms_of(secret)}
        self._forms = sorted(forms, key=len, reverse=True)

    @classmethod
    def split(cls, url: str, api_key: str | None = None) -> tuple[str, Credentials]:
        """The URL without its user part, and the credentials (that user part, the API key)."""
        parsed = httpx.URL(url)
        if not parsed.userinfo:
            return url, cls(None, api_key)
        basic = (parsed.username, parsed.password)
        return str(parsed.copy_with(username=None, password=None)), cls(basic, api_key)

    @property
    def auth(self) -> httpx.BasicAuth | None:
        return httpx.BasicAuth(*self.basic) if self.basic else None

    def mask(self, text: str) -> str:
        """The text with every known form of every secret replaced by MASK."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def mask_model(self, model: Model) -> Model:
        """The model with every string in it masked: string by string, so a secret that looks
        like JSON syntax cannot break the document."""
        if not self._forms:
            return model
        return type(model).model_validate(self._mask_data(model.model_dump(mode="json")))

    def _mask_data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(str(k)): self._mask_data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._mask_data(item) for item in value]
        return value


def _forms_of(secret: str) -> set[str]:
    """The secret as it may appear: raw, percent-encoded, JSON-escaped, base64."""
    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        json.dumps(secret)[1:-1],
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
    }
    return {form for form in forms if len(form) >= _MIN_SECRET}
