"""The collector's ring-buffer records and egress maps, read into the kernel vocabulary's
events (probes/collectors/records.py). Numbers (event kinds, file operations, egress call kinds)
are probes/bcc/abi.py's, the ones the .bpf.c was compiled with."""

import socket

from probes.bcc.abi import EgressKind, EventKind, FileOp
from probes.collectors.records import (
    ConnectEvent,
    EgressEvent,
    EgressTotals,
    FileEvent,
    ProcessEvent,
)
from probes.text import decoded

_PROTOCOLS = {socket.IPPROTO_TCP: "tcp", socket.IPPROTO_UDP: "udp", socket.IPPROTO_ICMP: "icmp",
              socket.IPPROTO_ICMPV6: "icmpv6"}
# A socket made with protocol 0 takes its type's default.
_TYPE_DEFAULTS: dict[int, str] = {socket.SOCK_STREAM: "tcp", socket.SOCK_DGRAM: "udp"}
_FAMILIES = {socket.AF_INET: "AF_INET", socket.AF_INET6: "AF_INET6", socket.AF_UNIX: "AF_UNIX"}


def _name(enum, value: int) -> str:
    """An enum member's name in lower case, or the number when the kernel sent an unknown one."""
    try:
        return enum(value).name.lower()
    except ValueError:
        return str(value)


def event(e) -> ConnectEvent | EgressEvent | ProcessEvent:
    """One record of the `events` ring buffer."""
    comm = decoded(e.comm)
    if e.kind == EventKind.CONNECT:
        return _connect_event(e, comm)
    if e.kind == EventKind.EGRESS:
        kind, stype, proto = e.other >> 16, (e.other >> 8) & 0xff, e.other & 0xff
        return EgressEvent(e.ts, e.inv, e.tgid, _name(EgressKind, kind),
                           _FAMILIES.get(e.family, str(e.family)), protocol(stype, proto),
                           address(e.family, bytes(e.addr)), e.port, e.ret != 0)
    return ProcessEvent(
        e.ts, e.inv, _name(EventKind, e.kind), e.tgid, e.tid, comm,
        child_pid=e.other if e.kind == EventKind.FORK else None,
        root=e.kind == EventKind.EXIT and bool(e.ret),
        filename=decoded(e.filename) if e.kind == EventKind.EXEC else None)


def file_event(e) -> FileEvent:
    """One record of the `file_events` ring buffer."""
    return FileEvent(
        e.ts, e.inv, e.tgid, e.tid, decoded(e.comm), _name(FileOp, e.op),
        decoded(e.path), e.flags, e.dfd,
        decoded(e.path2) if e.op in (FileOp.RENAME, FileOp.LINK, FileOp.SYMLINK) else None,
        e.dfd2,
        e.ret if e.op in (FileOp.OPEN, FileOp.DUP) else None,
        -e.ret if e.op != FileOp.OPEN and e.ret < 0 else 0)


def egress_totals(bpf, invocation: int) -> EgressTotals:
    """The cgroup hooks' in-kernel aggregates of one invocation: calls per destination and
    packets per flow."""
    calls = tuple(sorted(
        ({"pid": k.pid, "kind": _name(EgressKind, k.kind),
          "protocol": protocol(k.proto >> 8, k.proto & 0xff),
          "datagram": k.proto >> 8 == socket.SOCK_DGRAM,
          "address": address(k.family, bytes(k.addr)), "port": k.port,
          "calls": v.calls, "refused": v.refused, "first_ns": v.first, "last_ns": v.last}
         for k, v in bpf["egress"].items() if k.inv == invocation),
        key=lambda c: c["first_ns"]))
    flows = tuple(sorted(
        ({"protocol": _PROTOCOLS.get(k.proto, str(k.proto)),
          "address": address(k.family, bytes(k.addr)), "port": k.port,
          "packets": v.packets, "bytes": v.bytes, "dropped": v.dropped,
          "first_ns": v.first, "last_ns": v.last}
         for k, v in bpf["flows"].items() if k.inv == invocation),
        key=lambda f: f["first_ns"]))
    return EgressTotals(calls, flows)


def protocol(sock_type: int, proto: int) -> str:
    if proto in _PROTOCOLS:
        return _PROTOCOLS[proto]
    return _TYPE_DEFAULTS.get(sock_type, f"type {sock_type} protocol {proto}")


def address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[:16])
    return socket.inet_ntop(socket.AF_INET, raw[:4])


def packed(address: str) -> tuple[int, bytes]:
    """(family, raw bytes) of an IPv4 or IPv6 address, as the egress maps key it."""
    if ":" in address:
        return socket.AF_INET6, socket.inet_pton(socket.AF_INET6, address)
    return socket.AF_INET, socket.inet_pton(socket.AF_INET, address)


def _connect_event(e, comm: str) -> ConnectEvent:
    raw = bytes(e.addr)
    if e.family == socket.AF_INET:
        addr = socket.inet_ntop(socket.AF_INET, raw[:4])
    elif e.family == socket.AF_INET6:
        addr = socket.inet_ntop(socket.AF_INET6, raw)
    else:
        addr = None
    return ConnectEvent(e.ts, e.inv, e.tgid, e.tid, comm,
                        _FAMILIES.get(e.family, str(e.family)), addr,
                        e.port if addr else None, e.ret)
