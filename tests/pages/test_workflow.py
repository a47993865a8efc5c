"""The publishing path: the CD workflow (.github/workflows/book.yml), the Makefile it calls, launch buttons.

The workflow must run the README's commands and nothing the repository does not define: every
``make`` target it calls exists, every environment variable it sets is read by the book's code or by
the Hugging Face libraries, and the publishing build turns the real-checkpoint switch on without the
Makefile's offline default switching the hub back off. Launch buttons come from one setting (the
repository's public URL) and are absent when it is unset.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from tools import book_config

WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps(workflow: dict) -> list[dict]:
    return [s for job in workflow["jobs"].values() for s in job.get("steps", [])]


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, flags=re.M))


def _make_calls(workflow: dict) -> list[str]:
    return [m for s in _steps(workflow) for m in re.findall(r"\bmake\s+([\w-]+)", s.get("run", ""))]


def test_runs_on_push_to_main_and_deploys_the_site_to_pages(workflow):
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger["push"]["branches"] == ["main"]
    uses = [s.get("uses", "").split("@")[0] for s in _steps(workflow)]
    for action in ("actions/checkout", "actions/upload-pages-artifact", "actions/deploy-pages"):
        assert action in uses
    upload = next(s for s in _steps(workflow) if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    deploy = next(j for j in workflow["jobs"].values()
                  if any(s.get("uses", "").startswith("actions/deploy-pages") for s in j["steps"]))
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    # nothing by default; only the build job may push (the Colab notebooks' branch), only deploy may publish
    assert workflow["permissions"] == {}
    assert workflow["jobs"]["build"]["permissions"] == {"contents": "write"}
    assert workflow["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}


def test_every_action_is_pinned_to_a_commit_and_no_token_is_persisted(workflow):
    """A tag can be moved to other code; a commit cannot. The version it is stands beside it, for updates."""
    text = WORKFLOW.read_text(encoding="utf-8")
    uses = [s["uses"] for s in _steps(workflow) if "uses" in s]
    assert uses, "the workflow uses actions"
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{ref} is not pinned to a commit"
        assert re.search(rf"uses: {re.escape(ref)}  # v\d+\.\d+\.\d+$", text, flags=re.M), f"{ref}: no version"
    checkout = next(s for s in _steps(workflow) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False


def test_the_security_linter_finds_nothing():
    """zizmor (pinned in requirements.txt), offline: unpinned actions, broad permissions, persisted credentials,
    template injection, ... The publishing workflow is the one part of the project that runs with credentials."""
    zizmor = Path(sys.executable).with_name("zizmor")
    assert zizmor.is_file(), "zizmor is in requirements.txt: pip install -r requirements.txt"
    proc = subprocess.run([str(zizmor), "--offline", "--format", "json", "--no-progress", str(WORKFLOW)],
                          capture_output=True, text=True, timeout=120)
    findings = json.loads(proc.stdout or "[]")
    assert proc.returncode == 0 and findings == [], [f["ident"] for f in findings] or proc.stderr[-2000:]


def test_pushes_the_colab_notebooks_to_the_branch_the_buttons_open(workflow):
    from tools import colab

    steps = _steps(workflow)
    make = next(i for i, s in enumerate(steps) if s.get("run", "").strip() == "make colab")
    assert steps[make]["env"][book_config.REPO_URL_ENV] == "${{ github.server_url }}/${{ github.repository }}"
    push = steps[make + 1]
    assert push["uses"].split("@")[0] == "peaceiris/actions-gh-pages"
    assert push["with"]["publish_dir"] == "_build/colab"  # what `make colab` writes
    assert push["with"]["publish_branch"] == colab.COLAB_BRANCH == book_config.COLAB_BRANCH
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^colab:.*\n\t\$\(PY\) -m tools\.colab --out _build/colab$", makefile, flags=re.M)


def test_runs_exactly_the_readme_commands_in_order(workflow):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    runs = [s["run"].strip() for s in _steps(workflow) if "run" in s]
    assert runs == ["make test", "make book", "make real-decoders", "make colab"]
    for cmd in runs:
        assert cmd in readme
    assert set(_make_calls(workflow)) <= _make_targets()


def test_every_env_var_it_sets_is_read_by_the_code(workflow):
    sources = [*(ROOT / "lib").rglob("*.py"), *(ROOT / "tools").rglob("*.py"), ROOT / "Makefile",
               *(ROOT / "book").glob("*.md")]
    ours = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    import huggingface_hub.constants
    import transformers.utils.hub

    hf = "\n".join(Path(m.__file__).read_text(encoding="utf-8")
                   for m in (huggingface_hub.constants, transformers.utils.hub))
    hf += Path(huggingface_hub.__file__).with_name("utils").joinpath("_auth.py").read_text(encoding="utf-8")
    names = {k for s in _steps(workflow) for k in s.get("env", {})}
    names |= {k for job in workflow["jobs"].values() for k in job.get("env", {})} | set(workflow.get("env", {}))
    assert names, "the publishing build sets its switches in the environment"
    for name in names:
        assert re.search(rf"\b{name}\b", ours) or f'"{name}"' in hf, f"{name} is read by nothing"


def test_the_publishing_build_turns_the_real_checkpoints_on(workflow):
    book = next(s for s in _steps(workflow) if s.get("run", "").strip() == "make book")
    env = book["env"]
    assert (env["SPECTRAL_BOOK_REAL_MODELS"], env["HF_HUB_OFFLINE"], env["TRANSFORMERS_OFFLINE"]) == ("1", "0", "0")
    assert env[book_config.REPO_URL_ENV] == "${{ github.server_url }}/${{ github.repository }}"
    test = next(s for s in _steps(workflow) if s.get("run", "").strip() == "make test")
    assert "SPECTRAL_BOOK_REAL_MODELS" not in test.get("env", {})  # the tests stay offline


@pytest.mark.parametrize("switch, expected", [("", "1"), ("1", "")])
def test_the_makefile_stays_offline_unless_the_switch_is_on(tmp_path, switch, expected):
    """`SPECTRAL_BOOK_REAL_MODELS=1 make book` must not inherit the Makefile's HF_HUB_OFFLINE=1."""
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {ROOT / 'Makefile'}\nprobe:\n\t@echo \"[$$HF_HUB_OFFLINE][$$TRANSFORMERS_OFFLINE]\"\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["SPECTRAL_BOOK_REAL_MODELS"] = switch
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "-f", str(probe), "probe"], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == f"[{expected}][{expected}]"


