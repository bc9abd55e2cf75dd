"""The mirror's source client settings, with Kafka's names: what is accepted, what is
refused with a message that names the key but never shows a secret, and properties
files like Kafka's --command-config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakelog.mirror.source import unsupported_settings
from lakelog.security.client_config import (
    ClientSecurity,
    SecurityConfigError,
    problems,
    read_properties,
)


def test_plaintext_is_the_default() -> None:
    security = ClientSecurity.from_configs({})
    assert (security.protocol, security.uses_tls, security.uses_sasl) == (
        "PLAINTEXT",
        False,
        False,
    )
    assert security.ssl_context is None


def test_sasl_with_librdkafka_names() -> None:
    security = ClientSecurity.from_configs(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "pw",
        }
    )
    assert (security.protocol, security.mechanism, security.username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "alice",
    )
    assert "pw" not in repr(security)


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
        ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ],
)
def test_sasl_jaas_config(mechanism: str, module: str) -> None:
    jaas = f'{module} required username="bob" password="p\\"w;x";'
    security = ClientSecurity.from_configs(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas,
        }
    )
    assert (security.username, security.password) == ("bob", 'p"w;x')


def test_refusals_name_keys_not_secrets() -> None:
    cases = {
        "unsupported settings": {"sasl.password": "hunter2", "sasl.kerberos.service.name": "k"},
        "security.protocol=BOGUS": {"security.protocol": "bogus"},
        "needs sasl.username": {"security.protocol": "SASL_SSL", "sasl.password": "hunter2"},
        "GSSAPI": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "GSSAPI",
            "sasl.username": "u",
            "sasl.password": "hunter2",
        },
        "does not serve": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="u" password="hunter2";',
        },
        "go together": {"security.protocol": "SSL", "ssl.key.location": "/k.pem"},
        "expected https or none": {"ssl.endpoint.identification.algorithm": "ldap"},
    }
    for expected, configs in cases.items():
        with pytest.raises(SecurityConfigError, match=re.escape(expected)) as info:
            ClientSecurity.from_configs(configs)
        assert "hunter2" not in str(info.value)
        [found] = unsupported_settings(configs)
        assert expected in found and "hunter2" not in found


def test_tls_files_are_checked(tmp_path: Path) -> None:
    missing = {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "nope.pem")}
    [problem] = problems(missing)
    assert "TLS settings" in problem
    assert problems({"security.protocol": "SSL"}) == []  # the system's CAs
    no_check = ClientSecurity.from_configs(
        {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}
    )
    assert no_check.ssl_context is not None and not no_check.ssl_context.check_hostname


def test_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "source.properties"
    path.write_text(
        "# the source cluster\n"
        "! another comment\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="mirror" password="a=b:c";\n'
        "\n"
        "ssl.ca.location = /etc/ca.pem\n"
    )
    configs = read_properties(path)
    assert configs["security.protocol"] == "SASL_SSL"
    assert configs["sasl.mechanism"] == "SCRAM-SHA-256"
    assert configs["ssl.ca.location"] == "/etc/ca.pem"
    security = ClientSecurity.from_configs(configs)
    assert (security.username, security.password) == ("mirror", "a=b:c")
    path.write_text("not a property\n")
    with pytest.raises(ValueError, match="not key=value"):
        read_properties(path)
