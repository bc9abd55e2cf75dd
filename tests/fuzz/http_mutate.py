"""Mutations of schema registry requests for the HTTP fuzzer, as raw bytes (so a request
may lie about its Content-Length or break HTTP itself): the method, path segments, the
query string, the JSON body (its bytes, its values, and the schema text inside it), and the
headers. Bodies are capped (`MAX_BODY`), a little above the registry's own cap so the
413 path is taken. Deterministic for a seed."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from tests.fuzz.registry_corpus import HttpSeed

MAX_BODY = 3 * 1024 * 1024
"""The largest body sent: over the registry's default cap (2 MiB + 64 KiB)."""
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "G\x00T", "")
HOSTILE_SEGMENTS = (
    "",
    ".",
    "..",
    "%2F",
    "%2e%2e",
    "-1",
    "0",
    "2147483648",
    "99999999999999999999",
    "latest",
    "%00",
    "%ff%fe",
    "%",
    "%zz",
    "a" * 300,
    "\u00e9\u2603",
    "%F0%9F%98%80",
    "subjects",
    "versions",
    ":.ctx:x",
)
QUERY_KEYS = (
    "deleted",
    "permanent",
    "normalize",
    "force",
    "verbose",
    "defaultToGlobal",
    "format",
    "subjectPrefix",
    "lookupDeletedSchema",
)
QUERY_VALUES = ("true", "false", "TRUE", "", "1", "serialized", "%zz", "x" * 500, "\u2603")
HOSTILE_VALUES: tuple[object, ...] = (
    None,
    True,
    -1,
    0,
    2**31,
    2**63,
    -(2**63) - 1,
    1.5e308,
    "",
    "x" * 5000,
    "\ud800",
    [],
    {},
    [None],
    {"schema": None},
    "AVRO",
    "PROTOBUF",
    "JSON",
    "XML",
    "latest",
)
HOSTILE_SCHEMAS = (
    "{",
    "[]",
    "null",
    '{"type": "record"}',
    '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "R"}]}',
    '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
    '{"type": "fixed", "name": "F", "size": -1}',
    '["null", "null"]',
    '{"$ref": "#"}',
    '{"$ref": "http://example.com/x.json"}',
    '{"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}',
    '{"type": "string", "pattern": "(a+)+$"}',
    'syntax = "proto3"; message M { M m = 1; }',
    'syntax = "proto2"; message M { required int32 a = 1; extensions 100 to max; }',
    'syntax = "proto3"; import "/etc/passwd"; message M {}',
    'syntax = "proto3"; import "../../x.proto"; message M {}',
    "message M { int32 a = 0; }",
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
)
HOSTILE_HEADERS = (
    ("Content-Type", "text/plain"),
    ("Content-Type", "application/json; charset=latin-1"),
    ("Content-Type", ""),
    ("Authorization", "Basic !!!notbase64"),
    ("Authorization", "Basic " + "QQ==" * 2000),
    ("Authorization", "Bearer x"),
    ("Accept", "*/*;q=garbage"),
    ("Transfer-Encoding", "chunked"),
    ("Expect", "100-continue"),
    ("Host", ""),
    ("X-" + "a" * 200, "b" * 8000),
)


@dataclass(frozen=True)
class RawRequest:
    data: bytes
    what: str
    lies: bool
    """The framing is broken on purpose (a Content-Length lie, chunked garbage): the server
    may close without an answer."""


