"""Certificates made at test time for the TLS properties: a throw-away CA and a server
certificate for the loopback address (openssl CLI: present wherever gRPC's TLS is)."""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pytest_hpccomm.errors import Unavailable
from pytest_hpccomm.proc.jobs import run_job

_TIMEOUT = 30.0


class TlsUnavailable(Unavailable):
    pass


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # PEM of the CA that signed the server certificate
    cert: Path
    key: Path
    other_ca: Path  # a CA that signed nothing: a client trusting only it must fail

    def read(self, which: str) -> bytes:
        return Path(getattr(self, which)).read_bytes()


def _openssl(args: Sequence[str], cwd: Path) -> None:
    res = run_job(["openssl", *args], timeout=_TIMEOUT, cwd=cwd, label="openssl")
    if not res.ok:
        raise TlsUnavailable(f"openssl {args[0]}: {res.describe()}")


def _ca(d: Path, name: str) -> None:
    _openssl(
        [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-subj",
            f"/CN=pytest-hpccomm {name}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        d,
    )


def make_tls(
    directory: Path, ips: Sequence[str] = ("127.0.0.1",), dns: Sequence[str] = ("localhost",)
) -> TlsFiles:
    """CA + server certificate (ECDSA P-256, valid 2 days) whose SANs are `ips` and `dns`."""
    if shutil.which("openssl") is None:
        raise TlsUnavailable("TLS properties need the openssl CLI (apt-get install openssl)")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "other-ca")
    san = ",".join([f"IP:{ip}" for ip in ips] + [f"DNS:{n}" for n in dns])
    (d / "server.ext").write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _openssl(
        [
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        d,
    )
    _openssl(
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            f"0x{secrets.token_hex(8)}",
            "-days",
            "2",
            "-out",
            "server.pem",
            "-extfile",
            "server.ext",
        ],
        d,
    )
    return TlsFiles(d / "ca.pem", d / "server.pem", d / "server.key", d / "other-ca.pem")
