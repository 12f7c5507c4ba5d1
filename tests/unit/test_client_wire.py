"""The NDJSON line splitter both HTTP clients read watch streams with."""
from __future__ import annotations

import pytest

from phalanx.client import wire
from phalanx.objects.errors import ApiError


def test_lines_whatever_the_chunk_boundaries():
    body = b'{"a":1}\n\n{"b":2}\n{"c":3}'
    for cut in range(1, len(body)):
        s = wire.LineSplitter()
        got = s.feed(body[:cut]) + s.feed(body[cut:]) + s.rest()
        assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}'], cut
    assert wire.LineSplitter().rest() == []


def test_a_line_past_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(wire, "MAX_LINE", 8)
    s = wire.LineSplitter()
    assert s.feed(b"12345678\n") == [b"12345678"]
    with pytest.raises(ApiError, match="larger than the client accepts"):
        s.feed(b"123456789")


def test_log_query_names_only_what_was_asked():
    assert wire.log_params(None, False, None, False) == {}
    assert wire.log_params("c", True, 0, True) == {"container": "c", "follow": "true", "previous": "true",
                                                  "tailLines": "0"}
