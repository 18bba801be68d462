"""The observers together on a real fixture run: the wire and the kernel must agree."""

import shutil
import subprocess
import time

import pytest

from probes.collectors.choose import open_collector
from probes.packets.capture import PacketCapture
from tests.backup_lab import client_path, start_receiver
from tests.lab_servers import start_decoy
from tests.packet_totals import port_totals

pytestmark = [pytest.mark.root(reason="BPF and AF_PACKET need root"), pytest.mark.slow,
              pytest.mark.live]


def test_baseline_wire_and_kernel_agree_and_the_pcap_opens(built_clients, source_file, tmp_path):
    pcap = tmp_path / "baseline.pcap"
    collector, missing = open_collector("bcc", functions=("hash_file",))
    assert missing == []
    try:
        with start_receiver(tmp_path / "store", tmp_path / "rx.jsonl") as rx, \
                start_decoy(tmp_path / "decoy.jsonl") as decoy, \
                PacketCapture(pcap_path=pcap) as capture:
            capture.set_ports({rx.port, decoy.port})
            argv = [str(client_path("baseline")), "127.0.0.1", str(rx.port), str(source_file),
                    str(decoy.port)]
            proc = collector.launch(1, argv, source_file, stdout=subprocess.DEVNULL)
            assert proc.wait(timeout=30) == 0
            kernel = collector.finish(1)
            # Two connections (check, upload), each closed by a FIN from both sides.
            seen, deadline = [], time.monotonic() + 5
            while sum("FIN" in p.flags for p in seen) < 4 and time.monotonic() < deadline:
                seen += capture.drain()
                time.sleep(0.02)
            seen += capture.drain()
            to_receiver = port_totals(seen, rx.port).to_port
            from_receiver = port_totals(seen, rx.port).from_port
            stats = capture.stats()
    finally:
        collector.close()
    # What the kernel saw the client send is what the wire carried to the receiver, byte for byte.
    assert to_receiver.payload_bytes == kernel.counters["sock_sent_bytes"]
    assert from_receiver.payload_bytes == kernel.counters["sock_recv_bytes"]
    assert to_receiver.payload_bytes > 524_288  # the whole payload plus the request lines
    assert stats.dropped_by_kernel == 0
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-r", str(pcap)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == stats.kept
