"""Every `python` example of docs/python.md runs, against a private Redis."""

import os
import re

import pytest

from conftest import REPO

DOC = os.path.join(REPO, "docs", "python.md")
EXAMPLE_URL = "redis://127.0.0.1:6380/0"


def examples():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_doc_has_examples():
    assert len(examples()) >= 4


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(server, index):
    code = examples()[index].replace(EXAMPLE_URL, server.url)
    assert server.url in code or "latchkey.Client(" not in code
    exec(compile(code, f"docs/python.md example {index + 1}", "exec"), {"__name__": "__doc_example__"})
