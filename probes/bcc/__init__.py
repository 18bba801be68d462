"""BCC: the collector's BPF program (collector.bpf.c), its loader and its readers."""
