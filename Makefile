# Two commands for a newcomer: `make book` builds the site, `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Offline by default: nothing is fetched from a model hub unless SPECTRAL_BOOK_REAL_MODELS=1 (which
# leaves HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE as the environment has them, normally unset).
ifneq ($(SPECTRAL_BOOK_REAL_MODELS),1)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
endif
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false
export PYTHONHASHSEED := 0

MATHJAX_VERSION := 3.2.2
MATHJAX := .vendor/mathjax/tex-mml-chtml.js
# axe-core: the accessibility checker the browser test runs on every page (a test tool, not part of the site)
AXE_VERSION := 4.14.1
AXE := .vendor/axe-core/axe.min.js

.PHONY: book pdf test lab student course colab bench vendor linkcheck browser-deps clean report real-decoders

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(VENV)/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (spectral-book)" >/dev/null
	touch $(STAMP)

## make vendor: MathJax 3 from the npm registry, served by the site itself (no CDN), and axe-core, the
## accessibility checker that the browser test injects into every page
vendor: $(MATHJAX) $(AXE)
$(MATHJAX):
	rm -rf .vendor/tmp && mkdir -p .vendor/tmp .vendor/mathjax
	cd .vendor/tmp && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar xzf mathjax-$(MATHJAX_VERSION).tgz
	cd .vendor/tmp/package/es5 && cp -r tex-mml-chtml.js input output a11y ui adaptors ../../../mathjax/
	rm -rf .vendor/tmp
$(AXE):
	rm -rf .vendor/tmp-axe && mkdir -p .vendor/tmp-axe .vendor/axe-core
	cd .vendor/tmp-axe && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null && tar xzf axe-core-$(AXE_VERSION).tgz
	cp .vendor/tmp-axe/package/axe.min.js .vendor/tmp-axe/package/LICENSE .vendor/axe-core/
	rm -rf .vendor/tmp-axe

## make book: build every chapter, executed, into _build/html (a raising cell or a warning fails it).
## Launch buttons (Binder, Colab; JupyterHub if SPECTRAL_BOOK_JUPYTERHUB_URL is set) come from one setting,
## the repository's public URL: SPECTRAL_BOOK_REPO_URL=https://github.com/<owner>/<repo> make book.
## Unset, the pages have none.
SPECTRAL_BOOK_REPO_URL ?=
LAUNCH_CONFIG := _build/launch/_config.yml
book: $(STAMP) $(MATHJAX)
	$(if $(SPECTRAL_BOOK_REPO_URL),$(PY) -m tools.book_config --repo-url "$(SPECTRAL_BOOK_REPO_URL)" --out $(LAUNCH_CONFIG))
	SPECTRAL_BOOK_BUILD=1 $(VENV)/bin/jupyter-book build . --all -W -n --keep-going \
	  $(if $(SPECTRAL_BOOK_REPO_URL),--config $(LAUNCH_CONFIG))

## make pdf: the built site printed to one PDF in headless Chromium (builds the site first if missing)
PDF := _build/pdf/spectral-dynamics-book.pdf
pdf: $(STAMP) browser-deps
	@test -f _build/html/index.html || $(MAKE) book
	$(PY) -m tools.book_pdf --html _build/html --out $(PDF)

## make linkcheck: check the external links (needs network; optional, not part of make test)
linkcheck: $(STAMP) $(MATHJAX)
	SPECTRAL_BOOK_BUILD=1 $(VENV)/bin/jupyter-book build . --builder linkcheck

## make test: the whole test suite (unit tests, executed notebooks, the built site in Chromium)
test: $(STAMP) $(MATHJAX) $(AXE) browser-deps
	$(PY) -m pytest

## make lab: open the chapters in JupyterLab
lab: $(STAMP)
	$(VENV)/bin/jupyter lab book/

## make student: a student edition (solutions removed) and an instructor edition (solutions in nbgrader's
## format) of every chapter, as notebooks in _build/student/{student,instructor}/ (no execution, seconds)
student: $(STAMP)
	$(PY) -m tools.student --out _build/student

## make course: an nbgrader course folder in _build/course (nbgrader_config.py, source/chN/ = the instructor
## editions, an empty gradebook) and the kernel spec spectral-book, the book's environment, for nbgrader's
## kernel; then, in _build/course: nbgrader generate_assignment chN, nbgrader autograde chN (book/course.md)
course: $(STAMP)
	$(PY) -m tools.course --out _build/course

