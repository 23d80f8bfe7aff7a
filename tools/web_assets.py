"""Install the JavaScript the built site needs, so that it renders with no network.

The book loads MathJax (math), and on pages with ipywidgets outputs RequireJS and
the Jupyter widget manager. Sphinx and myst-nb would take them from CDNs; this
script fetches pinned versions from the npm registry with npm's own client
(`npm pack`: one tarball per package, no dependencies, no node_modules, no
install scripts), checks each tarball's sha512 against the pin below, and unpacks
the files the site uses into ASSETS_DIR (by default inside the virtual
environment: `.venv/share/course-web-assets`, never committed).
`book/_ext/offline_assets.py` copies them into `_build/html/_static/` at build time.

    python tools/web_assets.py            # install (what `make setup` runs)
    python tools/web_assets.py --check    # exit 1 unless the pinned versions are installed
    python tools/web_assets.py --tests    # the tests' scripts instead (`make test`): axe-core

The tests' scripts (TEST_PACKAGES: axe-core, the accessibility checker the browser tests run
on every page, classroom/axe.py) go into a folder of their own, beside ASSETS_DIR
(`.venv/share/course-test-assets`), so that they never reach the site.

Needs `npm` (Node.js) once; later runs use npm's local cache.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

# npm package -> (version, sha512 of its registry tarball, files to keep, files to drop).
# Paths are relative to the package root; a folder keeps everything under it.
PACKAGES: dict[str, dict] = {
    "mathjax": {
        "version": "3.2.2",
        "integrity": "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "dest": "mathjax",
        # The combined component Sphinx loads, plus the pieces it loads on demand
        # (TeX extensions, CHTML fonts, menu, accessibility, speech rules); not latest.js,
        # which would fetch "the latest MathJax" from a CDN. And tex-svg.js, whose glyphs are in
        # the script itself: the feedback pages `grade` writes are opened from files, where a
        # browser may refuse CHTML's web fonts (autograder/report.py copies it beside them).
        "keep": ["es5", "LICENSE", "package.json"],
        "drop": ["es5/latest.js", "es5/node-main.js", "es5/mml-svg.js", "es5/tex-mml-svg.js",
                 "es5/tex-svg-full.js", "es5/tex-chtml-full.js", "es5/tex-chtml-full-speech.js",
                 "es5/output/svg", "es5/output/svg.js"],
        "strip": "es5",  # es5/tex-mml-chtml.js -> mathjax/tex-mml-chtml.js
    },
    "requirejs": {
        "version": "2.3.8",
        "integrity": "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        "dest": "requirejs",
        "keep": ["require.js", "package.json"],
        "drop": [],
        "strip": "",
    },
    # The AMD embed script of ipywidgets 8 (what myst-nb's default loads from a CDN),
    # with the Font Awesome files it references next to itself.
    "@jupyter-widgets/html-manager": {
        "version": "1.0.15",
        "integrity": "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "dest": "jupyter-widgets",
        "keep": ["dist", "package.json"],
        "drop": ["dist/embed.js", "dist/libembed-amd.js", "dist/*.map"],
        "strip": "dist",
    },
}

# What the tests run in the browser, never served by the site.
TEST_PACKAGES: dict[str, dict] = {
    "axe-core": {
        "version": "4.14.1",
        "integrity": "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
        "dest": "axe-core",
        "keep": ["axe.min.js", "LICENSE", "package.json"],
        "drop": [],
        "strip": "",
    },
}

STAMP = ".installed"


def default_dir() -> Path:
    """Where the build looks: $COURSE_WEB_ASSETS, else <prefix of this Python>/share/course-web-assets."""
    return Path(os.environ.get("COURSE_WEB_ASSETS") or Path(sys.prefix) / "share" / "course-web-assets")


def tests_dir() -> Path:
    """Where the tests look for TEST_PACKAGES: <prefix of this Python>/share/course-test-assets."""
    return Path(sys.prefix) / "share" / "course-test-assets"


def stamp_text(packages: dict[str, dict] = PACKAGES) -> str:
    """What an installation holds: each package's version and the files chosen from it (a new choice
    installs again)."""
    return json.dumps({name: {key: spec[key] for key in ("version", "keep", "drop", "strip")}
                       for name, spec in packages.items()}, sort_keys=True) + "\n"


def is_installed(target: Path, packages: dict[str, dict] = PACKAGES) -> bool:
    stamp = target / STAMP
    return stamp.is_file() and stamp.read_text() == stamp_text(packages)


def _selected(path: PurePosixPath, spec: dict) -> bool:
    def under(pattern: str) -> bool:
        return path.match(pattern) or str(path) == pattern or str(path).startswith(pattern.rstrip("/") + "/")
    return any(under(k) for k in spec["keep"]) and not any(under(d) for d in spec["drop"])


def _npm_pack(name: str, spec: dict, workdir: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("web_assets: `npm` (Node.js) is needed once to fetch MathJax, RequireJS and the widget "
                 "manager from the npm registry; install Node.js (Debian: apt-get install npm) and rerun.")
    out = subprocess.run([npm, "pack", "--silent", "--ignore-scripts", "--json", "--pack-destination",
                          str(workdir), f"{name}@{spec['version']}"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"web_assets: npm pack {name}@{spec['version']} failed:\n{out.stderr.strip()}\n{out.stdout.strip()}")
    (info,) = json.loads(out.stdout)
    tarball = workdir / info["filename"]
    algo, _, expected = spec["integrity"].partition("-")
    digest = base64.b64encode(hashlib.new(algo, tarball.read_bytes()).digest()).decode()
    if digest != expected:
        sys.exit(f"web_assets: {tarball.name}: {algo} is {digest}, pinned {expected}")
    return tarball


def install(target: Path, packages: dict[str, dict] = PACKAGES) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".web-assets-", dir=target.parent))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, spec in packages.items():
                tarball = _npm_pack(name, spec, Path(tmp))
                kept = 0
                with tarfile.open(tarball) as tar:
                    for member in tar.getmembers():
                        if not member.isfile():
                            continue
                        path = PurePosixPath(member.name).relative_to("package")
                        if not _selected(path, spec):
                            continue
                        rel = path.relative_to(spec["strip"]) if spec["strip"] and path.is_relative_to(spec["strip"]) else path
                        dest = staging / spec["dest"] / rel
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        with tar.extractfile(member) as src, open(dest, "wb") as f:
                            shutil.copyfileobj(src, f)
                        kept += 1
                if not kept:
                    sys.exit(f"web_assets: nothing selected from {tarball.name}")
        (staging / STAMP).write_text(stamp_text(packages))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="install here (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check that the pinned versions are installed")
    parser.add_argument("--force", action="store_true", help="reinstall even if up to date")
    parser.add_argument("--tests", action="store_true", help="the tests' scripts (axe-core), not the site's")
    args = parser.parse_args(argv)
    packages = TEST_PACKAGES if args.tests else PACKAGES
    target = (args.dir or (tests_dir() if args.tests else default_dir())).resolve()
    what = "test assets" if args.tests else "web assets"
    if args.check:
        ok = is_installed(target, packages)
        print(f"{what} {'up to date' if ok else 'missing or outdated'} in {target}")
        return 0 if ok else 1
    if is_installed(target, packages) and not args.force:
        print(f"{what} up to date in {target}")
        return 0
    install(target, packages)
    print(f"{what} installed in {target}: " + ", ".join(f"{n}@{s['version']}" for n, s in packages.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
