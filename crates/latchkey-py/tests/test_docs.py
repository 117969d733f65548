"""Every `python` example of docs/python.md runs, against a private Redis."""

import os
import re

import pytest

from conftest import REPO, RedisServer

DOC = os.path.join(REPO, "docs", "python.md")
EXAMPLE_URL = "redis://127.0.0.1:6380/0"
# The Redlock example's other two instances.
MORE_URLS = ["redis://127.0.0.1:6381/0", "redis://127.0.0.1:6382/0"]


def examples():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_doc_has_examples():
    assert len(examples()) >= 4


@pytest.fixture(scope="module")
def more_servers():
    servers = [RedisServer() for _ in MORE_URLS]
    yield servers
    for s in servers:
        s.stop()


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(server, more_servers, index):
    code = examples()[index].replace(EXAMPLE_URL, server.url)
    for url, more in zip(MORE_URLS, more_servers):
        code = code.replace(url, more.url)
    assert server.url in code or "latchkey.Client(" not in code
    exec(compile(code, f"docs/python.md example {index + 1}", "exec"), {"__name__": "__doc_example__"})
