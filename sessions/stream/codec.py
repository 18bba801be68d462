"""Events as JSON lines: `from_json(to_json(e)) == e`. Reading is strict, because archives come
from anywhere: every field is checked against its declared type (bounded integers, finite
numbers, bounded nesting), so a malformed archive is one clear error, never a crash later."""

import dataclasses
import functools
import json
import math
import types
import typing
from typing import Any

from sessions.stream.compat import upgrade
from sessions.stream.events import Event
from sessions.stream.registry import EVENT_TYPES


class EventFormatError(ValueError):
    """A line that is not a well-formed evlab event."""


def to_dict(event: Event) -> dict[str, Any]:
    """The event's type and fields. The field values are the event's own, not copies: an
    event's fields hold JSON's kinds alone (from_dict refuses anything else), and whoever asks
    writes them out. dataclasses.asdict copied each value deeply, most of a session's cost of
    writing its events."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for name in _field_names(type(event)):  # type: ignore[arg-type]  # see _hints
        out[name] = getattr(event, name)
    return out


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_json(event: Event) -> str:
    return json.dumps(to_dict(event), separators=(",", ":"), sort_keys=True)


INT_MAX = 2 ** 63            # every integer evlab records fits a signed 64-bit kernel value
NESTING_MAX = 8              # dicts and lists inside an event's fields


def fits(value, hint) -> bool:
    """Whether a value can be an event field of that type (what from_dict accepts back)."""
    return _fits(value, hint)


def _fits(value, hint, depth: int = 0) -> bool:
    """Does a JSON value have the field's declared type (bounded, finite, not too deep)?
    The plain kinds are asked first: they are most of every archive's fields."""
    if hint is Any:   # free-form JSON (a record's fields): scalars, bounded containers
        return _json(value, depth)
    if hint is str:
        return isinstance(value, str)
    if hint is int:
        return _int(value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is float:
        return _int(value) or (isinstance(value, float) and math.isfinite(value))
    if hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a, depth) for a in args)
    if hint is tuple or origin is tuple:
        if not isinstance(value, (tuple, list)) or depth >= NESTING_MAX:
            return False
        item = args[0] if args else Any
        return all(_fits(v, item, depth + 1) for v in value)
    if hint is dict or origin is dict:
        if not isinstance(value, dict) or depth >= NESTING_MAX:
            return False
        item = args[1] if args else Any
        return all(isinstance(k, str) and _fits(v, item, depth + 1) for k, v in value.items())
    return False


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -INT_MAX <= value < INT_MAX


def _json(value, depth: int) -> bool:
    """Any JSON value: null, a string, a boolean, a bounded integer, a finite number, or a
    list or object of them nested at most NESTING_MAX deep."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return -INT_MAX <= value < INT_MAX
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return depth < NESTING_MAX and all(_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < NESTING_MAX and all(isinstance(k, str) and _json(v, depth + 1)
                                           for k, v in value.items())
    return False


@functools.cache
def _hints(cls: type[Event]) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_dict(data: dict[str, Any]) -> Event:
    if not isinstance(data, dict):
        raise EventFormatError(f"expected an object, got {type(data).__name__}")
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventFormatError(f"unknown event type {str(data.get('type'))[:40]!r}")
    # A class object is hashable; mypy checks type[Event] against Hashable through the frozen
    # dataclass's instance __hash__ and refuses it (python/mypy#10447 and kin).
    hints = _hints(cls)  # type: ignore[arg-type]
    data = upgrade(data)   # an earlier evlab's names, as today's
    values = {}
    for key, value in data.items():
        if key == "type":
            continue
        if key not in hints:
            raise EventFormatError(f"{cls.__name__} has no field {key[:40]!r}")
        if not _fits(value, hints[key]):
            raise EventFormatError(f"{cls.__name__}.{key}: not a {_name(hints[key])} "
                                   f"(got {type(value).__name__})")
        if isinstance(value, list):
            value = tuple(value)  # JSON arrays come back as the tuples they were written from
        values[key] = _text(value)
    if values.get("t_ns", 0) < 0:
        raise EventFormatError(f"{cls.__name__}.t_ns: negative")
    try:
        return cls(**values)
    except TypeError as e:
        raise EventFormatError(f"{cls.__name__}: {e}") from None


def _text(value):
    """Strings as evlab carries client text (probes/text.py): valid Unicode. Only a document
    written elsewhere can hold a lone surrogate ("\\ud800"): it comes back as that escape."""
    if isinstance(value, str):
        if value.isascii():   # most of them, and valid whatever they hold
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_text(v) for v in value)
    return value


def _name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number evlab records")


def from_json(line: str) -> Event:
    try:
        data = json.loads(line, parse_constant=_no_constant)
    except ValueError as e:   # JSONDecodeError, NaN and ±Infinity
        raise EventFormatError(f"not JSON: {e}") from None
    except RecursionError:
        raise EventFormatError("not JSON: nested too deeply") from None
    return from_dict(data)
