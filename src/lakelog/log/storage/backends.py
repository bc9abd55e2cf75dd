"""Turn a storage URL plus options into an obstore store.

Kept apart from `store.py` so that the one place that knows URL schemes, environment
variables and obstore's config names is small and testable on its own.

Precedence for every setting: keyword option > URL query parameter > environment > obstore's
own defaults (which also read the usual `AWS_*` variables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from obstore.exceptions import BaseError
from obstore.store import LocalStore, MemoryStore, S3Store, from_url

if TYPE_CHECKING:
    from obstore.store import ClientConfig, ObjectStore, RetryConfig

__all__ = ["SECRET_OPTIONS", "RetryPolicy", "open_store", "redact_url", "s3_options"]

SECRET_OPTIONS = frozenset({"secret_access_key", "session_token"})
_S3_OPTIONS = frozenset(
    {"endpoint", "region", "access_key_id", "path_style", "allow_http"} | SECRET_OPTIONS
)
_RETRY_OPTIONS = frozenset({"max_retries", "retry_timeout_s", "init_backoff_s", "max_backoff_s"})
_CLIENT_OPTIONS = frozenset({"timeout_s", "connect_timeout_s"})
_ALL_OPTIONS = _S3_OPTIONS | _RETRY_OPTIONS | _CLIENT_OPTIONS
_BOOL_OPTIONS = frozenset({"path_style", "allow_http"})
_INT_OPTIONS = frozenset({"max_retries"})
_FLOAT_OPTIONS = frozenset(_RETRY_OPTIONS - _INT_OPTIONS) | _CLIENT_OPTIONS
# Checked in this order; the first one set wins.
_ENV = {
    "endpoint": ("LAKELOG_S3_ENDPOINT",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter, done by obstore inside each HTTP request.

    obstore retries 5xx answers, connection errors and timeouts of safe requests, so no
    second retry loop is needed in Python. The defaults are tighter than obstore's
    (10 retries, 3 minutes) because a produce request waits on the upload: giving up
    within ~20 s lets the client retry on its own before `delivery.timeout.ms`.
    """

    max_retries: int = 5
    retry_timeout_s: float = 20.0
    init_backoff_s: float = 0.05
    max_backoff_s: float = 2.0

    def to_obstore(self) -> RetryConfig:
        return {
            "max_retries": self.max_retries,
            "retry_timeout": timedelta(seconds=self.retry_timeout_s),
            "backoff": {
                "init_backoff": timedelta(seconds=self.init_backoff_s),
                "max_backoff": timedelta(seconds=self.max_backoff_s),
                "base": 2,
            },
        }


def open_store(url: str, options: Mapping[str, Any]) -> ObjectStore:
    """Build the obstore store for `url` (file://, memory://, s3://, gs://, az://).

    Any configuration problem, ours or obstore's, is a `ValueError` naming the URL.
    """
    try:
        return _open(url, options)
    except BaseError as exc:
        raise ValueError(f"cannot open storage {redact_url(url)}: {exc}") from exc


def _open(url: str, options: Mapping[str, Any]) -> ObjectStore:
    parts = urlsplit(url)
    merged = {**_coerce_all(dict(parse_qsl(parts.query))), **_coerce_all(dict(options))}
    scheme = parts.scheme.lower()
    if scheme == "file":
        _only(merged, frozenset(), url)
        return _local(parts.netloc, parts.path, url)
    if scheme == "memory":
        _only(merged, frozenset(), url)
        return MemoryStore()
    retry = _retry_policy(merged).to_obstore()
    if scheme in ("s3", "s3a"):
        _only(merged, _ALL_OPTIONS, url)
        return _s3(parts.netloc, unquote(parts.path).strip("/"), merged, retry)
    if scheme in ("gs", "az", "abfs", "abfss", "azure"):
        # Credentials and endpoints come from obstore's own environment variables.
        _only(merged, _RETRY_OPTIONS | _CLIENT_OPTIONS, url)
        base_url = parts._replace(query="").geturl()
        return from_url(base_url, retry_config=retry, client_options=_client(merged, None))
    raise ValueError(f"unsupported storage URL scheme {parts.scheme!r} in {redact_url(url)}")


