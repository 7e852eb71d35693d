# Two commands do all set-up on a fresh machine (Python 3.11, Java 17, pip):
#   make demo   runs the seed's behaviour-count job on an embedded local Spark
#   make test   runs the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	rm -rf out/behavior-counts
	$(BIN)/sparkpoint run examples/behavior_counts.py --events 200000 --output out/behavior-counts
	@echo "window counts written under out/behavior-counts/"

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/w1.py --events 5000000

clean:
	rm -rf $(VENV) out
