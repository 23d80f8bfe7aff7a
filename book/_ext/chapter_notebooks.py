"""Each chapter (book/NN-*.md, MyST Markdown) as a Jupyter notebook beside it, for Colab.

    python book/_ext/chapter_notebooks.py           # write book/NN-*.ipynb from the .md files
    python book/_ext/chapter_notebooks.py --check   # exit 1 if a notebook is missing or out of date

Colab opens notebooks from GitHub, not MyST Markdown, so every chapter is also
committed as an .ipynb generated from its .md (tests/test_site.py checks that they
agree). The notebook is the chapter's cells as myst-nb reads them, without outputs
(folded answers become HTML <details>, which notebooks fold; cross-references and
glued numbers become plain text), plus one setup cell after the title: the chapters import their figure helpers from
book/plots.py (and possibly other book/*.py modules), and chapters 08 to 10 load what the book
computed while it was built from book/data/ (their models, the results of their experiments,
the training text); a clone has these beside the notebook, and Colab downloads them from the
repository named in _config.yml (the same repository and branch as the exercise notebooks'
install line). Everything else they import is in Colab's standard image
(torch, numpy, matplotlib, ipywidgets).

The site's Colab button: sphinx-book-theme links a .md page to the .ipynb of the
same name when that file exists; _config.yml excludes these notebooks from the
build, so each chapter is built once, from its .md.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml
from myst_nb.core.read import read_myst_markdown_notebook

REPO = Path(__file__).resolve().parents[2]
BOOK = REPO / "book"

SETUP = '''\
# Setup for Colab: this chapter imports the book's own helpers and data ({names}).
# A clone of the repository has them beside this notebook; elsewhere they are downloaded.
from pathlib import Path

for name in {files!r}:
    if not Path(name).exists():
        import urllib.request

        Path(name).parent.mkdir(parents=True, exist_ok=True)
        urllib.request.urlretrieve("{base}" + name, name)'''


def _imported(code: str, names: set[str]) -> set[str]:
    found = set()
    for line in code.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in {"import", "from"}:
            module = words[1].split(".")[0].rstrip(",")
            if module in names:
                found.add(module)
    return found


def local_modules(nb: nbformat.NotebookNode) -> list[str]:
    """The book/*.py modules that the notebook's code imports (e.g. plots.py), and those they import."""
    names = {path.stem for path in BOOK.glob("*.py")}
    todo = set().union(*(_imported(c.source, names) for c in nb.cells if c.cell_type == "code"))
    found: set[str] = set()
    while todo:
        module = todo.pop()
        found.add(module)
        todo |= _imported((BOOK / f"{module}.py").read_text(), names) - found
    return sorted(f"{name}.py" for name in found)


# A data file the book's modules or a chapter's code name: "reversal.pt", "course-text-v1.txt" (book/data/).
DATA_NAME = re.compile(r"[\"']([\w.-]+\.(?:pt|txt|json))[\"']")


def data_files(nb: nbformat.NotebookNode, modules: list[str]) -> list[str]:
    """The files of book/data/ that the notebook's code or the modules it imports name."""
    texts = [c.source for c in nb.cells if c.cell_type == "code"] + [(BOOK / m).read_text() for m in modules]
    names = {name for text in texts for name in DATA_NAME.findall(text)}
    return sorted(f"data/{name}" for name in names if (BOOK / "data" / name).is_file())


def _toc_files(entries: list) -> list[str]:
    files = []
    for entry in entries:
        files += [entry["file"]] if "file" in entry else []
        files += _toc_files(entry.get("chapters", []) + entry.get("sections", []))
    return files


def pages() -> list[str]:
    """The book's pages in _toc.yml's order, as it names them (no suffix): the root, then the rest."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [toc["root"]] + _toc_files(toc.get("parts", []) + toc.get("chapters", []))


def chapters() -> list[Path]:
    """The chapter sources in _toc.yml: book/NN-*.md (drafts not yet in the table of contents are left out)."""
    files = [REPO / f"{file}.md" for file in pages()[1:]]
    return [path for path in files if path.parent == BOOK and path.name[:2].isdigit() and path.is_file()]


def raw_base() -> str:
    """Where Colab downloads book/*.py: the raw files of the repository and branch in _config.yml."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repo = config["repository"]["url"].removeprefix("https://github.com/").strip("/")
    return f"https://raw.githubusercontent.com/{repo}/{config['repository'].get('branch', 'main')}/book/"


# A folded answer, ```{admonition} Answer / :class: dropdown ... ```, as HTML that Colab and
# Jupyter fold too (they do not know MyST directives).
DROPDOWN = re.compile(r"```\{admonition\} (?P<title>[^\n]*)\n:class: dropdown\n(?P<body>.*?)\n```", re.S)


# MyST roles that notebooks show as raw text, and what the notebook says instead.
ROLES = [
    # {glue:text}`name:.2f`: a number computed by a cell; plots.glue prints it there outside the book.
    (re.compile(r"\{glue:text\}`([^`:]+)(?::[^`]*)?`"), r"`\1`"),
    (re.compile(r"\{(?:ref|doc)\}`([^`<]*?)\s*<[^`>]*>`"), r"\1"),  # {ref}`text <label>`
    (re.compile(r"\{doc\}`/?(?:[^`/]*/)*(\d\d)-[^`/]*`"), r"chapter \1"),  # {doc}`01-self-attention`
    (re.compile(r"\{doc\}`/?(?:[^`/]*/)*([^`/]+)`"), r"\1"),
    (re.compile(r"\{numref\}`[^`]*`"), "the figure"),
    (re.compile(r"^\([\w-]+\)=\n", re.M), ""),  # (label)= targets
]


