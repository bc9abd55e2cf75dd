"""PostgreSQL test databases: a fresh schema per test in one shared database, reached
through a URL that puts the schema first in the search_path."""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg


def schema_url(server_url: str, schema: str) -> str:
    """The server's URL with `schema` first in the search_path of every connection."""
    parts = urlsplit(server_url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return parts._replace(query=urlencode(query)).geturl()


class PostgresSchemas:
    """Makes and drops per-test schemas in the server's database."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self._admin = psycopg.connect(server_url, autocommit=True)

    def create(self) -> str:
        name = f"lakelog_test_{uuid.uuid4().hex[:12]}"
        self._admin.execute(f'CREATE SCHEMA "{name}"')
        return name

    def drop(self, name: str) -> None:
        self._admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def close(self) -> None:
        self._admin.close()
