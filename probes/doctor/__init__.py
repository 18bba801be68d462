"""Preflight: which observers can work on this machine, and the fix for each gap."""
