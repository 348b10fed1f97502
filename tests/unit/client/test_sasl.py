"""SASL mechanisms (sans I/O): PLAIN's message, SCRAM against the RFC test vectors and a server
computed here, and every way a broker's message can be refused."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from spark_kafka_sink.client.auth.jaas import SaslCredentials
from spark_kafka_sink.client.auth.sasl import (
    PlainMechanism, SaslError, ScramMechanism, mechanism_for, scram_keys,
)
from spark_kafka_sink.errors import AuthenticationError


def test_plain_sends_one_message_and_completes_on_the_answer():
    mechanism = mechanism_for(SaslCredentials("PLAIN", "alice", "s3cret"))
    assert isinstance(mechanism, PlainMechanism)
    assert mechanism.initial_response() == b"\0alice\0s3cret"
    assert not mechanism.complete
    assert mechanism.evaluate(b"") is None and mechanism.complete
    assert "s3cret" not in repr(mechanism)


def test_scram_sha256_rfc7677_test_vector():
    # RFC 7677 section 3
    scram = ScramMechanism("user", "pencil", "sha256", nonce_source=lambda: "rOprNGfwEbeRWgbNEkqO")
    assert scram.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = scram.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert scram.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert scram.complete


def test_scram_sha1_rfc5802_test_vector():
    # RFC 5802 section 5: the same code with SHA-1
    scram = ScramMechanism("user", "pencil", "sha1", nonce_source=lambda: "fyko+d2lbbFgONRv9qkxdawL")
    assert scram.initial_response() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    final = scram.evaluate(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    assert scram.evaluate(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None and scram.complete


class ScramServer:
    """The broker's side of SCRAM (RFC 5802 §3), written here from the RFC to check the client."""

    def __init__(self, hash_name: str, password: str, *, salt: bytes = b"salt-1234",
                 iterations: int = 4096, server_nonce: str = "srvNonce"):
        self.hash = hash_name
        keys = scram_keys(password.encode(), salt, iterations, hash_name)
        self.stored_key, self.server_key = keys.stored_key, keys.server_key
        self.salt, self.iterations, self.server_nonce = salt, iterations, server_nonce

    def first(self, client_first: bytes) -> bytes:
        assert client_first.startswith(b"n,,")
        self.client_first_bare = client_first[3:].decode()
        nonce = dict(p.split("=", 1) for p in self.client_first_bare.split(","))["r"]
        self.server_first = (f"r={nonce}{self.server_nonce},s={base64.b64encode(self.salt).decode()},"
                             f"i={self.iterations}")
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        text = client_final.decode()
        without_proof, _, proof = text.rpartition(",p=")
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(self.stored_key, auth, self.hash).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        if hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(hmac.new(self.server_key, auth, self.hash).digest())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_against_a_server_computed_from_the_rfc(mechanism):
    server = ScramServer("sha512" if mechanism.endswith("512") else "sha256", "p@ss,=word")
    client = mechanism_for(SaslCredentials(mechanism, "us=er,1", "p@ss,=word"))
    first = client.initial_response()
    assert first.startswith(b"n,,n=us=3Der=2C1,r=")          # the user name is escaped
    final = client.evaluate(server.first(first))
    assert client.evaluate(server.final(final)) is None and client.complete


def test_scram_wrong_password_is_refused_by_the_server_and_reported():
    server = ScramServer("sha512", "right")
    client = mechanism_for(SaslCredentials("SCRAM-SHA-512", "u", "wrong"))
    final = client.evaluate(server.first(client.initial_response()))
    assert server.final(final) == b"e=invalid-proof"
    with pytest.raises(SaslError, match="refused the proof: invalid-proof") as info:
        client.evaluate(b"e=invalid-proof")
    assert isinstance(info.value, AuthenticationError) and "wrong" not in str(info.value)


def test_scram_rejects_a_server_that_does_not_know_the_password():
    server = ScramServer("sha256", "another password")
    client = mechanism_for(SaslCredentials("SCRAM-SHA-256", "u", "pw"))
    client.evaluate(server.first(client.initial_response()))
    forged = b"v=" + base64.b64encode(b"x" * 32)
    with pytest.raises(SaslError, match="signature does not match"):
        client.evaluate(forged)


@pytest.mark.parametrize(("server_first", "message"), [
    (b"r=someoneelse,s=c2FsdA==,i=4096", "nonce does not extend"),
    (b"r=NONCE,s=c2FsdA==,i=4096", "nonce does not extend"),       # no server part
    (b"r=NONCEx,s=c2FsdA==,i=1024", "fewer than the minimum 4096"),
    (b"r=NONCEx,s=!!!,i=4096", "salt or iteration count is malformed"),
    (b"r=NONCEx,i=4096", "lacks r, s or i"),
    (b"e=unknown-user", "refused the first message: unknown-user"),
    (b"garbage", "malformed"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_scram_refuses_bad_server_first_messages(server_first, message):
    client = ScramMechanism("u", "pw", "sha256", nonce_source=lambda: "NONCE")
    client.initial_response()
    with pytest.raises(SaslError, match=message):
        client.evaluate(server_first)


def test_scram_refuses_messages_after_completion_and_hides_the_password():
    server = ScramServer("sha256", "pw-hidden")
    client = mechanism_for(SaslCredentials("SCRAM-SHA-256", "u", "pw-hidden"))
    client.evaluate(server.final(client.evaluate(server.first(client.initial_response()))))
    with pytest.raises(SaslError, match="unexpected server message"):
        client.evaluate(b"v=abc")
    assert "pw-hidden" not in repr(client)
    assert "pw-hidden" not in repr(SaslCredentials("SCRAM-SHA-256", "u", "pw-hidden"))


def test_unsupported_mechanisms_have_no_implementation():
    with pytest.raises(SaslError, match="GSSAPI is not supported"):
        mechanism_for(SaslCredentials("GSSAPI", "u", "p"))
