"""DescribeLogDirs names its one log dir by the object store's URL, minus anything secret."""

from __future__ import annotations

from lakelog.server.api.log_dirs import log_dir_name


def test_credentials_query_and_fragment_are_dropped() -> None:
    assert log_dir_name("s3://key:secret@bucket/prefix?region=x#f") == "s3://bucket/prefix"
    assert log_dir_name("http://u:p@host:9000/b") == "http://host:9000/b"


def test_plain_urls_are_kept() -> None:
    assert log_dir_name("file:///var/lib/lakelog/objects") == "file:///var/lib/lakelog/objects"
    assert log_dir_name("memory://") == "memory://"
