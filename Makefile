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

demo: $(STAMP)
	rm -rf out/behavior-counts
	$(BIN)/sparkpoint run -D execution.epoch.max-records=50000 \
	    -D execution.checkpointing.interval=2s -D state.checkpoints.dir=file://$(CURDIR)/out/checkpoints \
	    -D state.checkpoints.num-retained=3 \
	    examples/behavior_counts.py --events 1000000 --output out/behavior-counts
	@echo "window counts written under out/behavior-counts/ ($$(cat out/behavior-counts/part-* | wc -l) windows)"

# The project checks its own shape first: layering (import-linter), lint (ruff), types (mypy),
# a docstring on every public API object (tests/test_public_docstrings.py).
lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check sparkpoint tests bench examples
	$(BIN)/ruff format --check sparkpoint tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_public_docstrings.py

test: lint
	$(BIN)/python -m pytest -q

bench: $(BENCH_STAMP)
	$(BIN)/python bench/w1.py --events 5000000

clean:
	rm -rf $(VENV) out
