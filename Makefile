# Two commands on a fresh machine:  make run  (the app)   make test  (the suite)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: run test lint bench clean

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m streamlit run app.py --server.port $(PORT)

test: $(VENV)/.installed lint
	$(PY) -m pytest -q -n auto

lint: $(VENV)/.installed
	$(PY) -m ruff check dpmix_core tests app.py app_pages bench
	$(PY) -m ruff format --check dpmix_core tests app.py app_pages bench
	$(PY) -m mypy

bench: $(VENV)/.installed
	$(PY) bench/bench_accountants.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
