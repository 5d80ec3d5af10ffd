# iclr26 workspace. `make help` lists the targets. PKG=<folder> picks one package
# (`shared` is the iclr26-shared utilities package).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# uv: the one on PATH, else the pip-installed module (bootstrapped by the `uv` target).
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

PACKAGES := $(sort $(patsubst packages/%/pyproject.toml,%,$(wildcard packages/*/pyproject.toml)))
MEMBERS := shared $(PACKAGES)
VENVS := .venvs
REPORTS := reports
REPRO_ARGS ?= --quick
PYTEST_ARGS ?=

# The folder of a member and its distribution name.
member_dir = $(if $(filter shared,$(1)),shared,packages/$(1))
dist_name = iclr26-$(1)

ifdef PKG
ifeq ($(filter $(PKG),$(MEMBERS)),)
$(error PKG=$(PKG) is not a workspace member; members: $(MEMBERS))
endif
SELECTED := $(PKG)
SELECTED_PACKAGES := $(filter-out shared,$(PKG))
else
SELECTED := $(MEMBERS)
SELECTED_PACKAGES := $(PACKAGES)
endif

.PHONY: help uv lock sync lint format test test-slow reproduce bench build check-dist release-check clean

help: ## list the targets
	@echo "iclr26 workspace — members: $(MEMBERS)"
	@echo "usage: make TARGET [PKG=<folder>]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

uv: ## install uv with pip if it is missing
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv

lock: uv ## update uv.lock after changing dependencies
	$(UV) lock

sync: uv ## create .venv with every member and the dev tools
	$(UV) sync --locked --all-packages --all-extras

lint: uv ## ruff check + ruff format --check
	UV_PROJECT_ENVIRONMENT=$(VENVS)/lint $(UV) run --locked --only-group lint ruff check .
	UV_PROJECT_ENVIRONMENT=$(VENVS)/lint $(UV) run --locked --only-group lint ruff format --check .

format: uv ## ruff fix + format in place
	UV_PROJECT_ENVIRONMENT=$(VENVS)/lint $(UV) run --locked --only-group lint ruff check --fix .
	UV_PROJECT_ENVIRONMENT=$(VENVS)/lint $(UV) run --locked --only-group lint ruff format .

# Each member is tested in its own environment holding only its declared dependencies and the
# test tools, so an import it does not declare fails. pytest's exit 5 (no tests) is not an error.
define member_env
	UV_PROJECT_ENVIRONMENT=$(VENVS)/$(1) $(UV) sync --quiet --locked --package $(call dist_name,$(1)) \
		--all-extras --no-default-groups --group test
endef

define member_pytest
	$(call member_env,$(1))
	@echo "== $(call dist_name,$(1)): pytest $(2)"
	@rc=0; $(VENVS)/$(1)/bin/python -m pytest -c pyproject.toml --rootdir . $(call member_dir,$(1))/tests \
		$(2) $(PYTEST_ARGS) || rc=$$?; if [ $$rc -eq 5 ]; then echo "(no tests)"; rc=0; fi; exit $$rc

endef

test: uv ## run the tests (not slow) of every member, or of PKG, then the workspace checks
	$(foreach m,$(SELECTED),$(call member_pytest,$(m),-m "not slow"))
ifndef PKG
	$(UV) sync --quiet --locked --all-packages --all-extras
	@echo "== workspace checks"
	$(UV) run --locked --no-sync python -m pytest tests $(PYTEST_ARGS)
endif

test-slow: uv ## run the tests marked slow, of every member or of PKG
	$(foreach m,$(SELECTED),$(call member_pytest,$(m),-m slow))

define member_run
	$(call member_env,$(1))
	$(VENVS)/$(1)/bin/iclr26-$(1) $(2) $(REPRO_ARGS) --out $(3)

endef

define member_build
	$(UV) build --quiet --package $(call dist_name,$(1)) --out-dir dist

endef

reproduce: uv ## `iclr26-<folder> reproduce --quick` for PKG or every package, then reports/SUMMARY.md
	$(foreach p,$(SELECTED_PACKAGES),$(call member_run,$(p),reproduce,$(REPORTS)/$(p)))
	$(call member_env,shared)
	$(VENVS)/shared/bin/python -m iclr26.shared.summary $(REPORTS)

bench: uv ## `iclr26-<folder> bench` for PKG (or every package), then reports/SUMMARY.md
	$(foreach p,$(SELECTED_PACKAGES),$(call member_run,$(p),bench,$(REPORTS)/$(p)/bench))
	$(call member_env,shared)
	$(VENVS)/shared/bin/python -m iclr26.shared.summary $(REPORTS)

build: uv ## wheel + sdist of PKG or of every member into dist/
	$(foreach m,$(SELECTED),$(call member_build,$(m)))

check-dist: uv ## build PKG or every member (not into dist/), install each wheel with the lowest iclr26-shared it declares, run --help and the README quickstart
	$(UV) sync --quiet --locked --all-packages --all-extras
	$(UV) run --locked --no-sync python tests/check_dist.py --uv "$(UV)" $(SELECTED)

release-check: uv ## the release gate for PKG at TAG=<folder>-v<version>: tag, version, changelog, build into dist/<folder>/, tests, installed wheel
ifndef PKG
	$(error release-check needs PKG=<folder> and TAG=<folder>-v<version>)
endif
ifndef TAG
	$(error release-check needs TAG=<folder>-v<version>)
endif
	python3 tests/release_check.py $(PKG) $(TAG)
	rm -rf dist/$(PKG)
	$(UV) build --quiet --package $(call dist_name,$(PKG)) --out-dir dist/$(PKG)
	$(call member_pytest,$(PKG),-m "not slow")
	$(UV) sync --quiet --locked --all-packages --all-extras
	$(UV) run --locked --no-sync python tests/check_dist.py --uv "$(UV)" $(PKG)

clean: ## remove environments, build outputs and reports
	rm -rf .venv $(VENVS) dist $(REPORTS) .pytest_cache .ruff_cache
