"""Parse JSON documents in a map and filter on the parsed value, at the default parallelism.

The map turns each contact ``(id, json)`` into ``(id, dict)`` with the phone number
raised by one; the filter keeps contacts in China by reading the dict, without parsing
again. The collection source has parallelism 1 and the map, filter and print run at
the environment's default, so the lines carry a ``N> `` subtask prefix.
"""

from __future__ import annotations

import json
from typing import Any

from job_parts import CONTACTS

from sparkpoint.datastream import StreamExecutionEnvironment


def parse_and_raise_tel(contact: tuple[int, str]) -> tuple[int, dict[str, Any]]:
    """``(id, json)`` -> ``(id, document)`` with ``tel`` one higher."""
    contact_id, document = contact[0], json.loads(contact[1])
    document["tel"] += 1
    return contact_id, document


def lives_in_china(contact: tuple[int, dict[str, Any]]) -> bool:
    return contact[1]["addr"]["country"] == "China"


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(CONTACTS).map(parse_and_raise_tel).filter(lives_in_china).print()
    env.execute()


if __name__ == "__main__":
    main()
