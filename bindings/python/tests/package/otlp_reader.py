"""A small, independent reader of OTLP profiles requests
(ExportProfilesServiceRequest, opentelemetry-proto v1.10.0) for the tests,
on pprof_reader's wire-format helpers: field numbers from the .proto, not
from our encoder."""

import gzip

from pprof_reader import _fields, _ints


def _msgs(buf, num):
    return [v for n, wt, v in _fields(buf) if n == num and wt == 2]


def _int(buf, num, default=0):
    for n, wt, v in _fields(buf):
        if n == num and wt == 0:
            return v
    return default


def _any_value(buf):
    for n, wt, v in _fields(buf):
        if n == 1 and wt == 2:
            return v.decode("utf-8")
        if n == 3 and wt == 0:
            return v - (1 << 64) if v >= 1 << 63 else v
    return None


def decode(data):
    """{"resource": {key: value}, "profiles": [{"type", "unit", "samples":
    [{"stack": [function names, leaf first], "value", "link": (trace hex,
    span hex) or None, "attrs": {key: value}}]}]}"""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    (dictionary,) = _msgs(data, 2)
    strings = [s.decode("utf-8") for s in _msgs(dictionary, 5)]
    assert strings and strings[0] == ""
    functions = [(_int(f, 1), _int(f, 3)) for f in _msgs(dictionary, 3)]
    locations = []
    for loc in _msgs(dictionary, 2):
        lines = _msgs(loc, 3)
        locations.append([functions[_int(ln, 1)] for ln in lines])
    stacks = []
    for st in _msgs(dictionary, 7):
        idx = []
        for n, wt, v in _fields(st):
            if n == 1:
                idx += _ints(wt, v)
        stacks.append(idx)
    links = [(b"".join(_msgs(lk, 1)).hex(), b"".join(_msgs(lk, 2)).hex())
             for lk in _msgs(dictionary, 4)]
    attrs = []
    for kv in _msgs(dictionary, 6):
        vals = _msgs(kv, 2)
        attrs.append((strings[_int(kv, 1)], _any_value(vals[0]) if vals else None))
    # Zero values first, as the spec requires.
    assert stacks[0] == [] and locations[0] == [] and links[0] == ("", "") and \
        attrs[0] == ("", None) and functions[0] == (0, 0)

    out = {"resource": {}, "profiles": []}
    for rp in _msgs(data, 1):
        for res in _msgs(rp, 1):
            for kv in _msgs(res, 1):
                key = _msgs(kv, 1)[0].decode("utf-8")
                out["resource"][key] = _any_value(_msgs(kv, 2)[0])
        for sp in _msgs(rp, 2):
            for prof in _msgs(sp, 2):
                (st,) = _msgs(prof, 1)
                p = {"type": strings[_int(st, 1)], "unit": strings[_int(st, 2)],
                     "samples": []}
                for sm in _msgs(prof, 2):
                    stack_i, link_i, attr_i, values = 0, 0, [], []
                    for n, wt, v in _fields(sm):
                        if n == 1:
                            stack_i = v
                        elif n == 2:
                            attr_i += _ints(wt, v)
                        elif n == 3:
                            link_i = v
                        elif n == 4:
                            values += _ints(wt, v, signed=True)
                    names = [strings[functions_name] for loc in stacks[stack_i]
                             for functions_name, _ in locations[loc][:1]]
                    p["samples"].append({
                        "stack": names, "value": values[0] if values else None,
                        "link": links[link_i] if link_i else None,
                        "attrs": dict(attrs[i] for i in attr_i),
                    })
                out["profiles"].append(p)
    return out