# Any other admonition (```{note}, ```{admonition} Title, :::{warning}, ...): a quoted block.
ADMONITION = re.compile(r"^(?P<fence>```|:::)\{(?P<kind>admonition|note|warning|tip|hint|important)\} ?(?P<title>[^\n]*)\n"
                        r"(?::class: [^\n]*\n)?(?P<body>.*?)\n(?P=fence)$", re.S | re.M)


def _quote(match: re.Match) -> str:
    title = match["title"] or match["kind"].capitalize()
    return "\n".join([f"> **{title}**", ">"] + [f"> {line}".rstrip() for line in match["body"].splitlines()])


def markdown(text: str) -> str:
    """A chapter's Markdown cell as Jupyter and Colab can show it."""
    text = DROPDOWN.sub(r"<details><summary>\g<title></summary>\n\n\g<body>\n\n</details>", text)
    text = ADMONITION.sub(_quote, text)
    for pattern, replacement in ROLES:
        text = pattern.sub(replacement, text)
    return text


def notebook(source: Path) -> nbformat.NotebookNode:
    """The chapter at `source` as a notebook: its cells, no outputs, a setup cell after the title."""
    nb = read_myst_markdown_notebook(source.read_text(), path=source)
    nb.metadata.pop("jupytext", None)  # the .ipynb is not paired; it is generated
    nb.metadata["colab"] = {"provenance": []}
    modules = local_modules(nb)
    files = modules + data_files(nb, modules)
    if files:
        setup = SETUP.format(names=", ".join(f"book/{f}" for f in files), files=files, base=raw_base())
        nb.cells.insert(1, nbformat.v4.new_code_cell(setup, metadata={"tags": ["colab-setup"]}))
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.stem[:2]}-{i:03d}"  # stable ids: regenerating gives the same file
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        else:
            cell.source = markdown(cell.source)
    nbformat.validate(nb)
    return nb


def text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the notebooks are up to date")
    args = parser.parse_args(argv)
    stale = []
    for source in chapters():
        target = source.with_suffix(".ipynb")
        wanted = text(notebook(source))
        if target.is_file() and target.read_text() == wanted:
            continue
        stale.append(target)
        if not args.check:
            target.write_text(wanted)
    for target in stale:
        print(f"{'out of date' if args.check else 'wrote'}: {target.relative_to(REPO)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