## make colab: every chapter as a Colab notebook, in _build/colab/book/: a first cell installs the book from
## SPECTRAL_BOOK_REPO_URL at the commit GITHUB_SHA (else main), then the chapter as the html build rendered it
## for plain Markdown (_build/html/_sources/book/: run `make book` first), without outputs; the publishing
## workflow pushes them to the colab branch, which the Colab buttons open
colab: $(STAMP)
	$(PY) -m tools.colab --out _build/colab

## make report MODEL=<alias|folder|hub id> [DEVICE=cuda] [PROMPTS=file]: the model-driven chapters re-run on
## MODEL (papermill, each chapter's parameters cell), after exactness checks of the book's formulas on its real
## modules, as a site in the book's theme with its own Results and About pages: _build/report/<model slug>/.
## The hub is open to it (only a MODEL that is a hub id is fetched; the chapters' own models stay offline);
## REPORT_HUB_OFFLINE=1 keeps it closed (a hub id must then be in the local cache)
## CHAPTERS="04_jacobian_funnel" runs only those chapters (after the exactness checks)
MODEL ?=
REPORT_HUB_OFFLINE ?= 0
DEVICE ?= cpu
PROMPTS ?=
CHAPTERS ?=
report: $(STAMP) $(MATHJAX)
	@test -n "$(MODEL)" || { echo "make report: give the model, e.g. make report MODEL=minilm (an offline alias, a checkpoint folder or a hub id)" >&2; exit 2; }
	HF_HUB_OFFLINE=$(REPORT_HUB_OFFLINE) TRANSFORMERS_OFFLINE=$(REPORT_HUB_OFFLINE) \
	  $(PY) -m tools.report --model "$(MODEL)" --device "$(DEVICE)" $(if $(PROMPTS),--prompts "$(PROMPTS)") \
	  $(if $(CHAPTERS),--chapters $(CHAPTERS))

## make real-decoders (after make book; needs the network): the published site's real decoder, `make report` on
## REAL_DECODER (lib.chapters.jacobian_funnel.CPU_DECODERS' first) with REAL_DECODER_CHAPTERS (chapter 4, and
## chapter 6 with it in the decoder's place), on the first REAL_DECODER_PROMPTS grammar stories (the
## chapters' own prompts, fewer), copied into the site at _build/html/reports/<model slug>/, where chapter 4's
## section 4.9 links it. Its time and memory are estimated in section 4.9 (lib.chapters.jacobian_funnel.
## cpu_decoder_work for chapter 4, lib.chapters.two_views.cpu_decoder_work for chapter 6).
REAL_DECODER ?= HuggingFaceTB/SmolLM2-135M
REAL_DECODER_PROMPTS ?= 16
REAL_DECODER_CHAPTERS ?= 04_jacobian_funnel 06_two_views
real-decoders: $(STAMP) $(MATHJAX)
	mkdir -p _build _build/html/reports
	$(PY) -c "from lib.models.decoder.language import prompts; print(*prompts($(REAL_DECODER_PROMPTS)), sep='\n')" \
	  > _build/real-decoder-prompts.txt
	$(MAKE) report MODEL="$(REAL_DECODER)" PROMPTS=_build/real-decoder-prompts.txt CHAPTERS="$(REAL_DECODER_CHAPTERS)"
	slug=$$($(PY) -c "from tools.report import model_slug; print(model_slug('$(REAL_DECODER)'))") && \
	  rm -rf "_build/html/reports/$$slug" && cp -r "_build/report/$$slug" _build/html/reports/

## make bench: benchmarks (not tests); prints tables and writes benchmarks/results.json
## (options: make bench BENCH_ARGS="--quick --threads 1 --chapters")
bench: $(STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

## Headless Chromium for the browser test (Debian package; never a downloaded browser), and an emoji
## font, without which the About page's status marks (✅) print as empty boxes in screenshots and the PDF
BROWSER_PKGS := chromium fonts-noto-color-emoji
browser-deps:
	@missing=""; [ -x /usr/bin/chromium ] || missing="chromium"; \
	  [ -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing="$$missing fonts-noto-color-emoji"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "warning: could not install$$missing; browser tests may be skipped"; \
	  else echo "note: missing$$missing; install Debian's $(BROWSER_PKGS) to run the browser tests"; fi; \
	fi

clean:
	rm -rf _build .pytest_cache .vendor
