#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# test_cli_json.py: parse the --json output of an mcroute command with Python's json module and check that it says what the text output says.
#
# Usage: test_cli_json.py KIND JSON_FILE TEXT_FILE
#   KIND: locate | locate-replicas | stats | diff | probe | migrate | clients
# Exits 0 when the two agree, 1 (with the difference on stderr) when not.
import json
import sys


def fail(msg):
    sys.stderr.write("test_cli_json: %s\n" % msg)
    sys.exit(1)


def key_bytes(item):
    """The exact bytes of a key of the document: key_hex when present."""
    if "key_hex" in item:
        raw = bytes.fromhex(item["key_hex"])
        # the string is the same key with U+FFFD for the bytes that are not UTF-8
        if raw.decode("utf-8", "replace") != item["key"]:
            fail("key %r does not match its key_hex %s" % (item["key"], item["key_hex"]))
        return raw
    return item["key"].encode("utf-8")


def number(text, value, what):
    if text == "-":
        if value is not None:
            fail("%s: text '-', JSON %r" % (what, value))
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail("%s: JSON %r is not a number" % (what, value))
    if float(text) != value:
        fail("%s: text %s, JSON %r" % (what, text, value))


def check_stats(doc, lines):
    section, rows, named, top = None, [], {}, None
    for line in lines:
        if b"\t" not in line:  # a section header ("[::1]:11211" is a server)
            section = line.decode("utf-8")
            named[section] = {}
            if section == "[top]":
                top = []
            continue
        if section == "[top]":  # KEY<TAB>COUNT<TAB>SHARE<TAB>SERVER, a key of any bytes
            top.append(line.rsplit(b"\t", 3))
            continue
        fields = line.decode("utf-8").split("\t")
        if section == "[servers]":
            rows.append(fields)
        else:
            named[section][fields[0]] = fields[1]
    named.pop("[top]", None)
    if top is None:
        if "top" in doc:
            fail("'top' in JSON, no [top] in text")
    else:
        items = doc["top"]
        if len(items) != len(top):
            fail("%d top keys in JSON, %d in text" % (len(items), len(top)))
        for (key, count, share, server), item in zip(top, items):
            if sorted(item) not in (sorted(["key", "count", "share", "server"]),
                                    sorted(["key", "key_hex", "count", "share", "server"])):
                fail("top key %r: members %s" % (key, sorted(item)))
            if key_bytes(item) != key or item["server"].encode() != server:
                fail("top line %r, JSON %r" % ((key, count, share, server), item))
            number(count.decode(), item["count"], "top %r count" % key)
            number(share.decode(), item["share"], "top %r share" % key)
    servers = doc["servers"]
    if len(servers) != len(rows):
        fail("%d servers in JSON, %d in text" % (len(servers), len(rows)))
    names = ["weight", "points", "ring_share", "expected_share", "keys", "key_share"]
    for fields, s in zip(rows, servers):
        if s["server"] != fields[0]:
            fail("server %r, text %r" % (s["server"], fields[0]))
        want = names[: len(fields) - 1]
        if sorted(s) != sorted(["server"] + want):
            fail("server %s: members %s, want %s" % (fields[0], sorted(s), want))
        for name, text in zip(want, fields[1:]):
            number(text, s[name], "%s %s" % (fields[0], name))
    for section, member in (("[ring]", "ring"), ("[keys]", "keys")):
        if section not in named:
            if member in doc:
                fail("'%s' in JSON, no %s in text" % (member, section))
            continue
        obj = doc[member]
        if sorted(obj) != sorted(named[section]):
            fail("%s: JSON %s, text %s" % (member, sorted(obj), sorted(named[section])))
        for name, text in named[section].items():
            if name in ("mode", "hash"):
                if obj[name] != text:
                    fail("%s %s: JSON %r, text %r" % (member, name, obj[name], text))
            else:
                number(text, obj[name], "%s %s" % (member, name))


def check_locate(doc, lines, replicas):
    items = doc["keys"]
    if len(items) != len(lines):
        fail("%d keys in JSON, %d lines" % (len(items), len(lines)))
    for item, line in zip(items, lines):
        if replicas:
            fields = line.split(b"\t")
            under = fields[-1] == b"under-replicated"
            if under:
                fields = fields[:-1]
            # a key may contain tabs: the servers are the last fields
            servers = [s.encode() for s in item["servers"]]
            n = len(servers)
            if fields[len(fields) - n:] != servers or b"\t".join(fields[: len(fields) - n]) != key_bytes(item):
                fail("line %r, JSON %r" % (line, item))
            if item["under_replicated"] is not under:
                fail("under_replicated: line %r, JSON %r" % (line, item))
        else:
            key, _, server = line.rpartition(b"\t")
            if key != key_bytes(item) or server != item["server"].encode():
                fail("line %r, JSON %r" % (line, item))


