"""What the driver keeps of a source's splits between checkpoints."""

from __future__ import annotations

from sparkpoint.datastream.connectors.file_system import FileSource, StreamFormat
from sparkpoint.runtime.source_coordinator import SourceCoordinator


def test_the_files_a_monitored_directory_ever_held_are_not_all_kept_by_the_driver(tmp_path):
    """A file source's finished splits were kept for a notification only Kafka's enumerator uses: one entry per file
    ever read, for the job's life (and copied at every checkpoint). Only the splits still being read are kept."""
    for i in range(300):
        (tmp_path / f"f{i:03d}.txt").write_text(f"{i}\n")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).build()
    sc = SourceCoordinator(0, "files", source, 2)
    finished = 0
    for _ in range(400):
        for subtask, splits in sc.assign().items():
            done = [s.with_(finished=True) for s in splits]
            finished += len(done)
            sc.update(subtask, done)
        if sc.no_more_splits() and not any(sc.assigned.values()):
            break
    assert finished == sc.finished_splits == 300
    assert sc.read_to == {}
    sc.on_checkpoint_triggered(1)
    assert sc._at_checkpoint[1] == []
