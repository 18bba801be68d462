"""The wire: AF_PACKET capture on loopback, its in-kernel filter, summaries, pcap files."""