def check_diff(doc, lines):
    text = [line.decode("utf-8").split("\t") for line in lines]
    if text[0][0] != "moved":
        fail("first line %r" % text[0])
    number(text[0][1], doc["moved"], "moved")
    pairs = [f for f in text[1:] if f[0] != "keys_moved"]
    if len(pairs) != len(doc["pairs"]):
        fail("%d pairs in JSON, %d in text" % (len(doc["pairs"]), len(pairs)))
    for f, p in zip(pairs, doc["pairs"]):
        if (p["from"], p["to"]) != (f[0], f[1]):
            fail("pair %r, text %r" % (p, f))
        number(f[2], p["fraction"], "fraction")
    last = [f for f in text if f[0] == "keys_moved"]
    if last:
        number(last[0][1], doc["keys_moved"], "keys_moved")
        number(last[0][2], doc["keys_total"], "keys_total")
    elif "keys_moved" in doc or "keys_total" in doc:
        fail("keys_moved in JSON, not in text")


def check_probe(doc, lines):
    items = [i for i in doc["keys"] if "error" not in i]
    if len(items) != len(lines):
        fail("%d answered keys in JSON, %d lines" % (len(items), len(lines)))
    for item, line in zip(items, lines):
        key, owner, holders = line.split(b"\t")
        want = [] if holders == b"-" else holders.split(b",")
        if key != key_bytes(item) or owner != item["owner"].encode() or \
                [h.encode() for h in item["holders"]] != want:
            fail("line %r, JSON %r" % (line, item))


def check_clients(doc, lines):
    """mcroute clients: NAME<TAB>MODE<TAB>HASH<TAB>SUMMARY lines, and an array."""
    if not isinstance(doc, list) or len(doc) != len(lines):
        fail("%s clients in JSON, %d lines" % (len(doc) if isinstance(doc, list) else "no",
                                               len(lines)))
    for item, line in zip(doc, lines):
        fields = line.decode("utf-8").split("\t")
        if len(fields) != 4 or sorted(item) != ["hash", "mode", "name", "summary"] or \
                [item["name"], item["mode"], item["hash"], item["summary"]] != fields:
            fail("line %r, JSON %r" % (line, item))


def check_migrate(doc, lines):
    """The table of mcroute migrate: a header, a row per source, the total
    row, the summary line; the JSON's counts add up."""
    cols = ["scanned", "moved", "copied", "present", "expired", "gone", "failed"]
    rows = [line.decode("utf-8").split() for line in lines]
    if rows[0][:3] != ["SERVER", "ADDRESS", "SCANNED"]:
        fail("header %r" % rows[0])
    sources = doc["sources"]
    if len(rows) != len(sources) + 3:
        fail("%d rows for %d sources" % (len(rows), len(sources)))

    def counts(item):
        sk = item["skipped"]
        return [item["scanned"], item["moved"], item["copied"], sk["present"], sk["expired"],
                sk["gone"], item["failed"]]

    for row, src in zip(rows[1:], sources):
        if row[0] != src["id"] or row[1] != src["address"]:
            fail("row %r, source %r" % (row, src))
        if [int(x) for x in row[2:9]] != counts(src):
            fail("row %r, counts %r" % (row, counts(src)))
        if " ".join(row[9:]) != src["status"]:
            fail("row %r, status %r" % (row, src["status"]))
    total = rows[len(sources) + 1]
    if total[0] != "total" or [int(x) for x in total[1:8]] != counts(doc):
        fail("total row %r, JSON %r" % (total, counts(doc)))
    if " ".join(total[8:]) != doc["status"]:
        fail("total row %r, status %r" % (total, doc["status"]))
    for i, name in enumerate(cols):
        if sum(counts(s)[i] for s in sources) != counts(doc)[i]:
            fail("the sources' %s do not add up to the total" % name)
    if sum(s["stray"] for s in sources) != doc["stray"]:
        fail("the sources' stray keys do not add up to the total")
    done = doc["copied"] + sum(doc["skipped"].values()) + doc["failed"]
    if not doc["dry_run"] and doc["status"] == "ok" and done != doc["moved"]:
        fail("moved %d, but %d copied, skipped or failed" % (doc["moved"], done))
    if doc["status"] == "ok" and doc["message"] != "":
        fail("status ok with a message")
    for s in sources:
        if (s["status"] == "ok") != (s["message"] == ""):
            fail("source %r: a message exactly when the status is not ok" % s)


def main():
    if len(sys.argv) != 4:
        fail("usage: test_cli_json.py KIND JSON_FILE TEXT_FILE")
    kind, json_file, text_file = sys.argv[1:]
    with open(json_file, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))  # strict: the bytes must be UTF-8
    except ValueError as e:
        fail("%s: not a JSON document: %s" % (json_file, e))
    with open(text_file, "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] != b"":
        fail("%s: last line without a newline" % text_file)
    lines = lines[:-1]
    if kind == "stats":
        check_stats(doc, lines)
    elif kind in ("locate", "locate-replicas"):
        check_locate(doc, lines, kind == "locate-replicas")
    elif kind == "diff":
        check_diff(doc, lines)
    elif kind == "probe":
        check_probe(doc, lines)
    elif kind == "migrate":
        check_migrate(doc, lines)
    elif kind == "clients":
        check_clients(doc, lines)
    else:
        fail("unknown kind %r" % kind)


main()
