"""Throwaway PEM certificates for the TLS unit tests (``cryptography``): a CA, a server
certificate for the names asked, and a client certificate whose key is password-encrypted."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-pass-Zq81"


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path                       # encrypted with KEY_PASSWORD
    key_password: str = field(default=KEY_PASSWORD, repr=False)


def make_certs(directory: Path, *, dns: tuple[str, ...] = ("localhost",),
               ips: tuple[str, ...] = ("127.0.0.1",), prefix: str = "") -> Certs:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{prefix}test CA")
    ca = (_builder(ca_name, ca_name, ca_key.public_key(), now)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    server = (_builder(_name("server"), ca_name, server_key.public_key(), now)
              .add_extension(x509.SubjectAlternativeName(names), critical=False)
              .sign(ca_key, hashes.SHA256()))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _builder(_name("client"), ca_name, client_key.public_key(), now).sign(ca_key, hashes.SHA256())
    out = Certs(directory / f"{prefix}ca.pem", directory / f"{prefix}server.pem",
                directory / f"{prefix}server-key.pem", directory / f"{prefix}client.pem",
                directory / f"{prefix}client-key.pem")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.server_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    out.server_key.write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    out.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    out.client_key.write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
    return out


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject, issuer, public_key, now) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1)))
