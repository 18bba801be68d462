"""The one template grammar of every command line evlab fills: a client's arguments (a scenario's
or a graded command's) and a task's servers' and programs' arguments (task.toml). A template is
literal text, `{{` and `}}` for braces, and `{name}` for a documented name — nothing else: no
attribute access, format specs or conversions (str.format would take them)."""

import re

_TEMPLATE = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_.]*)\}|[{}]")


def template_names(arg: str) -> set[str] | None:
    """The names a template uses, or None when it is not one (a lone brace)."""
    names = set()
    for m in _TEMPLATE.finditer(arg):
        if m.group(0) in ("{{", "}}"):
            continue
        if m.group(1) is None:
            return None
        names.add(m.group(1))
    return names


def placeholders_of(arg: str, known) -> set[str] | None:
    """The placeholders an argument uses, or None when it is not a valid template (a name not
    in known, a lone brace): caught when the scenario or command is read, not mid-run."""
    names = template_names(arg)
    return names if names is not None and names <= set(known) else None


def expand(arg: str, values: dict[str, str]) -> str:
    """The template with each documented name replaced by its value, literally."""
    def one(m: re.Match) -> str:
        token = m.group(0)
        if token in ("{{", "}}"):
            return token[0]
        if m.group(1) not in values:
            raise ValueError(f"not a template: {arg!r}")
        return values[m.group(1)]
    return _TEMPLATE.sub(one, arg)
