"""NATS decentralized-auth JWTs (operator, account, user, activation), signed with nkeys (extra `internet`).

What nats-server's operator mode reads (the `nats-io/jwt` v2 claims): a JWT is
`base64url(header).base64url(claims).base64url(ed25519 signature)`, header
`{"typ": "JWT", "alg": "ed25519-nkey"}`, the claims' `jti` the base32 SHA-256 of the claims
without it, `iss` the signer's public nkey, `sub` the subject's, and a `nats` object whose `type`
is `operator`, `account`, `user` or `activation` (`version: 2`).

`new_key(kind)` makes an nkey (seed `S?...`, public `O...`/`A...`/`U...`); `encode(claims, signer)`
signs; `decode(jwt)` reads claims back (without checking the signature: nats-server does that).
`creds_text(jwt, seed)` is the `.creds` file nats-py and every NATS client read (`NATS_CREDS`).

Limits: only the claim fields Spielbus sets; no signing keys (the operator and each account sign
with their identity key), no JWT expiry (revocation is how a login ends: bus/registry.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any, Literal

Kind = Literal["operator", "account", "user"]
# nkeys' prefix bytes (PREFIX_BYTE_OPERATOR, _ACCOUNT, _USER): base32 'O', 'A', 'U'.
_PREFIX = {"operator": 14 << 3, "account": 0, "user": 20 << 3}


def _nkeys() -> Any:
    """The `nkeys` package (extra `internet`), imported when keys are made or used, so that reading
    a ladder file or an auth folder does not need it."""
    try:
        import nkeys
    except ImportError as exc:
        raise ImportError(
            "NATS operator mode needs the nkeys package: pip install 'spielbus[internet]'"
        ) from exc
    return nkeys


_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


def new_key(kind: Kind) -> str:
    """A fresh nkey seed (`SO...`, `SA...`, `SU...`) as text."""
    return str(_nkeys().encode_seed(os.urandom(32), _PREFIX[kind]).decode())


def public_key(seed: str) -> str:
    return str(_nkeys().from_seed(bytearray(seed.encode())).public_key.decode())


def is_public_key(key: str, kind: Kind) -> bool:
    """`key` is a well-formed public nkey of `kind` (prefix byte and CRC checked)."""
    if not isinstance(key, str) or len(key) != 56:
        return False
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except ValueError:
        return False
    return raw[0] == _PREFIX[kind] and bytes(_nkeys().crc16_checksum(bytearray(raw[:-2]))) == raw[-2:]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(subject: str, name: str, nats: dict[str, Any], signer_seed: str) -> str:
    """A signed JWT for `subject` (a public nkey) with the `nats` claims, issued by `signer_seed`."""
    kp = _nkeys().from_seed(bytearray(signer_seed.encode()))
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": kp.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    body = json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
    claims["jti"] = base64.b32encode(hashlib.sha256(body).digest()).decode().rstrip("=")
    head = _b64(json.dumps(_HEADER, separators=(",", ":")).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = kp.sign(f"{head}.{payload}".encode())
    return f"{head}.{payload}.{_b64(signature)}"


def decode(token: str) -> dict[str, Any]:
    """The claims of a JWT (ValueError if it is not one). The signature is not checked here."""
    try:
        claims = json.loads(_unb64(token.split(".")[1]))
    except (IndexError, ValueError) as exc:
        raise ValueError(f"not a NATS JWT: {exc}") from exc
    if not isinstance(claims, dict):
        raise ValueError("not a NATS JWT: claims are not an object")
    return claims


def operator_jwt(seed: str, name: str, system_account: str) -> str:
    return encode(public_key(seed), name, {"type": "operator", "system_account": system_account}, seed)


def activation_jwt(
    exporter_seed: str, importer: str, subject: str, kind: Literal["service", "stream"]
) -> str:
    """The exporting account's token letting account `importer` import `subject` (a private export)."""
    nats = {"type": "activation", "subject": subject, "kind": kind}
    return encode(importer, f"{kind} {subject}", nats, exporter_seed)


def user_permissions(perms: dict[str, Any]) -> dict[str, Any]:
    """Static-config permissions (bus/auth.py: publish/subscribe allow/deny, allow_responses) in
    JWT form (pub/sub, resp)."""
    out: dict[str, Any] = {}
    for static, jwt_key in (("publish", "pub"), ("subscribe", "sub")):
        if static in perms:
            out[jwt_key] = {k: list(v) for k, v in perms[static].items()}
    if perms.get("allow_responses"):
        out["resp"] = {"max": 1, "ttl": 0}
    return out


def creds_text(jwt: str, seed: str) -> str:
    """A `.creds` file: the user JWT and its seed, in the decorated form every NATS client reads."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )
