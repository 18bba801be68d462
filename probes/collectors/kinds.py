"""The collectors a user may choose (`--collector`): data only, so the command line can offer
them without importing BCC's side."""

KINDS = ("auto", "bcc", "strace", "none")
