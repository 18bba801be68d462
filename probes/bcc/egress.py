"""The collector's egress hooks on a client's cgroup: attached per invocation with the
destinations the contract allows; with deny, the kernel refuses (EPERM) or drops the rest.
Destinations in `refused` are refused in any mode (an endpoint behind a fault proxy).

An IPv4 destination is also keyed as its IPv4-mapped IPv6 address (::ffff:a.b.c.d): a dual-stack
socket (the JVM's, by default) reaches the same server through the connect6 hook."""

import contextlib
import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

from probes.bcc.events import packed

DEST_ALLOW, DEST_REFUSE = 1, 2   # egress_allow's values, as collector.bpf.c defines them

# (program in the .bpf.c, BPF program type, attach type), named as BCC names uapi/linux/bpf.h's
# numbers (bcc.BPF and bcc.BPFAttachType).
HOOKS = (("egress_connect4", "CGROUP_SOCK_ADDR", "CGROUP_INET4_CONNECT"),
         ("egress_connect6", "CGROUP_SOCK_ADDR", "CGROUP_INET6_CONNECT"),
         ("egress_sendmsg4", "CGROUP_SOCK_ADDR", "CGROUP_UDP4_SENDMSG"),
         ("egress_sendmsg6", "CGROUP_SOCK_ADDR", "CGROUP_UDP6_SENDMSG"),
         ("egress_packets", "CGROUP_SKB", "CGROUP_INET_EGRESS"))


def mapped(address: str) -> tuple[str, ...]:
    """The IPv4-mapped IPv6 form of an IPv4 address (none for IPv6)."""
    return () if ":" in address else (f"::ffff:{address}",)


class CgroupHooks:
    def __init__(self, bpf):
        self._bpf = bpf
        self._cgroups: dict[int, tuple[int, int]] = {}   # invocation -> (cgroup fd, cgroup id)

    def watch(self, invocation: int, slot: int, cgroup_dir: Path, cgroup_id: int,
              allowed: list[tuple[str, int]], deny: bool,
              refused: Sequence[tuple[str, int]] = ()) -> None:
        from bcc import BPF, BPFAttachType
        fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._cgroups[invocation] = (fd, cgroup_id)
        for name, prog_type, attach_name in HOOKS:
            attach = getattr(BPFAttachType, attach_name)
            fn = self._bpf.load_func(name, getattr(BPF, prog_type),
                                     attach_type=attach if prog_type != "CGROUP_SKB" else -1)
            BPF.attach_func(fn, fd, attach)
        rules = self._bpf["egress_allow"]
        for destinations, rule in ((allowed, DEST_ALLOW), (refused, DEST_REFUSE)):
            for address, port in destinations:
                for form in (address, *mapped(address)):
                    key = rules.Key()
                    key.inv, key.port = invocation, port
                    key.family, raw = packed(form)
                    ctypes.memmove(key.addr, raw, len(raw))
                    rules[key] = ctypes.c_ubyte(rule)
        conf = self._bpf["cg_inv"].Leaf()
        conf.inv, conf.slot, conf.deny = invocation, slot, int(deny)
        self._bpf["cg_inv"][ctypes.c_ulonglong(cgroup_id)] = conf

    def watched(self) -> list[int]:
        """The invocations whose cgroups are watched."""
        return list(self._cgroups)

    def unwatch(self, invocation: int) -> None:
        from bcc import BPF, BPFAttachType
        entry = self._cgroups.pop(invocation, None)
        if entry is None:
            return
        fd, cgroup_id = entry
        for name, _prog_type, attach_name in HOOKS:
            try:
                BPF.detach_func(self._bpf.funcs[name.encode()], fd,
                                getattr(BPFAttachType, attach_name))
            except Exception:
                pass   # the cgroup is being removed: the kernel detaches with it
        os.close(fd)
        with contextlib.suppress(KeyError):
            del self._bpf["cg_inv"][ctypes.c_ulonglong(cgroup_id)]
        allow = self._bpf["egress_allow"]
        for key in [k for k in allow.keys() if k.inv == invocation]:
            del allow[key]
