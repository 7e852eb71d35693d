# Two commands do all set-up on a fresh machine (Python 3.11, Java 17, pip):
#   make demo   runs the seed's behaviour-count job on an embedded local Spark
#   make test   runs the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The benchmarks also need the `bench` extra (protobuf, for Spark's transformWithStateInPandas
# in bench/w3_spark.py); `make test` and `make demo` do not install it.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# The seed's story, in two runs of the behaviour-count job: exactly-once checkpoints every 2 s, retained on
# cancellation; the first run is cancelled part-way (its checkpoints stay under out/checkpoints/<job id>/), the
# second resumes from the newest (-s; its ids continue from it) and finishes, every window counted once.
DEMO_RUN = $(BIN)/sparkpoint run -D execution.epoch.max-records=50000 -D execution.checkpointing.interval=2s \
	-D state.checkpoints.dir=file://$(CURDIR)/out/checkpoints -D state.checkpoints.num-retained=3 \
	-D execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION
DEMO_JOB = examples/behavior_counts.py --events 1000000 --output out/behavior-counts

demo: $(STAMP)
	rm -rf out/behavior-counts out/checkpoints
	@set -e; \
	job=$$($(DEMO_RUN) -d $(DEMO_JOB) --events-per-second 100000 | sed -n 's/^Job has been submitted with JobID //p'); \
	echo "first run: job $$job, cancelled after its second checkpoint"; \
	for i in $$(seq 120); do ls out/checkpoints/$$job/chk-2/_metadata >/dev/null 2>&1 && break; sleep 0.5; done; \
	$(BIN)/sparkpoint cancel $$job; \
	echo "second run: resumes from out/checkpoints/$$job (its newest checkpoint)"; \
	$(DEMO_RUN) -s out/checkpoints/$$job $(DEMO_JOB); \
	echo "window counts written under out/behavior-counts/ ($$(cat out/behavior-counts/part-* | wc -l) windows);" \
	    "the first run's checkpoints are kept under out/checkpoints/$$job/"

# The project checks its own shape first: layering (import-linter), lint (ruff), types (mypy),
# a docstring on every public API object (tests/test_public_docstrings.py).
lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check sparkpoint tests bench examples
	$(BIN)/ruff format --check sparkpoint tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_public_docstrings.py

# The slowest tests are listed at the end: the whole suite is kept under ~25 minutes.
test: lint
	$(BIN)/python -m pytest -q --durations=25

bench: $(BENCH_STAMP)
	$(BIN)/python bench/w1.py --events 5000000

clean:
	rm -rf $(VENV) out
