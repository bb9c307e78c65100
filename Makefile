VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast lint bench chaos clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@# the TLS tests and scripts/gen-certs.sh make certificates with the openssl command
	command -v openssl >/dev/null || (apt-get update -qq && apt-get install -y -qq openssl >/dev/null)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==24.3.1
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

run: install
	$(VENV)/bin/warren server --data-dir ./data

lint: install
	$(VENV)/bin/ruff check .

test: install lint
	$(PY) -m pytest -q --durations=60

test-fast: install
	$(PY) -m pytest -q -m "not slow"

# One long mixed run of the randomised nemesis on a fresh compose cluster (cluster-tests/chaos_mixed.py;
# KINDS=kill9,clock-jump,... chooses the fault kinds, clock kinds included; NODES=3 or 5):
# history and report in cluster-tests/chaos-runs/seed-$(SEED)[-5-nodes]; fails when anything is lost or violated.
SEED ?= 1
DURATION ?= 180
NODES ?= 3
KINDS ?=
chaos: install
	$(PY) cluster-tests/chaos_mixed.py --seed $(SEED) --duration $(DURATION) --nodes $(NODES) $(if $(KINDS),--kinds $(KINDS))

bench: install
	$(PY) bench/codec.py

clean:
	rm -rf $(VENV) data .pytest_cache
