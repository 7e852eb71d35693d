"""Where running jobs announce themselves, so ``sparkpoint list`` and ``cancel`` find them.

Each running job with a REST endpoint writes ``<home>/jobs/<job-id>.json`` (its process:
pid, start time and host; address, port, scheme, its token when it has one, and the owner's token) and removes
it when it ends; ``<home>`` is ``$SPARKPOINT_HOME`` or ``~/.sparkpoint``. The directory is
the owner's only (0700) and every entry is readable by the owner only (0600): an entry may
hold the endpoint's token. Entries of processes that died without cleaning up are ignored
and removed: a pid that is free, or that names a process started at another time than the
entry's (the kernel reused the pid of a killed job), or one from before the host last
booted. An entry written on another host (a home directory shared between hosts) is not
listed and left to that host.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from sparkpoint.common.processes import ProcessIdentity

__all__ = ["JobRegistry"]


def _home() -> Path:
    return Path(os.environ.get("SPARKPOINT_HOME") or Path.home() / ".sparkpoint")


class JobRegistry:
    def __init__(self, home: Path | None = None):
        self.dir = (home or _home()) / "jobs"

    def register(
        self,
        job_id: str,
        name: str,
        address: str,
        port: int,
        token: str | None = None,
        scheme: str = "http",
        certificate: str | None = None,
        owner_token: str | None = None,
    ) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        entry: dict = {
            "job_id": job_id,
            "name": name,
            **ProcessIdentity.current().to_json(),
            "address": address,
            "port": port,
            "scheme": scheme,
        }
        if token:
            entry["token"] = token
        if owner_token:
            entry["owner_token"] = owner_token  # lets the owner's CLI name a savepoint target anywhere
        if certificate:
            entry["certificate"] = os.path.abspath(certificate)
        tmp = self.dir / f".{job_id}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(json.dumps(entry))
        os.replace(tmp, self.dir / f"{job_id}.json")

    def unregister(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{job_id}.json").unlink()

    def jobs(self) -> list[dict]:
        out: list[dict] = []
        if not self.dir.exists():
            return out
        for path in sorted(self.dir.glob("*.json")):
            try:
                entry = json.loads(path.read_text())
                process = ProcessIdentity.from_json(entry)
            except (OSError, ValueError, TypeError, AttributeError):  # being written, or not an entry
                continue
            gone = process.gone()  # dead, or its pid reused by another process
            if gone or process.host_rebooted():
                path.unlink(missing_ok=True)
                continue
            if gone is None:  # another host's (a shared home directory): not this machine's job
                continue
            out.append(entry)
        return out

    def find(self, job_id: str) -> dict | None:
        matches = [j for j in self.jobs() if j["job_id"].startswith(job_id)]
        return matches[0] if len(matches) == 1 else None