def redact_url(url: str) -> str:
    """The URL with secret query parameters masked, for logs and reprs."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = [
        f"{name}=***" if name in SECRET_OPTIONS else f"{name}={value}"
        for name, value in parse_qsl(parts.query)
    ]
    return parts._replace(query="&".join(pairs)).geturl()


def _local(netloc: str, path: str, url: str) -> LocalStore:
    if netloc not in ("", "localhost"):
        raise ValueError(f"file:// URL must name a local absolute path: {url}")
    root = Path(unquote(path))
    if not root.is_absolute() or str(root) == "/":
        raise ValueError(f"file:// URL must name an absolute directory below /: {url}")
    root.mkdir(parents=True, exist_ok=True)
    return LocalStore(root)


def s3_options(url: str) -> dict[str, Any]:
    """An `s3://` URL's settings as the store sees them (URL query, then environment), for
    whoever must hand the same store to another engine (the Iceberg REST catalog)."""
    parts = urlsplit(url)
    return _with_env(_coerce_all(dict(parse_qsl(parts.query))))


def _with_env(opts: dict[str, Any]) -> dict[str, Any]:
    for name, env_names in _ENV.items():
        if name not in opts:
            value = next((os.environ[e] for e in env_names if os.environ.get(e)), None)
            if value is not None:
                opts[name] = value
    return opts


def _s3(bucket: str, prefix: str, opts: dict[str, Any], retry: RetryConfig) -> S3Store:
    if not bucket:
        raise ValueError("s3:// URL needs a bucket: s3://bucket/optional/prefix")
    _with_env(opts)
    config: dict[str, Any] = {
        name: opts[name]
        for name in ("endpoint", "region", "access_key_id", "secret_access_key", "session_token")
        if name in opts
    }
    if "path_style" in opts:
        config["virtual_hosted_style_request"] = not opts["path_style"]
    endpoint = str(opts.get("endpoint", ""))
    allow_http = opts.get("allow_http", endpoint.lower().startswith("http://"))
    return S3Store(
        bucket,
        prefix=prefix or None,
        config=config,  # type: ignore[arg-type]
        client_options=_client(opts, allow_http),
        retry_config=retry,
    )


def _client(opts: Mapping[str, Any], allow_http: bool | None) -> ClientConfig:
    client: ClientConfig = {}
    if allow_http is not None:
        client["allow_http"] = bool(allow_http)
    if "timeout_s" in opts:
        client["timeout"] = timedelta(seconds=opts["timeout_s"])
    if "connect_timeout_s" in opts:
        client["connect_timeout"] = timedelta(seconds=opts["connect_timeout_s"])
    return client


def _retry_policy(opts: Mapping[str, Any]) -> RetryPolicy:
    defaults = RetryPolicy()
    return RetryPolicy(
        max_retries=opts.get("max_retries", defaults.max_retries),
        retry_timeout_s=opts.get("retry_timeout_s", defaults.retry_timeout_s),
        init_backoff_s=opts.get("init_backoff_s", defaults.init_backoff_s),
        max_backoff_s=opts.get("max_backoff_s", defaults.max_backoff_s),
    )


def _only(opts: Mapping[str, Any], allowed: frozenset[str], url: str) -> None:
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise ValueError(f"storage options {unknown} do not apply to {redact_url(url)}")


def _coerce_all(raw: dict[str, Any]) -> dict[str, Any]:
    """Typed values for known names (query strings arrive as text); unknown names kept."""
    return {name: _coerce(name, value) for name, value in raw.items()}


def _coerce(name: str, value: Any) -> Any:
    if name in _BOOL_OPTIONS and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"storage option {name} must be a boolean, got {value!r}")
    if name in _INT_OPTIONS:
        number = int(value)
        if number < 0:
            raise ValueError(f"storage option {name} must be >= 0, got {value!r}")
        return number
    if name in _FLOAT_OPTIONS:
        number = float(value)
        if number < 0:
            raise ValueError(f"storage option {name} must be >= 0, got {value!r}")
        return number
    return value
