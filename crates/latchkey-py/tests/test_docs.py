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


def printed_comments(code):
    """The comment after each `print(...)` line: what the doc says it prints."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+# (.*)$", code, re.M)]


def as_pattern(said):
    """A doc's sample message as a pattern: its numbers may differ (a
    measured wait, a port)."""
    return "".join(r"\d+(\.\d+)?" if part and part[0].isdigit() else re.escape(part)
                   for part in re.split(r"(\d+(?:\.\d+)?)", said))


@pytest.mark.parametrize("index", [i for i, code in enumerate(examples()) if printed_comments(code)])
def test_printed_messages_are_the_docs(server, more_servers, index, capsys):
    code = examples()[index].replace(EXAMPLE_URL, server.url)
    exec(compile(code, f"docs/python.md example {index + 1}", "exec"), {"__name__": "__doc_example__"})
    printed = capsys.readouterr().out.splitlines()
    said = printed_comments(examples()[index])
    assert len(printed) == len(said)
    for line, comment in zip(printed, said):
        assert re.fullmatch(as_pattern(comment), line), (line, comment)


def test_the_primitives_example_runs_twice_on_one_server(server, more_servers):
    """Run again within the latch's TTL (a reader trying it twice): a latch
    opens once, so the example names its latch per run."""
    [index] = [i for i, code in enumerate(examples()) if "client.latch(" in code]
    for _ in range(2):
        test_example_runs(server, more_servers, index)
