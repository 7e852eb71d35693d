"""Where keys land: the subtask of each key of several types, keyed without and with a declared key type.

Each keyed stream runs a ``KeyedProcessFunction`` at parallelism 4 and at 7 that emits
``label|parallelism|key|subtask``; the lines are collected and printed sorted. A keyed ``map`` at the
environment's parallelism (3) prints the ``str`` keys first, in a job of its own, so the ``N>`` prefixes of
``print()`` are compared too.
Run by PyFlink 2.3.0 with ``sparkpoint`` replaced by ``pyflink`` in the imports (expected/key_placement.txt).
"""

from sparkpoint.common import Row, Types
from sparkpoint.datastream import KeyedProcessFunction, StreamExecutionEnvironment

STRS = ["a", "b", "apple", "plum", "", "é", "日本語", "x" * 300, "user-17", "K" * 70000] + [f"k{i}" for i in range(40)]
INTS = [0, 1, -1, 7, 255, 256, 65535, 65536, -129, 2**31 - 1, 2**31, -(2**31), 2**40, 10**20] + list(range(100, 130))
FLOATS = [0.5, -2.25, 3.14159, 1e300, -0.1]
TUPLES = [("a", 1), ("b", 2), (1, 2), ("k", 0.5), ("x", ("y", 3)), (None, "z"), ("a", "a")]
MISC = [None, b"bytes", b""]


class Where(KeyedProcessFunction):
    def __init__(self, label):
        self.label = label
        self.where = ""

    def open(self, runtime_context):
        n = runtime_context.get_number_of_parallel_subtasks()
        self.where = f"{n}|{{}}|{runtime_context.get_index_of_this_subtask()}"

    def process_element(self, value, ctx):
        key = ctx.get_current_key()
        yield f"{self.label}|" + self.where.format(repr(key)[:40])


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    env.set_max_parallelism(128)
    env.from_collection(STRS[:9] + STRS[10:], Types.STRING()).key_by(lambda s: s).map(
        lambda s: f"printed {s[:40]}", Types.STRING()
    ).print()
    env.execute("print prefixes")
    placed = []

    def place(label, keyed):
        for p in (4, 7):
            placed.append(keyed.process(Where(label), Types.STRING()).set_parallelism(p))

    for label, values in [("str", STRS), ("int", INTS), ("float", FLOATS), ("tuple", TUPLES), ("misc", MISC)]:
        place(label, env.from_collection([(v,) for v in values]).key_by(lambda r: r[0]))
    place("t_str", env.from_collection(STRS, Types.STRING()).key_by(lambda r: r, Types.STRING()))
    ints = [i for i in INTS if -(2**31) <= i < 2**31]
    place("t_int", env.from_collection(ints, Types.INT()).key_by(lambda r: r, Types.INT()))
    longs = [i for i in INTS if -(2**63) <= i < 2**63]
    place("t_long", env.from_collection(longs, Types.LONG()).key_by(lambda r: r, Types.LONG()))
    place("t_double", env.from_collection(FLOATS + [1.0, 0.0], Types.DOUBLE()).key_by(lambda r: r, Types.DOUBLE()))
    place("t_bool", env.from_collection([True, False], Types.BOOLEAN()).key_by(lambda r: r, Types.BOOLEAN()))
    tt = Types.TUPLE([Types.STRING(), Types.INT()])
    place("t_tuple", env.from_collection([("a", 1), ("b", 2), ("plum", 30), ("", 0)], tt).key_by(lambda r: r, tt))
    rt = Types.ROW([Types.STRING(), Types.INT()])
    place("t_row", env.from_collection([Row("a", 1), Row("b", 2), Row("plum", 30)], rt).key_by(lambda r: r, rt))
    rn = Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.LONG()])
    rows = [Row(name="a", n=1), Row(name="plum", n=30)]
    place("t_row_named", env.from_collection(rows, rn).key_by(lambda r: r, rn))
    with placed[0].union(*placed[1:]).execute_and_collect() as lines:
        print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main()
