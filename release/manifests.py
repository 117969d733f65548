#!/usr/bin/env python3
"""Every manifest that will be published says the same version and nothing
untrue: the Cargo workspace's version is the one version (the Python
package reads it from Cargo.toml; every package.json of the Node package,
its platform packages and the main package's optionalDependencies on them
must repeat it), and no manifest carries a placeholder where a field should
be true or absent.

Usage: release/manifests.py   (exit 1 with one line per problem)
"""
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Text no published field may hold: example domains, the words of a
# field left for later.
PLACEHOLDER = re.compile(r"example\.(invalid|com|org|net)|\bTODO\b|\bFIXME\b|\bXXX\b|placeholder", re.I)


def cargo_version():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
            check=True, capture_output=True, text=True, cwd=ROOT,
        ).stdout
    )
    versions = {p["name"]: p["version"] for p in meta["packages"]}
    return versions


def main():
    problems = []
    versions = cargo_version()
    version = versions["latchkey-redis"]
    for name, v in sorted(versions.items()):
        if v != version:
            problems.append(f"crate {name} is at {v}, not the workspace's {version}")
    node = ROOT / "crates" / "latchkey-node"
    package_files = sorted(
        p for p in node.rglob("package.json") if "node_modules" not in p.parts
    )
    for path in package_files:
        pkg = json.loads(path.read_text())
        rel = path.relative_to(ROOT)
        if pkg.get("version") != version:
            problems.append(f"{rel}: version {pkg.get('version')}, not {version}")
        for dep, want in pkg.get("optionalDependencies", {}).items():
            if dep.startswith("latchkey-redis") and want != version:
                problems.append(f"{rel}: optionalDependencies {dep} {want}, not {version}")
    manifests = (
        [ROOT / "Cargo.toml"]
        + sorted((ROOT / "crates").glob("*/Cargo.toml"))
        + [ROOT / "crates" / "latchkey-py" / "pyproject.toml"]
        + package_files
    )
    for path in manifests:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PLACEHOLDER.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: a placeholder: {line.strip()}")
    for line in problems:
        print(f"manifests: FAILED: {line}", file=sys.stderr)
    if not problems:
        print(f"manifests: version {version} in every manifest ({len(manifests)} read), no placeholder")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
