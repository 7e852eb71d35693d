"""Three jobs in turn on one environment: map, filter then map, and a keyed sum.

The source holds the contacts as named rows ``Row(id, info)``, ``info`` a JSON document.
Each job ends in ``print()`` and is run by its own ``execute()``, which prints only the
sink of that job:

1. every contact as ``(id, json)`` with its phone number (``tel``) raised by one;
2. the same for contact 1 only;
3. the running sum of phone numbers per country, one ``(country, sum)`` per contact.

At parallelism 1 every job prints in input order.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from job_parts import CONTACTS

from sparkpoint.common import Row, Types
from sparkpoint.datastream import DataStream, StreamExecutionEnvironment

CONTACT_ROW = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])


def raise_tel(contact: Row) -> tuple[int, str]:
    """``(id, json)`` with ``tel`` one higher; the document keeps its key order."""
    document = json.loads(contact.info)
    document["tel"] += 1
    return contact.id, json.dumps(document)


def country_and_tel(contact: Row) -> tuple[str, int]:
    document = json.loads(contact.info)
    return document["addr"]["country"], document["tel"]


def all_raised(contacts: DataStream) -> DataStream:
    return contacts.map(raise_tel)


def first_raised(contacts: DataStream) -> DataStream:
    return contacts.filter(lambda contact: contact.id == 1).map(raise_tel)


def tel_sum_per_country(contacts: DataStream) -> DataStream:
    return contacts.map(country_and_tel).key_by(lambda pair: pair[0]).sum(1)


JOBS: list[Callable[[DataStream], DataStream]] = [all_raised, first_raised, tel_sum_per_country]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    contacts = env.from_collection(CONTACTS, type_info=CONTACT_ROW)
    for job in JOBS:
        job(contacts).print()
        env.execute()


if __name__ == "__main__":
    main()
