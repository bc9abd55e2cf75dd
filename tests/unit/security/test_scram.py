"""SCRAM (RFC 5802/7677) both sides: the RFC's SCRAM-SHA-256 example byte for byte, and
our client against our server for both mechanisms, right and wrong passwords."""

from __future__ import annotations

import pytest

from lakelog.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential,
    escape_name,
    unescape_name,
)

RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)


def test_client_matches_rfc7677_example() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(RFC_SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")


def test_server_matches_rfc7677_example() -> None:
    import base64

    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    stored = credential("SCRAM-SHA-256", "pencil", salt, 4096)
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda _m, user: stored if user == "user" else None,
        nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    assert server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == RFC_SERVER_FIRST
    final = server.final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _exchange(mechanism: str, stored: dict[str, ScramCredential], user: str, password: str) -> None:
    server = ScramServer(mechanism, lambda _m, u: stored.get(u))
    client = ScramClient(mechanism, user, password)
    final = client.final(server.first(client.first()))
    client.verify(server.final(final))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree(mechanism: str) -> None:
    stored = {"a,b=c": credential(mechanism, "s3cret:ü")}
    _exchange(mechanism, stored, "a,b=c", "s3cret:ü")
    with pytest.raises(ScramError, match="authentication failed"):
        _exchange(mechanism, stored, "a,b=c", "wrong")
    with pytest.raises(ScramError, match="authentication failed"):
        _exchange(mechanism, stored, "nobody", "s3cret:ü")


def test_malformed_messages_are_scram_errors() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda _m, _u: None)
    with pytest.raises(ScramError):
        server.first(b"p=tls-unique,,n=user,r=abc")
    with pytest.raises(ScramError):
        server.first(b"n,,garbage")
    client = ScramClient("SCRAM-SHA-256", "user", "pw", nonce="abc")
    with pytest.raises(ScramError, match="nonce"):
        client.final(b"r=xyz,s=AAAA,i=4096")
    with pytest.raises(ScramError, match="iteration"):
        client.final(b"r=abcdef,s=AAAA,i=100000000")


def test_user_names_escape_both_ways() -> None:
    assert escape_name("a,b=c") == "a=2Cb=3Dc"
    assert unescape_name("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramError):
        unescape_name("a=XX")
