"""``sparkpoint history-server``: ended jobs' archives over Flink's REST paths and the web UI."""

from __future__ import annotations

import click

from sparkpoint.cli.common import load_conf, parse_dynamic
from sparkpoint.cli.group import main
from sparkpoint.common.config_keys import override
from sparkpoint.common.configuration import parse_duration_ms

__all__ = ["history_server"]


@main.command(name="history-server")
@click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE", help="A key: historyserver.* (Flink's).")
@click.option("--config-file", "conf_file", default=None, type=click.Path(exists=True, dir_okay=False))
def history_server(dynamic: tuple[str, ...], conf_file: str | None) -> None:
    """Serve ended jobs' archives (historyserver.archive.fs.dir; default this machine's) until stopped."""
    import uvicorn

    from sparkpoint.rest.archive import ArchiveStore, local_archive_dir
    from sparkpoint.rest.history_server import DEFAULT_PORT, history_app

    config = override(load_conf(conf_file), parse_dynamic(dynamic))
    dirs = [d.strip() for d in str(config.get("historyserver.archive.fs.dir") or "").split(",") if d.strip()]
    dirs = dirs or [str(local_archive_dir())]
    host = str(config.get("historyserver.web.address") or "127.0.0.1")
    port = int(config.get("historyserver.web.port") or DEFAULT_PORT)
    refresh_s = parse_duration_ms(config.get("historyserver.archive.fs.refresh-interval") or "10 s") / 1000
    click.echo(f"History server on http://{host}:{port}/ serving the archives in {', '.join(dirs)}", err=True)
    uvicorn.run(history_app(ArchiveStore(dirs), refresh_s), host=host, port=port, log_level="warning")
