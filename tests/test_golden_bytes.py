"""Records and bus messages are byte-identical to the golden capture (tests/golden_capture.py says
what is captured, what is normalised, and when the golden file may be regenerated)."""

from __future__ import annotations

import difflib
import json

import pytest

from tests.golden_capture import GOLDEN, capture, dumps


@pytest.mark.slow
async def test_records_and_messages_match_the_golden_capture(nats_url: str) -> None:
    got = dumps(await capture(nats_url)).splitlines()
    want = GOLDEN.read_text().splitlines()
    assert len(got) == len(want), f"{len(got)} matches captured, the golden file has {len(want)}"
    for g, w in zip(got, want, strict=True):
        if g != w:
            a = json.dumps(json.loads(w), indent=1, sort_keys=True).splitlines()
            b = json.dumps(json.loads(g), indent=1, sort_keys=True).splitlines()
            diff = "\n".join(list(difflib.unified_diff(a, b, "golden", "now", lineterm=""))[:80])
            pytest.fail(f"match {json.loads(w)['match_id']} differs from the golden capture:\n{diff}")
