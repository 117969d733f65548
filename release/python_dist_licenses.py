"""What no registry tool checks in the sdist and the wheel: both license texts
travel inside (PEP 639: the sdist's root, the wheel's .dist-info/licenses/),
byte for byte the repository's; the license is the SPDX expression alone,
without the `License ::` classifiers PEP 639 deprecates beside it; and no
placeholder URL is left in the metadata.

Usage: python python_dist_licenses.py SDIST WHEEL REPO_ROOT
Prints one line per problem and exits 1 if there is any."""

import email.parser
import pathlib
import sys
import tarfile
import zipfile

EXPRESSION = "MIT OR Apache-2.0"
LICENSES = ("LICENSE-MIT", "LICENSE-APACHE")


def metadata_problems(where: str, text: str) -> list[str]:
    meta = email.parser.Parser().parsestr(text, headersonly=True)
    problems = []
    if meta["License-Expression"] != EXPRESSION:
        problems.append(f"{where}: License-Expression is {meta['License-Expression']!r}, not {EXPRESSION!r}")
    if meta["License"] is not None:
        problems.append(f"{where}: a License field beside License-Expression (PyPI refuses both)")
    for classifier in meta.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            problems.append(f"{where}: classifier {classifier!r} beside License-Expression")
    if sorted(meta.get_all("License-File") or []) != sorted(LICENSES):
        problems.append(f"{where}: License-File is {meta.get_all('License-File')}, not {list(LICENSES)}")
    if "example.invalid" in text:
        problems.append(f"{where}: a placeholder URL (example.invalid) in the metadata")
    return problems


def content_problems(where: str, files: dict[str, bytes | None], root: pathlib.Path) -> list[str]:
    problems = []
    for name in LICENSES:
        data = files.get(name)
        if data is None:
            problems.append(f"{where}: {name} is missing")
        elif data != (root / name).read_bytes():
            problems.append(f"{where}: {name} differs from the repository's")
    return problems


def main() -> int:
    sdist, wheel, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    problems = []
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]

        def read(name: str) -> bytes | None:
            try:
                member = tar.extractfile(f"{top}/{name}")
            except KeyError:
                return None
            return member.read() if member else None

        problems += metadata_problems(sdist.name, (read("PKG-INFO") or b"").decode())
        problems += content_problems(sdist.name, {n: read(n) for n in LICENSES}, root)
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))

        def read_whl(name: str) -> bytes | None:
            path = f"{dist_info}/{name}"
            return whl.read(path) if path in names else None

        problems += metadata_problems(wheel.name, (read_whl("METADATA") or b"").decode())
        problems += content_problems(wheel.name, {n: read_whl(f"licenses/{n}") for n in LICENSES}, root)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
