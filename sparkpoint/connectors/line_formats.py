"""Line formats of the file source: how one line of a file becomes a record (text, CSV, JSON lines)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LineFormat", "TextLineFormat", "CsvFormat", "JsonLinesFormat"]


class LineFormat:
    """How one line of a file becomes a record. ``parse`` raises ``ValueError`` on bad input."""

    charset: str = "utf-8"
    skip_header: bool = False
    skip_blank: bool = False

    def __init__(self, charset: str = "utf-8"):
        if "x\r\n".encode(charset) != b"x\r\n":
            raise ValueError(f"charset {charset!r} is not ASCII-compatible; line formats need one (e.g. UTF-8)")
        self.charset = charset

    def parse(self, text: str) -> Any:
        return text


class TextLineFormat(LineFormat):
    """Each line is one ``str`` record, without its line terminator."""


class CsvFormat(LineFormat):
    """Each line is one CSV record, a tuple; quoted fields may not span lines.

    Args:
        delimiter: the field separator.
        field_types: callables converting each field (``int``, ``float``, ``str``, ``bool``
            or ``None`` for ``str``); when given, a line must have exactly that many fields.
        skip_header: skip the first line of every file.
        quote_char: the quote character.
    """

    skip_blank = True

    def __init__(
        self,
        delimiter: str = ",",
        field_types: Sequence[Callable | None] | None = None,
        skip_header: bool = False,
        quote_char: str = '"',
        charset: str = "utf-8",
    ):
        super().__init__(charset)
        self.delimiter, self.quote_char, self.skip_header = delimiter, quote_char, skip_header
        self.field_types = (
            [_convert_bool if t is bool else (t or str) for t in field_types] if field_types is not None else None
        )

    def parse(self, text: str) -> tuple:
        try:
            fields = next(csv.reader([text], delimiter=self.delimiter, quotechar=self.quote_char, strict=True))
        except csv.Error as e:
            raise ValueError(f"invalid CSV: {e}") from e
        if self.field_types is None:
            return tuple(fields)
        if len(fields) != len(self.field_types):
            raise ValueError(f"expected {len(self.field_types)} fields, found {len(fields)}")
        out = []
        for i, (convert, value) in enumerate(zip(self.field_types, fields)):
            try:
                out.append(convert(value))
            except Exception as e:  # noqa: BLE001 - any converter failure makes the line malformed
                raise ValueError(
                    f"field {i + 1}: cannot convert {value!r} with {getattr(convert, '__name__', convert)}: {e}"
                ) from e
        return tuple(out)


def _convert_bool(value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes", "t", "y"):
        return True
    if low in ("false", "0", "no", "f", "n"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


class JsonLinesFormat(LineFormat):
    """Each non-blank line is one JSON object, a ``dict``."""

    skip_blank = True

    def parse(self, text: str) -> dict:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"invalid JSON: {e}") from e
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, found {type(value).__name__}")
        return value


# -- source: enumerator and reader -----------------------------------------------------------------
