"""The versioned layout of the tabular transformers' saved state (``to_state``/``from_state``)."""

from __future__ import annotations

__all__ = ["STATE_VERSION", "check_state"]

#: Version of the ``to_state`` layout; ``from_state`` refuses other versions.
STATE_VERSION = 1


def check_state(state: dict, cls_name: str) -> None:
    """ValueError unless ``state`` is a ``cls_name``'s ``to_state()`` of this version."""
    if not isinstance(state, dict) or state.get("class") != cls_name:
        raise ValueError(f"this state is not a {cls_name}'s (class "
                         f"{state.get('class') if isinstance(state, dict) else type(state)!r}); "
                         f"pass the dict returned by {cls_name}.to_state()")
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"{cls_name} state version {state.get('version')!r} is not supported "
                         f"(this version reads {STATE_VERSION}); refit and save again")
