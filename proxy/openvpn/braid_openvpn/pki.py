"""A small PKI for braid's tunnels, made with easy-rsa.

One CA, one server certificate (the proxy), one client certificate (the
client box), and a tls-crypt key that hides and authenticates OpenVPN's
control channel (an unauthenticated packet gets no answer, as braid-proxy's
server gives none). EC keys (P-256): fast to make, and the data channel is
AES-256-GCM either way. Private keys are 0600 in a 0700 tree; a key anyone
else can read is refused at start (:func:`check_keys`).

Layout (easy-rsa's)::

    <pki_dir>/ca.crt  issued/<name>.crt  private/<name>.key  tls-crypt.key

Example::

    create(Path("/etc/braid/openvpn/pki"), client_name="box", server_name="proxy")
    check_keys(paths(cfg, "client"))
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from braid_openvpn.config import Config, ConfigError

EASYRSA_CANDIDATES = ("/usr/share/easy-rsa/easyrsa", "easyrsa")
CA_NAME = "braid-openvpn-ca"


class PkiError(RuntimeError):
    """The PKI could not be made."""


@dataclass(frozen=True)
class RolePaths:
    """The files one end needs."""

    ca: Path
    cert: Path
    key: Path
    tls_crypt: Path


def paths(cfg: Config, role: str) -> RolePaths:
    """The files of ``role`` ("client" or "proxy") under ``pki_dir``."""
    name = cfg.client_name if role == "client" else cfg.server_name
    d = cfg.pki_dir
    return RolePaths(d / "ca.crt", d / "issued" / f"{name}.crt", d / "private" / f"{name}.key", d / "tls-crypt.key")


# What each file must hold: PEM blocks by their labels, and the tls-crypt
# key as `openvpn --genkey tls-crypt` writes it (2048 bits, 16 lines of hex).
PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\n([A-Za-z0-9+/=\n]+)-----END \1-----")
TLS_CRYPT_KEY = re.compile(
    r"-----BEGIN OpenVPN Static key V1-----\n((?:[0-9a-f]{32}\n){16})-----END OpenVPN Static key V1-----")


def check_contents(p: RolePaths) -> None:
    """Refuse files that cannot hold what they are named for: an empty
    tls-crypt key or a garbage private key otherwise reaches openvpn, which
    fails at start with a less helpful message, or at the first handshake."""
    for f, labels in ((p.ca, ("CERTIFICATE",)), (p.cert, ("CERTIFICATE",)),
                      (p.key, ("PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"))):
        blocks = [m for m in PEM_BLOCK.finditer(f.read_text(errors="replace")) if m.group(1) in labels]
        if not blocks or not all(_base64_body(m.group(2)) for m in blocks):
            raise ConfigError(f"pki_dir: {f} holds no PEM {labels[0].lower()} (make the PKI with `braid-openvpn pki`)")
    if not TLS_CRYPT_KEY.search(p.tls_crypt.read_text(errors="replace")):
        raise ConfigError(
            f"pki_dir: {p.tls_crypt} is not an OpenVPN tls-crypt key (openvpn --genkey tls-crypt {p.tls_crypt})")


def _base64_body(text: str) -> bool:
    try:
        return len(base64.b64decode("".join(text.split()), validate=True)) > 0
    except ValueError:
        return False


def check_keys(p: RolePaths) -> None:
    """Refuse missing files, secrets others could read and files that do not
    hold what they are named for (names ``pki_dir``)."""
    for f in (p.ca, p.cert, p.key, p.tls_crypt):
        if not f.is_file():
            raise ConfigError(f"pki_dir: {f} is missing (make the PKI with `braid-openvpn pki`)")
    for secret in (p.key, p.tls_crypt):
        mode = stat.S_IMODE(secret.stat().st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"pki_dir: {secret} is readable by others (mode {mode:04o}); refusing it: chmod 600 {secret}"
            )
    check_contents(p)


def easyrsa() -> str:
    for c in EASYRSA_CANDIDATES:
        found = shutil.which(c) or (c if os.access(c, os.X_OK) else None)
        if found:
            return found
    raise PkiError("easy-rsa not found (apt install easy-rsa; scripts/install-deps does)")


def create(pki_dir: Path, client_name: str, server_name: str, days: int = 3650) -> RolePaths:
    """Make the CA, both certificates and the tls-crypt key in ``pki_dir``.

    Refuses to touch an existing PKI (it would replace keys deployed
    elsewhere). Returns the client's paths; the proxy's come from
    :func:`paths`.
    """
    if (pki_dir / "ca.crt").exists() or (pki_dir / "private").exists():
        raise PkiError(f"{pki_dir} already holds a PKI; remove it first to make a new one")
    pki_dir.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "EASYRSA_PKI": str(pki_dir),
        "EASYRSA_BATCH": "1",
        "EASYRSA_ALGO": "ec",
        "EASYRSA_CURVE": "prime256v1",
        "EASYRSA_CA_EXPIRE": str(days),
        "EASYRSA_CERT_EXPIRE": str(days),
    }
    tool = easyrsa()
    old_umask = os.umask(0o077)  # nothing easy-rsa writes is for others
    try:
        for step in (["init-pki"], [f"--req-cn={CA_NAME}", "build-ca", "nopass"],
                     ["build-server-full", server_name, "nopass"], ["build-client-full", client_name, "nopass"]):
            proc = subprocess.run([tool, *step], env=env, capture_output=True, text=True, timeout=120, check=False)
            if proc.returncode != 0:
                raise PkiError(f"easyrsa {' '.join(step)} failed: {proc.stderr.strip()[-500:]}")
        tls = pki_dir / "tls-crypt.key"
        proc = subprocess.run(["openvpn", "--genkey", "tls-crypt", str(tls)], capture_output=True, text=True,
                              timeout=30, check=False)
        if proc.returncode != 0:
            raise PkiError(f"openvpn --genkey tls-crypt failed: {proc.stderr.strip()[-500:]}")
    finally:
        os.umask(old_umask)
    pki_dir.chmod(0o700)
    for key in (pki_dir / "private").iterdir():
        key.chmod(0o600)
    tls.chmod(0o600)
    return RolePaths(pki_dir / "ca.crt", pki_dir / "issued" / f"{client_name}.crt",
                     pki_dir / "private" / f"{client_name}.key", tls)
