"""gRPC runtimes under test: what the native peers run on (a build, an environment, a preload),
whether their payload must cross an RDMA device, and the TCP twin they are shown beside.

A runtime is chosen by --hpc-grpc-preset (named below) and/or --hpc-grpc-env KEY=VAL
(repeatable, over the preset's). Values may name the session's fabric: {device}, {port},
{gid_index}, {address}, {netdev}; {rspreload} is rdma-core's rsocket preload library and
{rsocket_compat} the native build's shim for rdma-core < 63 (native/rsocket_compat.c). The
RDMA runtimes are built by their users and named with --hpc-grpc-prefix (the native peer links
their libgrpc++); the rsocket preload comes from the distribution (librdmacm1).

Only the native peers run a runtime: the Python peers use grpcio's own bundled core.
"""

from __future__ import annotations

import re
import string
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from pytest_hpccomm.errors import Unavailable
from pytest_hpccomm.fabrics import FabricSelection

STOCK = "grpc"  # the default label: stock gRPC over kernel TCP
PLACEHOLDERS = ("device", "port", "gid_index", "address", "netdev", "rspreload", "rsocket_compat")
RSPRELOAD = "librspreload.so"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class RuntimeSpecError(ValueError):
    """A malformed --hpc-grpc-env or --hpc-grpc-preset: one line, a usage error."""


@dataclass(frozen=True)
class Preset:
    name: str
    env: tuple[tuple[str, str], ...]
    rdma: bool  # its payload must cross the fabric's RDMA device (proof of path)
    twin: tuple[tuple[str, str], ...] | None  # the same build on kernel TCP; None: no twin
    needs_prefix: bool  # a user's build (--hpc-grpc-prefix), not the system's gRPC
    about: str


# RR-Compound (pwrliang/grpc-rdma, gRPC 1.38): src/core/lib/ibverbs/config.cc reads these; a
# wrong device name or GID index aborts the process. RDMA_EVENT is left out: it hard-codes
# device mlx5_0 (src/core/lib/rdma/rdma_utils.h) and ignores the device variables.
_RR = (
    ("GRPC_RDMA_DEVICE_NAME", "{device}"),
    ("GRPC_RDMA_PORT_NUM", "{port}"),
    ("GRPC_RDMA_GID_INDEX", "{gid_index}"),
)
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "rsocket",
            (("LD_PRELOAD", "{rspreload}"), ("GRPC_POLL_STRATEGY", "poll")),
            True,
            (("GRPC_POLL_STRATEGY", "poll"),),
            False,
            "rdma-core's rsocket preload under the native peers (the system's gRPC); gRPC's "
            "poll engine, since rsocket intercepts poll but not epoll; twin: poll on kernel TCP. "
            "rdma-core < 63 cannot carry gRPC (fcntl F_GETFD, accept4): see rsocket-compat",
        ),
        Preset(
            "rsocket-compat",
            (("LD_PRELOAD", "{rsocket_compat}:{rspreload}"), ("GRPC_POLL_STRATEGY", "poll")),
            True,
            (("GRPC_POLL_STRATEGY", "poll"),),
            False,
            "rsocket with the native build's shim for rdma-core < 63 before it "
            "(native/rsocket_compat.c; IPv4 fabric addresses only)",
        ),
        Preset(
            "rr-compound-bp",
            (("GRPC_PLATFORM_TYPE", "RDMA_BP"), *_RR),
            True,
            (("GRPC_PLATFORM_TYPE", "TCP"),),
            True,
            "RR-Compound (pwrliang/grpc-rdma) busy polling; twin: its TCP platform",
        ),
        Preset(
            "rr-compound-bpev",
            (("GRPC_PLATFORM_TYPE", "RDMA_BPEV"), *_RR),
            True,
            (("GRPC_PLATFORM_TYPE", "TCP"),),
            True,
            "RR-Compound busy polling then events; twin: its TCP platform",
        ),
        Preset(
            "rdma",
            (),
            True,
            None,
            True,
            "any other RDMA gRPC build (e.g. an AR-gRPC libgrpc++), configured by --hpc-grpc-env "
            "alone; the proof of path applies, no twin",
        ),
    )
}


@dataclass(frozen=True)
class RuntimeSpec:
    """What the options say, before the fabric is known."""

    label: str
    preset: Preset | None = None
    env: tuple[tuple[str, str], ...] = ()  # --hpc-grpc-env, in order, over the preset's

    @property
    def rdma(self) -> bool:
        return self.preset is not None and self.preset.rdma

    @property
    def stock(self) -> bool:
        return self.preset is None and not self.env


@dataclass(frozen=True)
class Runtime:
    """A runtime resolved against the session's fabric: the native peers' extra environment."""

    label: str
    env: Mapping[str, str] = field(default_factory=dict)
    rdma: bool = False
    twin_of: str = ""  # set on a twin: the label of the runtime it is the TCP twin of

    def describe(self) -> str:
        shown = " ".join(f"{k}={v}" for k, v in self.env.items())
        return f"{self.label} ({shown})" if shown else self.label


