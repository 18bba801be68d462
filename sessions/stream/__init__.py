"""The event stream: typed events, their JSON codec, the stream that numbers and delivers them,
the EvidenceBook (the one projection every reader uses) and replay. Imports no other layer."""
