"""`StoreLocations`: the REST catalog reads a table's metadata only from the broker's own
object store, and hands engines the S3 settings the store uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.tables.locations import StoreLocations


def test_local_store_locations(tmp_path: Path) -> None:
    store = StoreLocations.from_storage_url((tmp_path / "objects").as_uri())
    warehouse = store.warehouse
    assert warehouse == (tmp_path / "objects" / "tables").as_uri()
    assert store.key_of(f"{warehouse}/lakelog.db/t/metadata/1.metadata.json") == (
        "tables/lakelog.db/t/metadata/1.metadata.json"
    )
    # Java writes file:/abs, some writers a bare path: the same file.
    bare = str(tmp_path / "objects" / "tables" / "x.json")
    assert store.key_of(bare) == "tables/x.json"
    assert store.key_of("file:" + bare) == "tables/x.json"
    assert store.properties == {}


@pytest.mark.parametrize(
    "location",
    [
        "file:///etc/passwd",
        "/etc/passwd",
        "{root}/../secret",
        "{root}/tables/../../secret",
        "{root}x/tables/t.json",
        "file://otherhost{root}/tables/t.json",
        "s3://bucket/tables/t.json",
        "http://example.com/t.json",
    ],
)
def test_local_store_refuses_what_is_not_its_own(tmp_path: Path, location: str) -> None:
    root = tmp_path / "objects"
    store = StoreLocations.from_storage_url(root.as_uri())
    assert store.key_of(location.format(root=root)) is None


def test_s3_store_locations_and_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-env")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    store = StoreLocations.from_storage_url(
        "s3://bkt/pre/fix?endpoint=http://127.0.0.1:9000&region=eu-west-1&access_key_id=AK"
    )
    assert store.warehouse == "s3://bkt/pre/fix/tables"
    assert store.key_of("s3://bkt/pre/fix/tables/a/b.json") == "tables/a/b.json"
    assert store.key_of("s3a://bkt/pre/fix/tables/a/b.json") == "tables/a/b.json"
    for other in (
        "s3://other/pre/fix/tables/a.json",
        "s3://bkt/pre/tables/a.json",
        "s3://bkt/pre/fix/../x.json",
        "s3://bkt/pre/fix//x.json",
        "file:///pre/fix/tables/a.json",
    ):
        assert store.key_of(other) is None, other
    assert store.properties == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
        "client.region": "eu-west-1",
        "s3.access-key-id": "AK",
        "s3.secret-access-key": "from-env",
        "s3.path-style-access": "true",
    }


def test_a_memory_store_has_no_locations() -> None:
    store = StoreLocations.from_storage_url("memory://")
    assert store.warehouse == "" and store.key_of("memory://x") is None
