#!/usr/bin/env python3
"""Rewrite `crate::OLD...` paths of latchkey's flat layout to the layered one (issue 29 item 5).
Usage: libtree_rewrite.py FILE.rs...   (idempotent: paths already under vocab/transport/backend/primitives are left alone)
Handles `crate::old::X`, `$crate::old`, and `use crate::{old::X, old2, ...}` groups (top-level items only).
Run from anywhere on files merged in later, e.g.
    python3 tools/libtree_rewrite.py $(git ls-files "crates/latchkey/src/*.rs")
A new root module another branch adds needs an entry in MAP (and a mod line in its layer's mod.rs).
Delete this tool and libtree_moves.txt once the issue-29 branches are merged."""
import re, sys
MAP = {
 'acl': 'vocab::acl', 'error': 'vocab::error', 'error_acl': 'vocab::error::acl', 'error_tls': 'vocab::error::tls',
 'metrics': 'vocab::metrics', 'names': 'vocab::names', 'outcome': 'vocab::outcome', 'protocol': 'vocab::protocol',
 'scripts': 'vocab::protocol::scripts', 'token': 'vocab::token',
 'builder': 'transport::builder', 'connection': 'transport::connection', 'deferred': 'transport::deferred',
 'pinned': 'transport::pinned', 'queue': 'transport::local_queues', 'sentinel': 'transport::sentinel',
 'session': 'transport::session', 'subscriber': 'transport::subscriber', 'tls': 'transport::tls',
 'tls_name': 'transport::tls::server_name',
 'attempt': 'primitives::lock::attempt', 'barrier': 'primitives::barrier', 'by_token': 'primitives::lock::by_token',
 'election': 'primitives::election', 'election_spec': 'primitives::election::spec', 'fair': 'primitives::lock::fair',
 'fair_wait': 'primitives::lock::fair::wait', 'fence': 'primitives::fence', 'guard': 'primitives::lock::guard',
 'handoff': 'primitives::lock::release', 'inspect': 'primitives::inspect', 'latch': 'primitives::latch',
 'leadership': 'primitives::election::leadership', 'listener': 'primitives::signal::listener',
 'lock': 'primitives::lock', 'observe': 'primitives::election::observer', 'permit': 'primitives::semaphore::permit',
 'primitive': 'primitives::shared', 'rwguard': 'primitives::rwlock::guard', 'rwlock': 'primitives::rwlock',
 'semaphore': 'primitives::semaphore', 'signal': 'primitives::signal', 'signal_wire': 'primitives::signal::wire',
 'spec': 'primitives::lock::spec', 'wait': 'primitives::lock::wait', 'watchdog': 'primitives::watchdog', 'retry': 'vocab::retry',
}
IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')

def fix_item(item):
    """One top-level item of a `crate::{...}` group, e.g. ` names::{a, b}` or `queue`."""
    m = re.match(r'(\s*)([A-Za-z_][A-Za-z0-9_]*)(.*)', item, re.S)
    if not m or m.group(2) not in MAP:
        return item
    lead, head, rest = m.groups()
    new = MAP[head]
    # a bare renamed module keeps its old local name, so the code below it still compiles
    if not rest.strip().startswith('::') and not rest.strip().startswith('as') and new.split('::')[-1] != head:
        return f'{lead}{new} as {head}{rest}'
    return f'{lead}{new}{rest}'

def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch == '{': depth += 1
        elif ch == '}': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur); cur = ''
        else:
            cur += ch
    out.append(cur)
    return out

def rewrite(src):
    res, i = [], 0
    pat = re.compile(r'(?<![A-Za-z0-9_])crate::')
    while True:
        m = pat.search(src, i)
        if not m:
            res.append(src[i:]); break
        res.append(src[i:m.end()]); j = m.end()
        if src.startswith('{', j):
            depth, k = 0, j
            while k < len(src):
                if src[k] == '{': depth += 1
                elif src[k] == '}':
                    depth -= 1
                    if depth == 0: break
                k += 1
            inner = src[j + 1:k]
            res.append('{' + ','.join(fix_item(it) for it in split_top(inner)) + '}')
            i = k + 1
            continue
        im = IDENT.match(src, j)
        if im and im.group(0) in MAP:
            head = im.group(0); after = src[im.end():]
            new = MAP[head]
            tail = re.match(r'\s*;', after)
            if src[max(0, m.start() - 4):m.start()] == 'use ' and tail and new.split('::')[-1] != head:
                res.append(f'{new} as {head}')
            else:
                res.append(new)
            i = im.end()
        else:
            i = j
    return ''.join(res)

for path in sys.argv[1:]:
    src = open(path, encoding='utf-8').read()
    out = rewrite(src)
    if out != src:
        open(path, 'w', encoding='utf-8').write(out)
        print('rewrote', path)
