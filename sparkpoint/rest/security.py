"""The endpoint's protections: bind address and token, TLS, allowed state roots, request size.

Keys (Flink's where one maps, documented in ``docs/deploy.md``):

- ``rest.bind-address`` (else ``rest.address``; default ``127.0.0.1``): a loopback
  address serves without a token unless ``rest.token`` is set; any other address requires
  one: ``rest.token``, or one is generated and written, readable by the owner only, to
  the job registry. Tokens are compared with :func:`secrets.compare_digest`.
- ``security.ssl.rest.enabled`` (or ``rest.ssl.enabled``): HTTPS, with the PEM files
  ``security.ssl.rest.certificate`` and ``security.ssl.rest.private-key`` (and
  ``security.ssl.rest.key-password``): Flink's keystore, in Python's form.
- ``state.savepoints.dir``, ``state.checkpoints.dir`` (and their Flink 2.x names) and
  ``sparkpoint.rest.allowed-dirs`` (a comma-separated list): the only roots a savepoint
  target or a disposal requested over REST may lie under -- unless the request carries the
  job owner's token: a secret of each endpoint, kept in the owner-only job registry, that the
  ``sparkpoint`` CLI of the user who started the job sends; that request may write where the
  owner can, as Flink's savepoint target may lie anywhere. A target is resolved once, when it
  is checked (symbolic links followed), and only the resolved path is used after; a local
  target directory is made, and a disposed savepoint removed, by walking from the root one
  name at a time without following a symbolic link, so a link planted in the path after
  the check fails the request instead of leading out of the root.
- ``rest.server.max-content-length``: the largest request body accepted (default 1 MiB); a body's
  JSON may nest arrays and objects :data:`MAX_JSON_DEPTH` levels deep (Flink's bodies nest one).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import secrets
import shutil
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sparkpoint.errors import ConfigurationError
from sparkpoint.rest.job_json import RestError

__all__ = ["RestSecurity", "LOOPBACK", "MAX_JSON_DEPTH", "BY_OWNER", "check_target", "normalize_target", "parse_body"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_CONTENT = 1024 * 1024
MAX_JSON_DEPTH = 32
#: whether the request being served carries the job owner's token (set by the server for each request)
BY_OWNER: ContextVar[bool] = ContextVar("sparkpoint_rest_by_owner", default=False)
_ROOT_KEYS = (
    "state.savepoints.dir",
    "state.checkpoints.dir",
    "execution.checkpointing.savepoint-dir",
    "execution.checkpointing.dir",
)


def _ssl_key(config: Any, name: str) -> str | None:
    return config.get_string(f"security.ssl.rest.{name}") or config.get_string(f"rest.ssl.{name}")


@dataclass
class RestSecurity:
    """How one endpoint is protected, read once from the job's configuration."""

    bind_address: str
    token: str | None
    certificate: str | None
    private_key: str | None
    key_password: str | None
    roots: list[str]
    max_content_length: int
    owner_token: str = field(default_factory=lambda: secrets.token_hex(32))

    @classmethod
    def from_config(cls, config: Any) -> RestSecurity:
        bind = config.get_string("rest.bind-address") or config.get_string("rest.address") or "127.0.0.1"
        token = config.get_string("rest.token") or (None if bind in LOOPBACK else secrets.token_hex(32))
        enabled = str(_ssl_key(config, "enabled") or "false").lower() == "true"
        cert, key = _ssl_key(config, "certificate"), _ssl_key(config, "private-key")
        if enabled and not (cert and key):
            raise ConfigurationError(
                "security.ssl.rest.enabled needs security.ssl.rest.certificate and "
                "security.ssl.rest.private-key (PEM files)"
            )
        roots = list(dict.fromkeys(config.get_string(k) for k in _ROOT_KEYS if config.get_string(k)))
        roots += [r.strip() for r in (config.get_string("sparkpoint.rest.allowed-dirs") or "").split(",") if r.strip()]
        limit = int(config.get("rest.server.max-content-length", DEFAULT_MAX_CONTENT))
        return cls(
            bind,
            token,
            cert if enabled else None,
            key if enabled else None,
            _ssl_key(config, "key-password"),
            [normalize_target(r) for r in roots],
            limit,
        )

    @property
    def scheme(self) -> str:
        return "https" if self.certificate else "http"

    def authorized(self, header: str | None, cookie: str | None = None) -> bool:
        """Whether an ``Authorization`` header (or the web UI's cookie) carries the token (always, without one);
        the owner's token is good too."""
        if not self.token:
            return True
        return self.matches(_bearer(header)) or self.matches(cookie) or self.by_owner(header)

    def by_owner(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries the job owner's token."""
        return secrets.compare_digest(_bearer(header).encode(), self.owner_token.encode())

    def matches(self, token: str | None) -> bool:
        return bool(self.token) and secrets.compare_digest((token or "").encode(), self.token.encode())  # type: ignore[union-attr]

    def check_target(self, path: str | None, what: str) -> str | None:
        """``path`` resolved (see :func:`check_target`): use what this returns, never ``path`` again. A request by
        the job's owner (:data:`BY_OWNER`) may name any path."""
        if BY_OWNER.get() and isinstance(path, str) and path and "\x00" not in path:
            return normalize_target(path)
        return check_target(path, self.roots, what)

    def make_target_directory(self, target: str) -> None:
        """Create the checked local ``target`` directory, walking from its root without following links (the
        owner's anywhere, as the owner could)."""
        if BY_OWNER.get() and not self._under_a_root(target):
            if target.startswith("file://"):
                os.makedirs(_local(target), exist_ok=True)
            return
        root = self._local_root(target)
        if root is not None:
            os.makedirs(root, exist_ok=True)  # the root itself is configuration, trusted as it is
            os.close(_open_below(root, _local(target), what=target, create=True))

    def remove_below_root(self, location: str) -> None:
        """Delete the directory ``location`` (under a root), reached from its root without following links (the
        owner's anywhere)."""
        if BY_OWNER.get() and not self._under_a_root(location) and location.startswith("file://"):
            shutil.rmtree(_local(location))
            return
        root = self._local_root(location)
        if root is None:
            import fsspec

            fs, p = fsspec.core.url_to_fs(location)
            fs.rm(p, recursive=True)
            return
        path = _local(location)
        fd = _open_below(root, posixpath.dirname(path), what=location, create=False)
        try:
            shutil.rmtree(posixpath.basename(path), dir_fd=fd)  # refuses a link itself; never follows one inside
        finally:
            os.close(fd)

    def _under_a_root(self, target: str) -> bool:
        return any(target == root or target.startswith(root.rstrip("/") + "/") for root in self.roots)

    def _local_root(self, target: str) -> str | None:
        """The local root ``target`` (resolved) lies under; None for a target on another file system."""
        target = normalize_target(target) if not target.startswith("file://") else target
        for root in self.roots:
            if root.startswith("file://") and (target == root or target.startswith(root.rstrip("/") + "/")):
                return _local(root)
        if target.startswith("file://"):
            raise RestError(400, f"{target!r} is outside the allowed directories")
        return None


def normalize_target(path: str) -> str:
    """``scheme://netloc/normalized/path`` of a URL or local path (``file://`` for local ones)."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a local path (a drive letter is a path too)
        local = parts.path if parts.scheme == "file" else path
        try:
            return "file://" + os.path.realpath(local)  # symbolic links resolved: no way out of a root through one
        except OSError as e:  # a link swapped between realpath's lstat and its readlink (EINVAL): refused
            raise RestError(400, f"{path!r} changed while it was resolved: {e.strerror}") from e
    return f"{parts.scheme}://{parts.netloc}{posixpath.normpath('/' + parts.path)}"


def check_target(path: str | None, roots: list[str], what: str) -> str | None:
    """``path`` resolved (:func:`normalize_target`: ``file://`` and its real path for a local one) if that lies
    under one of ``roots``; otherwise a 400 naming the path and the roots. The resolved form is what was checked,
    so it is what must be used: ``path`` itself may lead elsewhere by the time it is used."""
    if path is None:
        return None
    if not isinstance(path, str) or not path or "\x00" in path:
        raise RestError(400, f"{what}: expected a path, got {path!r}")
    target = normalize_target(path)
    for root in roots:
        if target == root or target.startswith(root.rstrip("/") + "/"):
            return target
    allowed = ", ".join(roots) or "none"
    raise RestError(
        400,
        f"{what} {path!r} is outside the allowed directories: {allowed}. Set state.savepoints.dir or "
        f"sparkpoint.rest.allowed-dirs (a comma-separated list) to allow more, or send the job owner's token, as the "
        f"sparkpoint CLI of the user who started the job does",
    )


def _bearer(header: str | None) -> str:
    return header[len("Bearer ") :] if header and header.startswith("Bearer ") else ""


def parse_body(data: bytes) -> Any:
    """A request body's JSON; a 400 if it is not JSON or nests deeper than :data:`MAX_JSON_DEPTH` (the parser
    would otherwise run out of stack on a body of a few thousand ``[``)."""
    too_deep = RestError(400, f"request body nests JSON arrays or objects deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(data)
    except RecursionError:
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RestError(400, f"request body is not JSON: {e}") from None
    containers = [(body, 1)] if isinstance(body, (dict, list)) else []
    while containers:
        value, depth = containers.pop()
        if depth > MAX_JSON_DEPTH:
            raise too_deep
        children = value.values() if isinstance(value, dict) else value
        containers.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return body


def _local(url: str) -> str:
    return url[len("file://") :] if url.startswith("file://") else url


def _open_below(root: str, path: str, what: str, create: bool) -> int:
    """A descriptor of the local directory ``path`` (``root`` or below it, both real paths), reached from ``root``
    one name at a time without following a symbolic link (``O_NOFOLLOW``); with ``create``, a missing directory
    is made on the way. A link met on the way (planted since the path was checked) is a 400."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in [n for n in path[len(root) :].split("/") if n]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                below = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                raise RestError(
                    400,
                    f"{what!r}: {name!r} is not a directory under {root!r} any more (a symbolic "
                    f"link, or removed, since the path was checked): {e.strerror}",
                ) from None
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd
