"""``moto_server`` whose request recorder writes one request at a time.

moto's recorder appends each request to its file from the thread that served it, without a lock. With
concurrent requests (a job's executors uploading checkpoint files at once), one request's JSON could be cut by
another's, and the recording was damaged. Run as a script: ``python moto_locked.py -H HOST -p PORT``.
"""

from __future__ import annotations

import functools
import sys
import threading

from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main

_LOCK = threading.Lock()
_record = Recorder._record_request


@functools.wraps(_record)
def _record_one_at_a_time(self, *args, **kwargs):
    with _LOCK:
        return _record(self, *args, **kwargs)


Recorder._record_request = _record_one_at_a_time  # type: ignore[method-assign]

if __name__ == "__main__":
    main(sys.argv[1:])