# -- launch buttons -----------------------------------------------------------------------------------
def _project_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def test_the_book_config_has_no_launch_target_until_the_url_is_set():
    theme = _project_config()["sphinx"]["config"]["html_theme_options"]
    assert not theme.get("repository_url")
    assert not any(theme["launch_buttons"].get(k) for k in ("binderhub_url", "colab_url", "jupyterhub_url"))


def test_the_repo_url_fills_in_binder_colab_and_the_repository():
    config = _project_config()
    url = "https://github.com/spectral-book/spectral-dynamics"
    out = book_config.with_launch_buttons(config, url + ".git/")
    theme = out["sphinx"]["config"]["html_theme_options"]
    assert theme["repository_url"] == url and out["repository"]["url"] == url
    assert theme["launch_buttons"]["binderhub_url"] == book_config.BINDERHUB_URL
    assert theme["launch_buttons"]["colab_url"] == book_config.COLAB_URL
    assert theme["launch_buttons"]["jupyterhub_url"] == ""  # only with a hub of one's own
    assert theme["launch_buttons"]["notebook_interface"] == "jupyterlab"  # the project's own setting kept
    assert out["sphinx"]["config"]["colab_notebooks_branch"] == book_config.COLAB_BRANCH
    assert Path(out["sphinx"]["local_extensions"]["colab_links"], "colab_links.py").is_file()
    assert config == _project_config()  # the input is not modified
    hub = book_config.with_launch_buttons(config, url, jupyterhub_url="https://hub.example.edu/")
    assert hub["sphinx"]["config"]["html_theme_options"]["launch_buttons"]["jupyterhub_url"] == "https://hub.example.edu"
    for bad in ("", "github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a"):
        with pytest.raises(ValueError, match=book_config.REPO_URL_ENV):
            book_config.with_launch_buttons(config, bad)


_PAGE = """---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---
# One page

```{code-cell} ipython3
1 + 1
```
"""


