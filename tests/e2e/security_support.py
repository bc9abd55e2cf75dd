"""Helpers for the listener security tests: a throwaway CA and server/client certificates
(with the `cryptography` package), a users file, and brokers with a TLS/SASL listener
(their readiness probe speaks TLS when the listener does)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from e2e_fixtures import FAST_COMMITS, close_all
from e2e_harness import HOST, BrokerError, BrokerProcess, recv_exact

USERS = {"alice": "alice-secret", "mirror": "m1rr0r:pass"}


def every_acl() -> Any:
    """confluent-kafka's ACL filter that matches every ACL."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    subject: str,
    san: list[x509.GeneralName] | None,
    is_ca: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ca_key if is_ca else ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, _ = _issue(ca_key, _name("lakelog-test-ca"), "lakelog-test-ca", None, is_ca=True)
    server_cert, server_key = _issue(
        ca_key,
        ca_cert.subject,
        "localhost",
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))],
    )
    client_cert, client_key = _issue(ca_key, ca_cert.subject, "mirror-client", None)
    pki = Pki(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "client.pem",
        directory / "client.key",
    )
    pki.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    pki.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, pki.server_key)
    _write_key(client_key, pki.client_key)
    return pki


def write_users(path: Path, users: dict[str, str] = USERS) -> Path:
    path.write_text("# user:password\n" + "".join(f"{u}:{p}\n" for u, p in users.items()))
    return path


def listener_env(protocol: str, pki: Pki | None, users: Path | None) -> dict[str, object]:
    env: dict[str, object] = {"LISTENER_SECURITY_PROTOCOL": protocol}
    if pki is not None:
        env |= {
            "SSL_CERTIFICATE_LOCATION": pki.server_cert,
            "SSL_KEY_LOCATION": pki.server_key,
            "SSL_CA_LOCATION": pki.ca,  # used only with ssl.client.auth
        }
    if users is not None:
        env["SASL_USERS"] = users
    return env


def client_tls(pki: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    return context


class SecureBrokerProcess(BrokerProcess):
    """A broker whose readiness probe (ApiVersions) goes over TLS when `tls` is given."""

    def __init__(self, *args: object, tls: ssl.SSLContext | None = None, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.tls = tls

    def wait_ready(self, timeout: float = 30.0) -> None:
        if self.tls is None:
            return super().wait_ready(timeout)
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise BrokerError(f"{self.name} exited before answering\n{self.log_tail()}")
            try:
                api_versions_tls(self.port, self.tls)
                return
            except OSError as exc:
                last = exc
            time.sleep(0.1)
        self.kill()
        raise BrokerError(f"{self.name} did not answer over TLS ({last!r})\n{self.log_tail()}")


def api_versions_tls(port: int, tls: ssl.SSLContext, timeout: float = 2.0) -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
    with (
        socket.create_connection((HOST, port), timeout=timeout) as raw,
        tls.wrap_socket(raw, server_hostname=HOST) as sock,
    ):
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        return recv_exact(sock, size)[4:]


SecureFactory = Callable[[str], tuple[SecureBrokerProcess, Pki, Path]]


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[SecureFactory]:
    """`secure_broker(protocol, **env)` -> (broker, pki, users file): a broker whose
    listener speaks `protocol`, with a fresh CA and the USERS."""
    started: list[SecureBrokerProcess] = []
    pki = make_pki(tmp_path / "pki")
    users = write_users(tmp_path / "users.txt")

    def make(protocol: str, **env: object) -> tuple[SecureBrokerProcess, Pki, Path]:
        tls = client_tls(pki) if protocol in ("SSL", "SASL_SSL") else None
        if tls is not None and env.get("SSL_CLIENT_AUTH") == "required":
            tls.load_cert_chain(pki.client_cert, pki.client_key)  # for the readiness probe
        proc = SecureBrokerProcess(
            tmp_path / f"secure{len(started)}",
            env={**FAST_COMMITS, **listener_env(protocol, pki, users), **env},
            name=f"secure{len(started)}",
            tls=tls,
        )
        started.append(proc)
        proc.start()
        return proc, pki, users

    yield make
    close_all(started)


def logins_broker(
    data_dir: Path, name: str, passwords: dict[str, str], acls: list[Any]
) -> BrokerProcess:
    """A started broker whose registry listener (and the Iceberg REST catalog on it) takes
    HTTP basic logins of SCRAM users: the authorizer on (ANONYMOUS and `admin` super
    users), each of `passwords` a SCRAM-SHA-256 user, `acls` (AclBindings) created."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    proc = BrokerProcess(
        data_dir,
        env={
            **FAST_COMMITS,
            "AUTHORIZER_ENABLED": "true",
            "SUPER_USERS": "User:ANONYMOUS;User:admin",
            "SCHEMA_REGISTRY_AUTH": "basic",
        },
        registry=True,
        name=name,
    )
    proc.start()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    upserts = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), pw.encode()
        )
        for user, pw in passwords.items()
    ]
    for future in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
        future.result(30)
    for future in admin.create_acls(acls, request_timeout=30).values():
        future.result(30)
    return proc


def tls_registry_broker(directory: Path, name: str) -> tuple[BrokerProcess, Any]:
    """A started broker whose registry listener (and the Iceberg REST catalog on it) serves
    HTTPS with a certificate of a fresh CA; with that PKI (its `ca` is what clients trust)."""
    pki = make_pki(directory / "pki")
    proc = BrokerProcess(
        directory / "data",
        env={
            **FAST_COMMITS,
            "SSL_CERTIFICATE_LOCATION": pki.server_cert,
            "SSL_KEY_LOCATION": pki.server_key,
            "SCHEMA_REGISTRY_TLS": "true",
        },
        registry=True,
        name=name,
    )
    proc.start()
    return proc, pki
