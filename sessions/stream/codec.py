"""Events as JSON lines: `from_json(to_json(e)) == e`. Reading is strict, because archives come
from anywhere: every field is checked against its declared type (bounded integers, finite
numbers, bounded nesting), so a malformed archive is one clear error, never a crash later."""

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable
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
    """Whether a value can be an event field of that type (what from_dict accepts back): JSON
    of the declared type, bounded, finite, not too deep."""
    return _checker(hint)(value, 0)


Check = Callable[[Any, int], bool]


@functools.cache
def _checker(hint) -> Check:
    """The check of one declared type, worked out once per type: reading an archive asks it of
    every field of every event (typing's get_origin/get_args each time were most of the cost)."""
    if hint is Any:   # free-form JSON (a record's fields): scalars, bounded containers
        return _json
    if hint is str:
        return lambda v, d: isinstance(v, str)
    if hint is int:
        return lambda v, d: _int(v)
    if hint is bool:
        return lambda v, d: isinstance(v, bool)
    if hint is float:
        return lambda v, d: _int(v) or (isinstance(v, float) and math.isfinite(v))
    if hint is type(None):
        return lambda v, d: v is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        alternatives = tuple(_checker(a) for a in args)
        return lambda v, d: any(c(v, d) for c in alternatives)
    if hint is tuple or origin is tuple:
        item = _checker(args[0] if args else Any)
        return lambda v, d: (isinstance(v, (tuple, list)) and d < NESTING_MAX
                             and all(item(x, d + 1) for x in v))
    if hint is dict or origin is dict:
        value = _checker(args[1] if args else Any)
        return lambda v, d: (isinstance(v, dict) and d < NESTING_MAX
                             and all(isinstance(k, str) and value(x, d + 1)
                                     for k, x in v.items()))
    return lambda v, d: False


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


@functools.cache
def _checks(cls: type[Event]) -> dict[str, Check]:
    """Each field's check, by name (hashing a typing hint at every field was costly too)."""
    return {name: _checker(hint)
            for name, hint in _hints(cls).items()}  # type: ignore[arg-type]  # as below


def from_dict(data: dict[str, Any]) -> Event:
    if not isinstance(data, dict):
        raise EventFormatError(f"expected an object, got {type(data).__name__}")
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventFormatError(f"unknown event type {str(data.get('type'))[:40]!r}")
    # A class object is hashable; mypy checks type[Event] against Hashable through the frozen
    # dataclass's instance __hash__ and refuses it (python/mypy#10447 and kin).
    checks = _checks(cls)  # type: ignore[arg-type]
    data = upgrade(data)   # an earlier evlab's names, as today's
    values = {}
    for key, value in data.items():
        if key == "type":
            continue
        check = checks.get(key)
        if check is None:
            raise EventFormatError(f"{cls.__name__} has no field {key[:40]!r}")
        if not check(value, 0):
            hint = _hints(cls)[key]  # type: ignore[arg-type]
            raise EventFormatError(f"{cls.__name__}.{key}: not a {_name(hint)} "
                                   f"(got {type(value).__name__})")
        if isinstance(value, list):
            value = tuple(value)  # JSON arrays come back as the tuples they were written from
        values[key] = _text(value) if isinstance(value, (str, dict, tuple)) else value
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