class HttpMutator:
    def __init__(self, seeds: list[HttpSeed], seed: int) -> None:
        self.seeds = seeds
        self.rng = random.Random(seed)

    def next(self) -> RawRequest:
        rng = self.rng
        seed = rng.choice(self.seeds)
        method, path, query, body = seed.method, seed.path, seed.query, seed.body
        headers = list(seed.headers)
        what: list[str] = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            kind = rng.choice(
                (
                    "method",
                    "path",
                    "path",
                    "query",
                    "body",
                    "body",
                    "json",
                    "schema",
                    "schema",
                    "header",
                    "length",
                    "huge",
                )
            )
            what.append(kind)
            if kind == "method":
                method = rng.choice(METHODS)
            elif kind == "path":
                path = self._path(path)
            elif kind == "query":
                query = self._query(query)
            elif kind == "body":
                body = self._bytes(body)
            elif kind == "json":
                body = self._json(body)
            elif kind == "schema":
                body = self._schema(body)
            elif kind == "header":
                headers.append(rng.choice(HOSTILE_HEADERS))
            elif kind == "huge":
                size = rng.choice((MAX_BODY, 2 * 1024 * 1024 + 70_000, 1_100_000, 200_000))
                body = self._huge(body, size)
        body = body[:MAX_BODY]
        length: str | None = str(len(body))
        lies = False
        if "length" in what:
            length = rng.choice(
                (
                    str(len(body) + rng.randint(1, 100)),
                    str(max(0, len(body) - 7)),
                    "-1",
                    "abc",
                    "99999999999999999999",
                    "1e3",
                    None,
                    str(len(body)) + ", " + str(len(body)),
                )
            )
            lies = True
        if any(name == "Transfer-Encoding" for name, _ in headers):
            lies = True
        target = path + ("?" + query if query else "")
        lines = [f"{method} {target} HTTP/1.1", "Host: registry", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
        return RawRequest(head + body, f"{seed.method} {seed.path} {'+'.join(what)}", lies)

    def _path(self, path: str) -> str:
        parts = path.split("/")
        index = self.rng.randrange(1, len(parts) + 1)
        choice = self.rng.choice(HOSTILE_SEGMENTS)
        if index == len(parts) or self.rng.random() < 0.3:
            parts.insert(index, choice)
        else:
            parts[index] = choice
        return "/".join(parts)

    def _query(self, query: str) -> str:
        pairs = [query] if query else []
        for _ in range(self.rng.randint(1, 3)):
            pairs.append(f"{self.rng.choice(QUERY_KEYS)}={self.rng.choice(QUERY_VALUES)}")
        if self.rng.random() < 0.1:
            pairs.append("&&=&%zz")
        return "&".join(pairs)

    def _bytes(self, body: bytes) -> bytes:
        data = bytearray(body or b"{}")
        op = self.rng.choice(("flip", "cut", "insert", "repeat", "utf8"))
        at = self.rng.randrange(len(data))
        if op == "flip":
            data[at] ^= 1 << self.rng.randrange(8)
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = self.rng.choice((b"\x00", b"\xff\xfe", b'"', b"\\", b"{", b"]", b"NaN"))
        elif op == "repeat":
            end = min(len(data), at + self.rng.randint(1, 64))
            data[at:at] = data[at:end] * self.rng.randint(2, 50)
        else:
            data[at:at] = "\u2028\ud7ff".encode() + b"\xed\xa0\x80"
        return bytes(data)

    def _json(self, body: bytes) -> bytes:
        try:
            value = json.loads(body or b"{}")
        except ValueError:
            return self._bytes(body)
        if not isinstance(value, dict):
            return json.dumps(self.rng.choice(HOSTILE_VALUES)).encode("utf-8", "surrogatepass")
        key = self.rng.choice(
            [
                *value.keys(),
                "schema",
                "schemaType",
                "references",
                "id",
                "version",
                "compatibility",
                "mode",
                "normalize",
                "metadata",
                "ruleSet",
            ]
        )
        if key == "references" and self.rng.random() < 0.5:
            value[key] = [
                {
                    "name": self.rng.choice(("a", "fuzz.Person", "common.proto", "")),
                    "subject": self.rng.choice(("fuzz-people-value", "nope", "")),
                    "version": self.rng.choice((1, -1, 0, 2**40, "1")),
                }
                for _ in range(self.rng.choice((1, 2, 101)))
            ]
        else:
            value[key] = self.rng.choice(HOSTILE_VALUES)
        return json.dumps(value).encode("utf-8", "surrogatepass")

    def _schema(self, body: bytes) -> bytes:
        """The schema text inside the body: mutated, or swapped for a hostile one."""
        try:
            value = json.loads(body or b"{}")
        except ValueError:
            return self._bytes(body)
        if not isinstance(value, dict) or not isinstance(value.get("schema"), str):
            value = {"schema": "", "schemaType": self.rng.choice(("AVRO", "JSON", "PROTOBUF"))}
        if self.rng.random() < 0.5 or not value["schema"]:
            value["schema"] = self.rng.choice(HOSTILE_SCHEMAS)
        else:
            value["schema"] = self._bytes(value["schema"].encode("utf-8", "surrogatepass")).decode(
                "utf-8", "replace"
            )
        if self.rng.random() < 0.3:
            value["schemaType"] = self.rng.choice(("AVRO", "JSON", "PROTOBUF"))
        return json.dumps(value).encode()

    def _huge(self, body: bytes, size: int) -> bytes:
        pad = max(0, size - len(body) - 32)
        if self.rng.random() < 0.5:
            return json.dumps({"schema": "x" * pad, "schemaType": "AVRO"}).encode()
        return body + b" " * pad
