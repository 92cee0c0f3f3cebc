"""TLS for the bus: the server block `auth init` writes, a generated CA, and the clients' context.

- `generate(out, hosts)`: a private CA (`tls/ca.pem`, its key `tls/ca-key.pem`) and a server
  certificate for `hosts` (DNS names and IP addresses; `tls/server.pem`, `tls/server-key.pem`),
  ECDSA P-256, the CA valid 10 years and the server certificate 825 days. Keys are mode 0600.
- `server_block(tls)`: nats-server's `tls {cert_file, key_file, timeout}` (clients must speak TLS;
  the monitoring port stays plain HTTP).
- `client_context(ca)`: what `bus.connect` gives nats-py when a CA file is named (`--tls-ca FILE`
  or `NATS_TLS_CA=FILE`): the system's CAs plus that file, hostnames checked.
- `is_certificate_error(exc)`: an error that no retry will fix (an unverifiable certificate, a
  wrong hostname): `bus.connect` stops at the first one and says so, instead of retrying.

Limits: no client certificates (bots log in with their accounts' credentials, over TLS), no
certificate rotation (write new files and reload nats-server); the generated CA suits a
private ladder, a public one should use a certificate from a public CA (then bots need no CA file).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bus.files import write_private

TLS_TIMEOUT_S = 5  # the server's TLS handshake timeout (nats-server's default is 2 s: slow clients)


class TlsFiles(BaseModel):
    """The server's certificate and key, and the CA clients verify it with (None: a public CA)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    cert: str
    key: str
    ca: str | None = None


def server_block(tls: TlsFiles) -> dict[str, object]:
    return {"cert_file": tls.cert, "key_file": tls.key, "timeout": TLS_TIMEOUT_S}


def client_context(ca: str | None) -> ssl.SSLContext:
    """Verify the server against the system's CAs and `ca` (a PEM file), hostnames checked."""
    ctx = ssl.create_default_context()
    if ca:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionError(f"cannot read the TLS CA file {ca}: {exc}") from exc
    return ctx


def is_certificate_error(exc: BaseException) -> bool:
    return isinstance(exc, ssl.SSLCertVerificationError) or (
        isinstance(exc, ssl.SSLError) and "CERTIFICATE" in str(exc).upper()
    )


def _names(hosts: list[str]) -> list[object]:
    from cryptography import x509

    out: list[object] = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def generate(out_dir: str | Path, hosts: list[str]) -> TlsFiles:
    """A new CA and a server certificate for `hosts` under `out_dir/tls/` (needs `cryptography`,
    extra `internet`). ValueError for an empty host list."""
    hosts = [h.strip() for h in hosts if h.strip()]
    if not hosts:
        raise ValueError(
            "--tls-generate needs the server's names: e.g. localhost,127.0.0.1,ladder.example.org"
        )
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:
        raise ImportError(
            "generating certificates needs cryptography: pip install 'spielbus[internet]'"
        ) from exc

    folder = Path(out_dir) / "tls"
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> str:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "spielbus private CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)  # type: ignore[arg-type]
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(
        cert=str((folder / "server.pem").resolve()),
        key=str((folder / "server-key.pem").resolve()),
        ca=str((folder / "ca.pem").resolve()),
    )
    write_private(folder / "ca-key.pem", pem_key(ca_key))
    write_private(Path(files.key), pem_key(key))
    Path(files.cert).write_text(cert.public_bytes(serialization.Encoding.PEM).decode())
    assert files.ca is not None
    Path(files.ca).write_text(ca.public_bytes(serialization.Encoding.PEM).decode())
    # The server key must be readable by nats-server, which may run as another user (compose).
    os.chmod(files.key, 0o640)
    return files


def given(cert: str, key: str, ca: str | None) -> TlsFiles:
    """Certificate files the operator already has (checked to exist, paths made absolute)."""
    for what, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-ca", ca)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{what}: no file {path}")
    return TlsFiles(
        cert=str(Path(cert).resolve()),
        key=str(Path(key).resolve()),
        ca=str(Path(ca).resolve()) if ca else None,
    )
