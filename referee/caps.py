"""Caps on what an agent writes into every record: its service metadata and its per-move notes.

A bot controls its `$SRV.INFO` metadata and each move's `note`; copied uncapped, about 1 MB of
metadata made every record exceed the bus's payload limit, and the record was stored with all its
moves dropped (issue 41). The referee copies at most:

- `MAX_META_CHARS` (256) characters of each provenance field (kind, version, options hash, each
  model name) and `MAX_MODELS` (16) models; a capped provenance says so in its extra field
  `truncated` ("models: 41 of 9000 kept; kind: 256 of 1000000 characters kept");
- `MAX_NOTE_CHARS` (2000) characters of a move's note, the rest replaced by a marker
  "… [note truncated: N characters]".

Limits: the caps are constants, not settings; the `config_hash` of the whole metadata is kept (a
hash, bounded), so a change hidden in the cut part still changes it.
"""

from __future__ import annotations

from bus.protocol import Provenance

MAX_META_CHARS = 256
MAX_MODELS = 16
MAX_NOTE_CHARS = 2000


def cap_note(note: str | None) -> str | None:
    """A move's note within `MAX_NOTE_CHARS`, its cut marked with the length it had."""
    if note is None or len(note) <= MAX_NOTE_CHARS:
        return note
    return note[:MAX_NOTE_CHARS] + f"… [note truncated: {len(note)} characters]"


def cap_provenance(prov: Provenance) -> Provenance:
    """`prov` with every field an agent announced within the caps, and `truncated` saying what was cut."""
    cut: list[str] = []
    update: dict[str, object] = {}
    for key in ("kind", "version", "options_hash"):
        value = getattr(prov, key, None)
        if isinstance(value, str) and len(value) > MAX_META_CHARS:
            update[key] = value[:MAX_META_CHARS]
            cut.append(f"{key}: {MAX_META_CHARS} of {len(value)} characters kept")
    models = prov.models
    if len(models) > MAX_MODELS:
        cut.append(f"models: {MAX_MODELS} of {len(models)} kept")
        models = models[:MAX_MODELS]
    if any(len(m) > MAX_META_CHARS for m in models):
        cut.append(f"model names: {MAX_META_CHARS} characters each kept")
        models = [m[:MAX_META_CHARS] for m in models]
    if not cut:
        return prov
    data = {**prov.model_dump(), **update, "models": models, "truncated": "; ".join(cut)}
    return Provenance.model_validate(data)
