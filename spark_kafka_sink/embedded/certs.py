"""A throwaway certificate authority for the embedded broker's SSL listeners (``cryptography``).

:func:`generate_tls` writes, into one directory, PEM files only::

    ca.pem                 the CA certificate (clients trust it: ``ssl.ca.location``)
    server-cert.pem        the broker certificate, SAN IP:127.0.0.1 and DNS:localhost, signed by the CA
    server-key.pem         the broker's PKCS#8 key, unencrypted, owner-only (0600)
    client-cert.pem        a client certificate signed by the CA (for ``ssl.client.auth``)
    client-key.pem         its PKCS#8 key, encrypted with ``client_key_password``

Keys are EC P-256: generating all three takes milliseconds, where RSA-2048 takes a good part of a
second. The client key password is random per call and only ever returned in :class:`TlsMaterial`
(whose repr hides it).

The server key is not encrypted: the broker reads it inline (``ssl.keystore.key``, see security.py).
Kafka's PEM key store decrypts keys only with the JDK's PBE ciphers, and the JDK has no
``SecretKeyFactory`` for PBES2, the scheme every current tool (``cryptography``, OpenSSL) writes:
a PBES2 file key store fails with "PBES2 SecretKeyFactory not available".
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .security import TlsMaterial, write_private

VALIDITY = datetime.timedelta(days=30)
CLOCK_SKEW = datetime.timedelta(hours=1)  # not-before lies this far in the past
CLIENT_COMMON_NAME = "spark-kafka-sink-client"


def generate_tls(directory: Path, now: datetime.datetime) -> TlsMaterial:
    """Create a CA, a server and a client certificate valid from ``now`` (aware UTC datetime)."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime (e.g. datetime.now(timezone.utc))")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("spark-kafka-sink embedded test CA")
    ca_cert = (_builder(ca_name, ca_name, ca_key.public_key(), now)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(_usage(cert_sign=True), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _leaf(ca_cert, ca_key, server_key, "localhost", now, ExtendedKeyUsageOID.SERVER_AUTH,
                        x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                     x509.DNSName("localhost")]))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _leaf(ca_cert, ca_key, client_key, CLIENT_COMMON_NAME, now,
                        ExtendedKeyUsageOID.CLIENT_AUTH, None)

    client_password = secrets.token_urlsafe(18)
    material = TlsMaterial(
        ca_path=directory / "ca.pem",
        server_cert_path=directory / "server-cert.pem",
        client_cert_path=directory / "client-cert.pem",
        client_key_path=directory / "client-key.pem",
        client_key_password=client_password,
        server_key_path=directory / "server-key.pem")
    material.ca_path.write_bytes(_pem(ca_cert))
    material.server_cert_path.write_bytes(_pem(server_cert))
    write_private(material.server_key_path, server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    material.client_cert_path.write_bytes(_pem(client_cert))
    write_private(material.client_key_path, _encrypted(client_key, client_password))
    return material


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "spark-kafka-sink tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, public_key, now: datetime.datetime) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + VALIDITY))


def _usage(*, cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=not cert_sign, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=not cert_sign,
                         key_cert_sign=cert_sign, crl_sign=cert_sign, encipher_only=False,
                         decipher_only=False)


def _leaf(ca_cert: x509.Certificate, ca_key, key, common_name: str, now: datetime.datetime,
          purpose: x509.ObjectIdentifier, san: x509.SubjectAlternativeName | None) -> x509.Certificate:
    builder = (_builder(_name(common_name), ca_cert.subject, key.public_key(), now)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_usage(), critical=True)
               .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _encrypted(key, password: str) -> bytes:
    """PKCS#8 ``ENCRYPTED PRIVATE KEY`` (PBES2, AES-256-CBC): readable by Java, OpenSSL and Python."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password.encode()))
