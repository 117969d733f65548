#!/usr/bin/env python3
"""`./dev release-prepare VERSION [DATE]`: the one step that writes a release's
version and date, so that no one writes them by hand.

- the Cargo workspace's version and the versions its path dependencies ask
  for (Cargo.toml), then Cargo.lock (`cargo update --workspace`);
- every package.json of the Node package (main, platform packages, the
  optionalDependencies on them) and its package-lock.json;
- CHANGELOG.md: the `## [Unreleased]` section becomes `## [VERSION] - DATE`
  (DATE: today, UTC, unless given), under a new empty `## [Unreleased]`.

The Python package's version is the crate's (maturin reads Cargo.toml).
It refuses a version that is not X.Y.Z, one not above the workspace's
(unless equal, to date a prepared version again is refused too), and an
empty Unreleased section. It commits nothing: review, run
`./dev release-check`, commit, tag (docs/releasing.md).
"""
import datetime
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse(version):
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        sys.exit(f"release-prepare: {version!r} is not a version X.Y.Z")
    return tuple(int(p) for p in version.split("."))


def main(argv):
    if not 1 <= len(argv) <= 2:
        sys.exit("usage: ./dev release-prepare VERSION [YYYY-MM-DD]")
    version = argv[0]
    date = argv[1] if len(argv) == 2 else datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        sys.exit(f"release-prepare: {date!r} is not a date YYYY-MM-DD")
    cargo = ROOT / "Cargo.toml"
    text = cargo.read_text()
    current = re.search(r'(?m)^\[workspace\.package\]\n(?:.*\n)*?version = "([^"]+)"', text).group(1)
    if parse(version) < parse(current):
        sys.exit(f"release-prepare: {version} is below the workspace's {current}")
    changelog = ROOT / "CHANGELOG.md"
    log = changelog.read_text()
    if f"## [{version}]" in log:
        sys.exit(f"release-prepare: CHANGELOG.md already has a [{version}] section")
    head = log.split("## [Unreleased]", 1)
    if len(head) != 2:
        sys.exit("release-prepare: CHANGELOG.md has no '## [Unreleased]' section")
    body = head[1].split("\n## [", 1)[0]
    if not body.strip():
        sys.exit("release-prepare: the Unreleased section of CHANGELOG.md is empty")

    # Cargo.toml: the workspace's version and what its path dependencies ask.
    text = re.sub(r'(?m)^(\[workspace\.package\]\n(?:.*\n)*?version = )"[^"]+"', rf'\1"{version}"', text, count=1)
    text = re.sub(r'(path = "crates/[^"]+", version = )"[^"]+"', rf'\1"{version}"', text)
    cargo.write_text(text)
    subprocess.run(["cargo", "update", "--workspace", "--quiet"], check=True, cwd=ROOT)

    node = ROOT / "crates" / "latchkey-node"
    for path in sorted(p for p in node.rglob("package*.json") if "node_modules" not in p.parts):
        pkg = json.loads(path.read_text())
        if path.name == "package.json":
            pkg["version"] = version
            for dep in pkg.get("optionalDependencies", {}):
                if dep.startswith("latchkey-redis"):
                    pkg["optionalDependencies"][dep] = version
        else:  # package-lock.json: the root package's own entries
            pkg["version"] = version
            if "" in pkg.get("packages", {}):
                pkg["packages"][""]["version"] = version
                for dep in pkg["packages"][""].get("optionalDependencies", {}):
                    if dep.startswith("latchkey-redis"):
                        pkg["packages"][""]["optionalDependencies"][dep] = version
        path.write_text(json.dumps(pkg, indent=2) + "\n")

    changelog.write_text(head[0] + f"## [Unreleased]\n\n## [{version}] - {date}" + head[1])
    print(f"release-prepare: {current} -> {version}, CHANGELOG dated {date}; now ./dev release-check, commit, tag v{version}")


if __name__ == "__main__":
    main(sys.argv[1:])
