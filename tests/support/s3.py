"""Buckets and credentials for tests that talk to the S3 endpoint (moto's server)."""

from __future__ import annotations

import os
import uuid

import boto3

ACCESS_KEY = os.environ.get("AWS_ACCESS_KEY_ID", "testing")
SECRET_KEY = os.environ.get("AWS_SECRET_ACCESS_KEY", "testing")
REGION = "us-east-1"


def s3_client(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


def make_bucket(endpoint: str) -> str:
    """Create a uniquely named bucket (boto3, so a real S3-compatible server works too)."""
    name = f"lakelog-test-{uuid.uuid4().hex[:16]}"
    s3_client(endpoint).create_bucket(Bucket=name)  # type: ignore[attr-defined]
    return name
