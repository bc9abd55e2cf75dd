"""Where Iceberg files live in the broker's object store, said three ways: the store's
root as a URL engines understand (`file:///dir`, `s3://bucket/prefix`), an Iceberg
location turned back into a key of our `ObjectStorage` (and refused when it points
anywhere else), and the FileIO properties an engine needs to read the same files.

Kept free of pyiceberg and pyarrow: the broker's REST catalog uses it."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lakelog.log.storage.backends import s3_options

TABLES_PREFIX = "tables"
"""The Iceberg warehouse's folder under the object store's root."""

_S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class StoreLocations:
    scheme: str
    """"file" or "s3" ("" for a store Iceberg engines cannot reach, such as memory://)."""
    bucket: str
    root: str
    """The root's path: an absolute directory (file) or the key prefix, no slashes around (s3)."""
    properties: dict[str, str] = field(default_factory=dict)
    """FileIO properties an engine needs to read the files (S3 endpoint, region, keys)."""

    @classmethod
    def from_storage_url(cls, url: str) -> StoreLocations:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme == "file":
            return cls("file", "", str(Path(unquote(parts.path)).resolve()))
        if scheme in _S3_SCHEMES:
            prefix = unquote(parts.path).strip("/")
            return cls("s3", parts.netloc, prefix, _s3_properties(url))
        return cls("", "", "")

    @property
    def root_url(self) -> str:
        if self.scheme == "file":
            return Path(self.root).as_uri()
        if self.scheme == "s3":
            return f"s3://{self.bucket}/{self.root}".rstrip("/")
        return ""

    @property
    def warehouse(self) -> str:
        """The Iceberg warehouse location: the store's `tables/` folder."""
        return f"{self.root_url}/{TABLES_PREFIX}" if self.scheme else ""

    def key_of(self, location: str) -> str | None:
        """The store key of an Iceberg file location, or None when it is not ours (another
        bucket, outside the root, a `..` that climbs out, an unknown scheme)."""
        parts = urlsplit(location)
        scheme = parts.scheme.lower()
        if self.scheme == "file" and scheme in ("file", ""):
            if parts.netloc not in ("", "localhost"):
                return None
            path = posixpath.normpath(unquote(parts.path))
            if not path.startswith(self.root.rstrip("/") + "/"):
                return None
            return path[len(self.root.rstrip("/")) + 1 :]
        if self.scheme == "s3" and scheme in _S3_SCHEMES and parts.netloc == self.bucket:
            key = unquote(parts.path).lstrip("/")
            if any(part in ("", ".", "..") for part in key.split("/")):
                return None
            if not self.root:
                return key
            if not key.startswith(self.root + "/"):
                return None
            return key[len(self.root) + 1 :]
        return None


def _s3_properties(url: str) -> dict[str, str]:
    """Iceberg's S3 FileIO names (read by pyiceberg, Java's S3FileIO and DuckDB) for the
    settings the broker's store uses."""
    options = s3_options(url)
    names = {
        "endpoint": "s3.endpoint",
        "region": "s3.region",
        "access_key_id": "s3.access-key-id",
        "secret_access_key": "s3.secret-access-key",
        "session_token": "s3.session-token",
    }
    props = {names[k]: str(v) for k, v in options.items() if k in names and v not in (None, "")}
    if "s3.region" in props:
        props["client.region"] = props["s3.region"]
    # An explicit endpoint means path-style addressing, as the broker's store uses it.
    path_style = options.get("path_style", "endpoint" in options)
    props["s3.path-style-access"] = "true" if path_style else "false"
    return props
