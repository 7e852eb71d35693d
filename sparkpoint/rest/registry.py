"""Where running jobs announce themselves, so ``sparkpoint list`` and ``cancel`` find them.

Each running job with a REST endpoint writes ``<home>/jobs/<job-id>.json`` (its pid,
address and port) and removes it when it ends; ``<home>`` is ``$SPARKPOINT_HOME`` or
``~/.sparkpoint``. Entries of processes that died without cleaning up are ignored and
removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

__all__ = ["JobRegistry"]


def _home() -> Path:
    return Path(os.environ.get("SPARKPOINT_HOME") or Path.home() / ".sparkpoint")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobRegistry:
    def __init__(self, home: Optional[Path] = None):
        self.dir = (home or _home()) / "jobs"

    def register(self, job_id: str, name: str, address: str, port: int, token: Optional[str] = None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        entry = {"job_id": job_id, "name": name, "pid": os.getpid(), "address": address, "port": port}
        if token:
            entry["token"] = token
        tmp = self.dir / f".{job_id}.tmp"
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, self.dir / f"{job_id}.json")

    def unregister(self, job_id: str) -> None:
        try:
            (self.dir / f"{job_id}.json").unlink()
        except FileNotFoundError:
            pass

    def jobs(self) -> list[dict]:
        out: list[dict] = []
        if not self.dir.exists():
            return out
        for path in sorted(self.dir.glob("*.json")):
            try:
                entry = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if not _alive(int(entry.get("pid", -1))):
                path.unlink(missing_ok=True)
                continue
            out.append(entry)
        return out

    def find(self, job_id: str) -> Optional[dict]:
        matches = [j for j in self.jobs() if j["job_id"].startswith(job_id)]
        return matches[0] if len(matches) == 1 else None
