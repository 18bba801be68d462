"""Every event type by name, as the codec reads them (a session's and a campaign's)."""

from sessions.stream import campaign_events, events
from sessions.stream.events import Event


def _event_types(*modules) -> dict[str, type[Event]]:
    return {name: cls for module in modules for name, cls in vars(module).items()
            if isinstance(cls, type) and issubclass(cls, Event) and cls is not Event}


EVENT_TYPES: dict[str, type[Event]] = _event_types(events, campaign_events)
