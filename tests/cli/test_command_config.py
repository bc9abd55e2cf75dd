"""`--command-config FILE` (Kafka's client properties) on the commands that talk to a
broker, against a SASL_SSL listener: topics, console producer and consumer, and SCRAM
users through `lakelog configs --entity-type users` (alter, describe, delete), the new
user then logging in with its own properties file, and refused once deleted."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from security_support import USERS, SecureFactory, secure_broker

__all__ = ["secure_broker"]  # the fixture, used by name
pytestmark = pytest.mark.e2e

LAKELOG = Path(sys.executable).with_name("lakelog")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def lakelog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run(
        [str(LAKELOG), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "80", "NO_COLOR": "1"},
    )


def ok(*args: str, stdin: str | None = None) -> str:
    done = lakelog(*args, stdin=stdin)
    assert done.returncode == 0, f"lakelog {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    return done.stdout


def properties(path: Path, ca: Path, mechanism: str, user: str, password: str) -> Path:
    path.write_text(
        "# as for kafka-topics.sh --command-config\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={SCRAM} required \\\n    username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
        "request.timeout.ms=30000\n"
    )
    return path


def test_command_config_on_a_sasl_ssl_listener(
    secure_broker: SecureFactory, tmp_path: Path
) -> None:
    broker, pki, _ = secure_broker("SASL_SSL")
    b = broker.bootstrap
    admin = str(
        properties(tmp_path / "admin.properties", pki.ca, "SCRAM-SHA-512", "alice", USERS["alice"])
    )
    topic = f"cc-{uuid.uuid4().hex[:8]}"

    refused = lakelog("topics", "list", "-b", b)
    assert refused.returncode != 0 and refused.stderr.count("error:") == 1

    ok("topics", "create", topic, "--partitions", "1", "-b", b, "--command-config", admin)
    assert topic in ok("topics", "list", "-b", b, "--command-config", admin).split()
    # Before the subcommand too, as -b.
    assert topic in ok("topics", "--command-config", admin, "-b", b, "list").split()

    ok(
        "console-producer", "--topic", topic, "-b", b, "--command-config", admin,
        stdin="one\ntwo\n",
    )  # fmt: skip
    read = ok(
        "console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "2",
        "-b", b, "--command-config", admin,
    )  # fmt: skip
    assert read.split() == ["one", "two"]

    out = ok(
        "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
        "-b", b, "--command-config", admin,
    )  # fmt: skip
    assert "Completed updating config for user carol." in out
    out = ok(
        "configs", "--describe", "--entity-type", "users", "--entity-name", "carol",
        "-b", b, "--command-config", admin,
    )  # fmt: skip
    assert (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192"
        in out
    )

    carol = str(
        properties(tmp_path / "carol.properties", pki.ca, "SCRAM-SHA-256", "carol", "carol-secret")
    )
    assert topic in ok("topics", "list", "-b", b, "--command-config", carol).split()

    twice = lakelog(
        "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-256=[password=a],SCRAM-SHA-512=[password=b]",
        "-b", b, "--command-config", admin,
    )  # fmt: skip
    assert twice.returncode != 0 and "cannot be altered twice" in twice.stderr

    ok(
        "configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--delete-config", "SCRAM-SHA-256", "-b", b, "--command-config", admin,
    )  # fmt: skip
    gone = lakelog(
        "configs", "--describe", "--entity-type", "users", "--entity-name", "carol",
        "-b", b, "--command-config", admin,
    )  # fmt: skip
    assert gone.returncode != 0 and "does not exist" in gone.stderr
    refused = lakelog("topics", "list", "-b", b, "--command-config", carol)
    assert refused.returncode != 0 and refused.stderr.count("error:") == 1, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_bad_command_config_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    done = lakelog("topics", "list", "-b", "127.0.0.1:1", "--command-config", str(bad))
    assert done.returncode != 0 and done.stderr.count("error:") == 1
    assert "sasl.username and sasl.password" in done.stderr
    jks = tmp_path / "jks.properties"
    jks.write_text(
        "security.protocol=SSL\nssl.truststore.location=/x.jks\nssl.truststore.password=s3cret\n"
    )
    done = lakelog("topics", "list", "-b", "127.0.0.1:1", "--command-config", str(jks))
    assert done.returncode != 0 and "ssl.truststore.type=PEM" in done.stderr
    assert "s3cret" not in done.stderr


def test_console_tools_with_refused_credentials_fail_in_one_line(
    secure_broker: SecureFactory, tmp_path: Path
) -> None:
    """A wrong password (and no security at all) against a SASL_SSL listener: the console
    tools stop at the start-up check with one line, well within --timeout-ms."""
    broker, pki, _ = secure_broker("SASL_SSL")
    b = broker.bootstrap
    wrong_file = properties(tmp_path / "wrong.properties", pki.ca, "SCRAM-SHA-512", "alice", "no")
    # without request.timeout.ms, which earns a warning line of its own
    wrong_file.write_text(wrong_file.read_text().replace("request.timeout.ms=30000\n", ""))
    wrong = str(wrong_file)
    for security in (["--command-config", wrong], []):
        for tool, stdin in (("console-producer", "x\n"), ("console-consumer", None)):
            done = lakelog(
                tool, "--topic", "t", "-b", b, "--timeout-ms", "20000", *security, stdin=stdin
            )
            lines = done.stderr.splitlines()
            assert done.returncode == 1 and len(lines) == 1, (tool, security, done.stderr)
            assert lines[0].startswith("error: cannot "), lines[0]
