"""The capture's pcap file: kept frames written unchanged, Ethernet link type, nanosecond
wall-clock stamps, snaplen SNAPLEN; tcpdump and tshark read it."""

from __future__ import annotations

import os
from decimal import Decimal

import dpkt

SNAPLEN = 262144  # larger than any loopback frame (MTU 65536, 64 KiB TSO)


class PcapFile:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = open(path, "wb")
        try:
            self._writer = dpkt.pcap.Writer(self._file, snaplen=SNAPLEN,
                                            linktype=dpkt.pcap.DLT_EN10MB, nano=True)
        except BaseException:
            self._file.close()
            raise

    def write(self, frame: bytes, wall_ns: int) -> None:
        # Decimal keeps the kernel's nanoseconds exact (a float would round them).
        self._writer.writepkt_time(frame, Decimal(wall_ns) / 10**9)

    def flush(self) -> None:
        """So the pcap is readable while the capture runs."""
        self._file.flush()

    def close(self) -> None:
        self._file.close()
