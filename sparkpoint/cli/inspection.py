"""``sparkpoint inspect``: what a checkpoint or savepoint holds, and whether it restores into a job."""

from __future__ import annotations

import sys
from typing import Any

import click

from sparkpoint.cli.common import parse_dynamic
from sparkpoint.cli.control import size, ts
from sparkpoint.cli.group import main
from sparkpoint.cli.jobs import capture_plan
from sparkpoint.errors import SparkpointError

__all__ = ["inspect"]


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True})
@click.argument("path")
@click.option(
    "--against",
    "against",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="A job script: tell, without running it, whether and how PATH would restore into it.",
)
@click.option(
    "-n",
    "--allowNonRestoredState",
    "allow_non_restored",
    is_flag=True,
    help="With --against: state without an operator may be skipped.",
)
@click.option(
    "--diff",
    "diff",
    default=None,
    metavar="PATH2",
    help="Another checkpoint or savepoint: the keys added, removed and changed in each keyed state from PATH to it.",
)
@click.option("--uid", "uids", multiple=True, help="With --diff: only these operators.")
@click.option(
    "-D",
    "dynamic",
    multiple=True,
    metavar="KEY=VALUE",
    help="Configuration: s3.* keys of the store PATH is on, and the --against job's keys.",
)
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED)
def inspect(
    path: str,
    against: str | None,
    allow_non_restored: bool,
    diff: str | None,
    uids: tuple[str, ...],
    dynamic: tuple[str, ...],
    job_args: tuple[str, ...],
) -> None:
    """What a checkpoint or savepoint holds (it is verified file by file first). PATH may also be a job's
    checkpoint directory: then its newest retained checkpoint that loads, as ``run -s`` picks it. With
    ``--diff PATH2``: what changed in the keyed state from PATH to PATH2."""
    from sparkpoint.checkpoint.loader import load_latest_checkpoint
    from sparkpoint.storage.file_systems import configure_file_systems

    configure_file_systems(parse_dynamic(dynamic))
    try:
        restored = load_latest_checkpoint(path)
        later = load_latest_checkpoint(diff) if diff else None
    except SparkpointError as e:
        raise click.ClickException(str(e)) from None
    if _name(restored.location) != _name(path):  # a job's directory: say which of its checkpoints it is
        click.echo(
            f"{path} is a job's checkpoint directory: its newest retained checkpoint that loads is "
            f"{restored.kind} {restored.checkpoint_id} ({restored.location}), as run -s would restore"
        )
    if later is not None:
        _diff(restored, later, uids)
    elif against:
        _inspect_against(restored, against, job_args, parse_dynamic(dynamic), allow_non_restored)
    else:
        _describe(restored)


def _name(pointer: str) -> str:
    """The checkpoint directory's name of a pointer (``.../chk-3``, ``.../chk-3/_metadata``: ``chk-3``)."""
    parts = pointer.rstrip("/").split("/")
    return parts[-2] if parts[-1] == "_metadata" and len(parts) > 1 else parts[-1]


def _describe(restored: Any) -> None:
    """What a loaded checkpoint holds: when it was taken, its operators and their state, the sources' open
    splits and the sinks' pre-committed files."""
    from sparkpoint.state_processor.reader import keyed_state_summary

    m = restored.metadata
    d = restored.driver_state
    click.echo(f"{m.kind} {m.checkpoint_id} of job {m.job_id} ({m.job_name}) at {restored.location}")
    click.echo(
        f"  taken at the end of epoch {m.barrier_epoch}, triggered {ts(m.trigger_timestamp)}, "
        f"completed {ts(m.completion_timestamp)}; max parallelism {m.max_parallelism}"
    )
    click.echo(f"  {len(m.state_files())} state files, {size(m.total_size())}, all checksums verified")
    click.echo("  operators:")
    summary = keyed_state_summary(restored)
    for uid, op in sorted(m.operators.items()):
        keyed = sum(f.handle.size for f in op.keyed_state)
        has_op_state = uid in d.get("operator_states", {})
        parts = [f"parallelism {op.parallelism}"]
        if op.keyed_state:
            ranges = len({(f.key_group_start, f.key_group_end) for f in op.keyed_state})
            parts.append(f"keyed state {size(keyed)} in {ranges} key-group ranges")
        if has_op_state:
            parts.append("operator state")
        click.echo(f"    {uid} ({op.name}): {', '.join(parts)}")
        states = op.schema.states if op.schema is not None else {}
        if op.schema is not None and op.schema.key_kinds:
            click.echo(f"      keys: {op.schema.key_text()}")
        for name, (entries, keys) in sorted(summary.get(uid, {}).items()):
            declared = f"; {states[name].text()}" if name in states else ""
            click.echo(f"      {name}: {entries:,} entries, {keys:,} keys{declared}")
    for uid, src in d.get("sources", {}).items():
        splits = [s for ss in src["splits"].values() for s in ss]
        click.echo(
            f"  source {uid}: {len(splits)} open split(s): "
            + ", ".join(f"{s.split_id}@{s.position}" for s in splits[:6])
            + (" ..." if len(splits) > 6 else "")
        )
    for uid, c in d.get("committables", {}).items():
        click.echo(f"  sink {uid}: {len(c)} pre-committed file(s) to commit on restore")


def _diff(before: Any, after: Any, uids: tuple[str, ...]) -> None:
    """Per keyed operator and state, what changed from ``before`` to ``after`` (read here, not on Spark)."""
    from sparkpoint.state_processor.diff import local_changes

    click.echo(
        f"{before.kind} {before.checkpoint_id} ({before.location}) -> {after.kind} {after.checkpoint_id} "
        f"({after.location}):"
    )
    keyed = {u for r in (before, after) for u, op in r.metadata.operators.items() if op.keyed_state}
    missing = set(uids) - keyed
    if missing:
        raise click.ClickException(f"no keyed state of uid {', '.join(sorted(missing))}; keyed uids: {sorted(keyed)}")
    for uid in sorted(set(uids) or keyed):
        click.echo(f"  {uid}:")
        for c in local_changes(before, after, uid):
            counts = ", ".join(f"{len(c.keys[k]):,} keys {k}" for k in ("added", "removed", "changed"))
            click.echo(f"    {c.state}: {counts}")
            for change, keys in c.examples.items():
                if keys:
                    more = " ..." if len(c.keys[change]) > len(keys) else ""
                    click.echo(f"      {change}: {', '.join(map(repr, keys))}{more}")


def _inspect_against(restored: Any, job: str, job_args: tuple[str, ...], conf: dict, allow_non_restored: bool) -> None:
    from sparkpoint.checkpoint.compatibility import check_compatibility
    from sparkpoint.runtime.restore import job_operators
    from sparkpoint.runtime.state_probe import declared_schemas

    plan = capture_plan(job, None, job_args, conf)
    recorded = {uid for uid, op in restored.metadata.operators.items() if op.schema is not None}
    report = check_compatibility(restored, job_operators(plan, declared_schemas(plan, recorded)), plan.max_parallelism)
    m = restored.metadata
    click.echo(f"{m.kind} {m.checkpoint_id} ({restored.location}) against {job}:")
    for line in report.lines(allow_non_restored):
        click.echo(line)
    if not report.restorable(allow_non_restored):
        sys.exit(1)
