"""The ``sparkpoint`` command group, its logging options and ``--version``."""

from __future__ import annotations

import logging
from importlib import metadata

import click

__all__ = ["main"]


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    try:
        version = metadata.version("sparkpoint")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        version = "unknown"
    click.echo(f"Version: {version}, Commit ID: unknown")  # the form of Flink's `flink --version`
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
def main(verbose: int) -> None:
    """sparkpoint: Flink's stateful stream processing on Apache Spark."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
