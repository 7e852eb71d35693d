"""The text-line reader's fast path (the whole read decoded at once) gives the same lines, positions and
end-of-file as reading the file line by line with the general path, for any file and any limits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.connectors.base import SourceSplit
from sparkpoint.connectors.files import FileSourceReader, LineFormat, TextLineFormat

lines = st.lists(st.text(alphabet=st.sampled_from("ab\r é€"), max_size=6), max_size=30)


class ReferenceLines(LineFormat):
    """Text lines through the general (per line) path: the oracle."""

    def parse(self, line: str) -> str:
        return line


def read_all(reader: FileSourceReader, path: str, max_records: int, max_bytes: int) -> list:
    split = SourceSplit(path)
    reads = []
    while not split.finished and len(reads) < 1000:
        result = reader.read(split, max_records, max_bytes)
        split = result.split
        reads.append((result.values, split.position, split.finished))
    return reads


@settings(max_examples=300, deadline=None)
@given(lines, st.booleans(), st.integers(1, 7), st.integers(1, 40), st.sampled_from(["utf-8", "latin-1", "cp1252"]))
def test_fast_text_reads_equal_line_by_line_reads(tmp_path_factory, content, trailing, max_records, max_bytes, charset):
    text = "\n".join(content) + ("\n" if trailing and content else "")
    if charset == "latin-1":
        text = text.replace("€", "e")
    path = tmp_path_factory.mktemp("lines") / "f.txt"
    path.write_bytes(text.encode(charset))
    fast = read_all(FileSourceReader(TextLineFormat(charset)), str(path), max_records, max_bytes)
    reference = read_all(FileSourceReader(ReferenceLines(charset)), str(path), max_records, max_bytes)
    assert fast == reference
    assert [v for values, _, _ in fast for v in values] == [v for values, _, _ in reference for v in values]
