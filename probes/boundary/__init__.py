"""The client's boundary: its cgroup (attribution, accounting, limits) and its sandbox."""
