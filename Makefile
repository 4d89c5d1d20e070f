# tierlab: `make demo` and `make test` are all a fresh machine needs (python3 >= 3.11).
# Both create .venv and install tierlab into it (editable, with the dev extras) on first use; the
# install re-runs only when pyproject.toml is newer than the stamp file .venv/.installed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv demo test test-fast test-all bench golden notebooks clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tierlab needs python >= 3.11; found " + sys.version.split()[0] + " (set PYTHON=python3.11 or newer)")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	@# fill numba's on-disk cache now, so the first `tierlab run` starts in seconds; the run says
	@# it is compiling and shows how far it is on stderr (about a minute on 2 cores)
	@$(PY) -m tierlab run --machine qemu-2node --workload random-read --param file_size=64MiB \
		--param accesses=10000 --set demotion_enabled=1 --format json --no-progress >/dev/null \
		|| echo "warning: engine warm-up run failed (the first run will compile)"
	@touch $(STAMP)

# A real small simulation: 2 M random 4 KiB reads of a 2 GiB file bound to node 0 (1 GiB) of a
# 2-node QEMU guest; kswapd demotes page cache to the CPU-less node 1 (pgdemote_kswapd). The first
# run compiles the numba kernels (about a minute on 2 cores; `make venv` does it once); later runs start in seconds.
demo: venv
	$(PY) -m tierlab run --machine qemu-2node --workload random-read \
		--param file_size=2GiB --param accesses=2000000 --param policy=bind:0 \
		--set demotion_enabled=1 --seed 7

# Under CI=true the numba cache goes to a fresh temporary directory (unless NUMBA_CACHE_DIR is set),
# so every kernel is compiled from scratch. pytest's exit status 5 (no tests collected) is a failure.
test: venv
	@set -e; \
	if [ "$$CI" = true ] && [ -z "$$NUMBA_CACHE_DIR" ]; then \
		NUMBA_CACHE_DIR=$$(mktemp -d); export NUMBA_CACHE_DIR; \
		echo "NUMBA_CACHE_DIR=$$NUMBA_CACHE_DIR"; \
	fi; \
	status=0; $(PY) -m pytest -q || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

# the inner loop: every test but the `long` modules (reproductions, notebooks, the QEMU guest,
# subprocesses; tests/conftest.py) and the `slow` ones
test-fast: venv
	$(PY) -m pytest -q -m 'not slow and not long'

# everything, the `slow` checks too, with hypothesis' `dev` profile (more examples, not derandomised)
test-all: venv
	HYPOTHESIS_PROFILE=dev $(PY) -m pytest -q -m ''

# re-run the canonical runs of tests/golden.py, print old -> new per counter, accept the new values
golden: venv
	$(PY) tests/golden.py --accept

bench: venv
	$(PY) -m tierlab bench

# execute every notebook at its default scale (TIERLAB_SCALE unset; set it for a quicker, smaller run)
# and write each one, with its figures, as HTML to build/notebooks/; `make notebooks NB=02` renders one
notebooks: venv
	$(PY) notebooks/render.py $(NB)

clean-venv:
	rm -rf $(VENV)
