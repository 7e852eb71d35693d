"""Word count over a fixed text, in batch execution mode.

The text's lines are split on whitespace, so punctuation stays with its word ("be,"
and "be" count apart); each word becomes ``(word, 1)``, declared as a STRING/INT tuple,
and a keyed reduce adds the ones. In BATCH mode the reduce emits each word's final count
once, at the end of input, printed as ``(word,count)``. Parallelism 1.

Before its results the job prints the three notices of PyFlink's run of the same job
(which could also read a file and write one); this job reads only its text.
"""

from __future__ import annotations

from job_parts import RESULTS_TO_STDOUT

from sparkpoint.common import Types
from sparkpoint.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

NOTICES = [
    "Executing word_count example with default input data set.",
    "Use --input to specify file input.",
    RESULTS_TO_STDOUT,
]

TEXT = [
    "To be, or not to be,--that is the question:--",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune",
    "Or to take arms against a sea of troubles,",
    "And by opposing end them?--To die,--to sleep,--",
    "No more; and by a sleep to say we end",
    "The heartache, and the thousand natural shocks",
    "That flesh is heir to,--'tis a consummation",
    "Devoutly to be wish'd. To die,--to sleep;--",
    "To sleep! perchance to dream:--ay, there's the rub;",
    "For in that sleep of death what dreams may come,",
    "When we have shuffled off this mortal coil,",
    "Must give us pause: there's the respect",
    "That makes calamity of so long life;",
    "For who would bear the whips and scorns of time,",
    "The oppressor's wrong, the proud man's contumely,",
    "The pangs of despis'd love, the law's delay,",
    "The insolence of office, and the spurns",
    "That patient merit of the unworthy takes,",
    "When he himself might his quietus make",
    "With a bare bodkin? who would these fardels bear,",
    "To grunt and sweat under a weary life,",
    "But that the dread of something after death,--",
    "The undiscover'd country, from whose bourn",
    "No traveller returns,--puzzles the will,",
    "And makes us rather bear those ills we have",
    "Than fly to others that we know not of?",
    "Thus conscience does make cowards of us all;",
    "And thus the native hue of resolution",
    "Is sicklied o'er with the pale cast of thought;",
    "And enterprises of great pith and moment,",
    "With this regard, their currents turn awry,",
    "And lose the name of action.--Soft you now!",
    "The fair Ophelia!--Nymph, in thy orisons",
    "Be all my sins remember'd.",
]


def add_counts(left: tuple[str, int], right: tuple[str, int]) -> tuple[str, int]:
    return left[0], left[1] + right[1]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(1)
    for notice in NOTICES:
        print(notice)
    counts = (
        env.from_collection(TEXT)
        .flat_map(str.split)
        .map(lambda word: (word, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda pair: pair[0])
        .reduce(add_counts)
    )
    counts.print()
    env.execute()


if __name__ == "__main__":
    main()