@pytest.mark.slow
def test_a_sample_book_shows_the_buttons_only_when_the_url_is_set(tmp_path):
    """A one-page book with the project's theme options, built as `make book` builds it, with and without."""
    book = tmp_path / "book"
    book.mkdir()
    (book / "page.md").write_text(_PAGE)
    (book / "01_chapter.md").write_text(_PAGE.replace("# One page", "# A chapter"))
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\nchapters:\n- file: 01_chapter\n")
    theme = _project_config()["sphinx"]["config"]["html_theme_options"]
    config = {"title": "Sample", "execute": {"execute_notebooks": "force", "timeout": 900},
              "sphinx": {"config": {"html_theme_options": theme}}}
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    launch = book_config.write_config(book / "_config.yml", tmp_path / "launch" / "_config.yml",
                                      "https://github.com/spectral-book/spectral-dynamics")
    jb = Path(sys.executable).with_name("jupyter-book")
    pages = {}
    for name, extra in (("unset", []), ("set", ["--config", str(launch)])):
        out = tmp_path / name
        proc = subprocess.run([str(jb), "build", str(book), "-W", "-n", "--path-output", str(out), *extra],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        pages[name] = (out / "_build" / "html" / "01_chapter.html").read_text(encoding="utf-8")
        pages[f"{name}_page"] = (out / "_build" / "html" / "page.html").read_text(encoding="utf-8")
    assert "mybinder.org" not in pages["unset"] and "colab.research.google.com" not in pages["unset"]
    assert "https://mybinder.org/v2/gh/spectral-book/spectral-dynamics/main" in pages["set"]
    # Colab cannot open the .md source: a chapter's button opens its notebook on the colab branch, a page
    # that is not a chapter has no Colab button
    base = "https://colab.research.google.com/github/spectral-book/spectral-dynamics/blob"
    assert f"{base}/colab/01_chapter.ipynb" in pages["set"]
    assert "colab.research.google.com" not in pages["set_page"] and "mybinder.org" in pages["set_page"]
    assert "/blob/main/01_chapter.md" not in pages["set"]


def test_the_real_decoders_estimate_in_the_comment_is_the_pages():
    """The workflow's comment states the real decoder's run as chapter 4's section 4.9 computes it (resamples,
    minutes on the runner's cores, memory), for the model and prompt count the Makefile passes."""
    from lib.chapters import jacobian_funnel as fs

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    model = re.search(r"^REAL_DECODER \?= (\S+)$", makefile, flags=re.M).group(1)
    prompts = int(re.search(r"^REAL_DECODER_PROMPTS \?= (\d+)$", makefile, flags=re.M).group(1))
    chapter = (ROOT / "book" / "04_jacobian_funnel.md").read_text(encoding="utf-8")
    assert f"CPU_PROMPTS, CPU_CORES = {prompts}, 4" in chapter and model == fs.CPU_DECODERS[0][0]
    row = fs.cpu_decoder_work(prompts=prompts, cores=4).iloc[0]
    comment = " ".join(line.lstrip("# ") for line in WORKFLOW.read_text(encoding="utf-8").splitlines()
                       if line.startswith("#"))
    assert f"{model} ({row['layers']} layers" in comment
    assert f"{prompts} grammar stories with {row['resamples']} bootstrap resamples" in comment
    assert f"about {row['min on 4 cores']:.0f} min on the runner's 4 vCPUs" in comment
    assert f"{row['per-prompt Jacobians (GB)']:.1f} GB of Jacobians" in comment


def test_the_real_decoders_chapter_6_estimate_is_the_pages(workflow):
    """Chapter 6 runs in the same report, and the comment, the step's name and both pages state its time and
    memory as ``lib.chapters.two_views.cpu_decoder_work`` computes them for the Makefile's model and prompts."""
    from lib.chapters import jacobian_funnel as fs
    from lib.chapters import two_views as bv

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    chapters = re.search(r"^REAL_DECODER_CHAPTERS \?= (.+)$", makefile, flags=re.M).group(1).split()
    assert chapters == ["04_jacobian_funnel", "06_two_views"]
    assert 'CHAPTERS="$(REAL_DECODER_CHAPTERS)"' in makefile
    prompts = int(re.search(r"^REAL_DECODER_PROMPTS \?= (\d+)$", makefile, flags=re.M).group(1))
    two_views = (ROOT / "book" / "06_two_views.md").read_text(encoding="utf-8")
    funnel = (ROOT / "book" / "04_jacobian_funnel.md").read_text(encoding="utf-8")
    assert f"REAL_PROMPTS = {prompts}  #" in two_views
    assert "two_views_work(fs.CPU_DECODERS[:1], prompts=CPU_PROMPTS, twins=3)" in funnel
    tv = bv.cpu_decoder_work(fs.CPU_DECODERS[:1], prompts=prompts, twins=3).iloc[0]
    both = fs.cpu_decoder_work(prompts=prompts, cores=4).iloc[0]["min on 4 cores"] + tv["wall min"]
    comment = " ".join(line.lstrip("# ") for line in WORKFLOW.read_text(encoding="utf-8").splitlines()
                       if line.startswith("#"))
    assert f"about {tv['wall min']:.0f} min and {tv['peak memory (GB)']:.1f} GB at its peak" in comment
    assert f"About {both:.0f} min for both chapters" in comment
    names = [s.get("name", "") for s in _steps(workflow) if s.get("run") == "make real-decoders"]
    assert names == ["A real decoder's report (make real-decoders; SmolLM2-135M, chapters 4 and 6, "
                     f"about {both:.0f} min)"]
