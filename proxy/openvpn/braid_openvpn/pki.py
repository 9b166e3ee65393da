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

import os
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


def check_keys(p: RolePaths) -> None:
    """Refuse missing files and secrets others could read (names ``pki_dir``)."""
    for f in (p.ca, p.cert, p.key, p.tls_crypt):
        if not f.is_file():
            raise ConfigError(f"pki_dir: {f} is missing (make the PKI with `braid-openvpn pki`)")
    for secret in (p.key, p.tls_crypt):
        mode = stat.S_IMODE(secret.stat().st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"pki_dir: {secret} is readable by others (mode {mode:04o}); refusing it: chmod 600 {secret}"
            )


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