def parse_env(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """KEY=VAL items; placeholders must be known ones."""
    out = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not _KEY.match(key):
            raise RuntimeSpecError(
                f"--hpc-grpc-env: {item!r}: expected KEY=VALUE with KEY a variable name"
            )
        check_placeholders(value, f"--hpc-grpc-env {key}")
        out.append((key, value))
    return tuple(out)


def check_placeholders(value: str, where: str) -> None:
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
    except ValueError as e:
        raise RuntimeSpecError(
            f"{where}: {value!r}: {e} (write {{{{ and }}}} for braces)"
        ) from None
    bad = [n for n in names if n not in PLACEHOLDERS]
    if bad:
        raise RuntimeSpecError(
            f"{where}: unknown placeholder {{{bad[0]}}}: choose from "
            f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
        )


def spec_of(preset: str, env: Sequence[str], label: str | None) -> RuntimeSpec:
    """The runtime the options name; the label defaults to the preset's name."""
    chosen = None
    if preset:
        chosen = PRESETS.get(preset)
        if chosen is None:
            raise RuntimeSpecError(
                f"--hpc-grpc-preset: {preset!r}: choose from {', '.join(PRESETS)}"
            )
    pairs = parse_env(env)
    name = label or (chosen.name if chosen else (STOCK if not pairs else "grpc-env"))
    return RuntimeSpec(name, chosen, pairs)


def labels(spec: RuntimeSpec) -> list[str]:
    """The runtimes a session runs, by label: the TCP twin first, when there is one."""
    twin = spec.preset is not None and spec.preset.twin is not None
    return [f"{spec.label}-tcp", spec.label] if twin else [spec.label]


def rspreload_path(roots: Sequence[Path] = (Path("/usr/lib"), Path("/usr/lib64"))) -> Path | None:
    """librspreload.so where librdmacm installs it (Debian: /usr/lib/<multiarch>/rsocket)."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    for root in roots:
        for folder in ([root / arch / "rsocket"] if arch else []) + [root / "rsocket"]:
            if (folder / RSPRELOAD).is_file():
                return folder / RSPRELOAD
    return None


def _values(
    sel: FabricSelection | None, rspreload: Path | None, compat: Path | None
) -> dict[str, str | None]:
    return {
        "rsocket_compat": str(compat) if compat else None,
        "device": sel.device if sel else None,
        "port": str(sel.port) if sel and sel.port is not None else None,
        "gid_index": str(sel.gid_index) if sel and sel.gid_index is not None else None,
        "address": sel.address if sel else None,
        "netdev": sel.netdev if sel else None,
        "rspreload": str(rspreload) if rspreload else None,
    }


_WHY = {
    "device": "an RDMA device",
    "port": "an RDMA port",
    "gid_index": "a RoCE GID index",
    "address": "an IP address",
    "netdev": "a network interface",
    "rspreload": f"rdma-core's {RSPRELOAD} (apt-get install librdmacm1)",
    "rsocket_compat": "the native peer's build (its rsocket shim)",
}


class RuntimeUnavailable(Unavailable):
    """What this session lacks for the runtime: a skip reason."""


def _fill(
    pairs: Sequence[tuple[str, str]], values: Mapping[str, str | None], label: str, fabric: str
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, template in pairs:
        for _, name, _, _ in string.Formatter().parse(template):
            if name is not None and values.get(name) is None:
                where = (
                    "this host"
                    if name in ("rspreload", "rsocket_compat")
                    else f"the session's fabric ({fabric})"
                )
                raise RuntimeUnavailable(
                    f"gRPC runtime {label}: {key} needs {_WHY[name]}, and {where} has none"
                )
        out[key] = template.format(**{k: v or "" for k, v in values.items()})
    return out


def uses(spec: RuntimeSpec, placeholder: str) -> bool:
    pairs = (spec.preset.env if spec.preset else ()) + spec.env
    return any("{" + placeholder + "}" in v for _, v in pairs)


def no_device_reason(spec: RuntimeSpec, sel: FabricSelection | None, fabric: str) -> str | None:
    """An RDMA runtime on a session whose fabric has no RDMA device (resolve's skip)."""
    if spec.rdma and (sel is None or not sel.device):
        return (
            f"gRPC runtime {spec.label} runs over an RDMA device; "
            f"the session's fabric ({fabric}) has none"
        )
    return None


def resolve(
    spec: RuntimeSpec,
    sel: FabricSelection | None,
    fabric: str,
    rspreload: Path | None = None,
    compat: Path | None = None,
) -> list[Runtime]:
    """The runtime under test and, when it has one, its TCP twin (first)."""
    values = _values(sel, rspreload if rspreload is not None else rspreload_path(), compat)
    preset = spec.preset
    absent = no_device_reason(spec, sel, fabric)
    if absent:
        raise RuntimeUnavailable(absent)
    env = _fill((preset.env if preset else ()) + spec.env, values, spec.label, fabric)
    main = Runtime(spec.label, env, spec.rdma)
    if preset is None or preset.twin is None:
        return [main]
    twin_env = _fill(
        preset.twin + tuple((k, v) for k, v in spec.env if k not in dict(preset.env)),
        values,
        spec.label,
        fabric,
    )
    twin_label, _ = labels(spec)
    return [Runtime(twin_label, twin_env, False, twin_of=spec.label), main]
