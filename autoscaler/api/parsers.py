"""The API's only body parser: JSON (any other media type is a 415). A body nested too deeply for the JSON
decoder is a 400 naming the body, like any other malformed JSON."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    """DRF's JSONParser (NaN and Infinity rejected); RecursionError of a deeply nested body -> ParseError."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
