"""Where secrets live, whoever looks: the risk findings report a client reading them, and a
folder holding one is never shown to a client (sessions/spec/named_paths.py)."""

SENSITIVE_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
SENSITIVE_PARTS = ("/.ssh/", "/.gnupg/", "/.aws/", "/.netrc", "/.docker/config.json",
                   "/.config/gcloud/", "/.kube/config", "/.bash_history", "/.git-credentials")


def sensitive(path: str) -> bool:
    return path.startswith(SENSITIVE_FILES) or any(part in path for part in SENSITIVE_PARTS)


def may_lead_to_secret(name: str) -> bool:
    """A folder's entry `name` is, or may hold, a secret (`.ssh`, `.docker`, `.config`)."""
    return any(part.startswith(f"/{name}/") or part == f"/{name}" for part in SENSITIVE_PARTS)
