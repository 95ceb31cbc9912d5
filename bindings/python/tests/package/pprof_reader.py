"""A small, independent pprof reader for the tests: protobuf wire format by
hand, so the tests do not trust our own encoder's idea of the schema."""

import gzip
import os


def _varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf):
    """Yield (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            v = buf[i:i + n]
            i += n
        elif wt == 1:
            v = int.from_bytes(buf[i:i + 8], "little")
            i += 8
        elif wt == 5:
            v = int.from_bytes(buf[i:i + 4], "little")
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def _ints(wt, v, signed=False):
    """A repeated integer field, packed (bytes) or not."""
    out = []
    if wt == 2:
        i = 0
        while i < len(v):
            x, i = _varint(v, i)
            out.append(x)
    else:
        out.append(v)
    if signed:
        out = [x - (1 << 64) if x >= 1 << 63 else x for x in out]
    return out


def decode(data):
    """Decode a (possibly gzip'ed) pprof Profile into plain Python data:
    {"sample_types": [(type, unit)], "period_type": (type, unit), "period": int,
     "time_nanos": int, "duration_nanos": int,
     "samples": [{"stack": [(function, file, line), ...] leaf first,
                  "values": [int], "labels": {key: str}}]}"""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, raw_types, raw_samples, locs, funcs = [], [], [], {}, {}
    prof = {"period": 0, "time_nanos": 0, "duration_nanos": 0, "period_type": None}
    raw_period_type = None
    for num, wt, v in _fields(data):
        if num == 1:
            raw_types.append({n: x for n, _, x in _fields(v)})
        elif num == 2:
            s = {"locs": [], "values": [], "labels": []}
            for n, w, x in _fields(v):
                if n == 1:
                    s["locs"] += _ints(w, x)
                elif n == 2:
                    s["values"] += _ints(w, x, signed=True)
                elif n == 3:
                    s["labels"].append({m: y for m, _, y in _fields(x)})
            raw_samples.append(s)
        elif num == 4:
            loc = {"id": 0, "lines": []}
            for n, _, x in _fields(v):
                if n == 1:
                    loc["id"] = x
                elif n == 4:
                    ln = {m: y for m, _, y in _fields(x)}
                    loc["lines"].append((ln.get(1, 0), ln.get(2, 0)))
            locs[loc["id"]] = loc
        elif num == 5:
            f = {m: y for m, _, y in _fields(v)}
            funcs[f.get(1, 0)] = f
        elif num == 6:
            strings.append(v.decode("utf-8"))
        elif num == 9:
            prof["time_nanos"] = v
        elif num == 10:
            prof["duration_nanos"] = v
        elif num == 11:
            raw_period_type = {n: x for n, _, x in _fields(v)}
        elif num == 12:
            prof["period"] = v

    def s(i):
        return strings[i] if i < len(strings) else f"<bad string {i}>"

    prof["sample_types"] = [(s(t.get(1, 0)), s(t.get(2, 0))) for t in raw_types]
    if raw_period_type is not None:
        prof["period_type"] = (s(raw_period_type.get(1, 0)), s(raw_period_type.get(2, 0)))
    prof["samples"] = []
    for rs in raw_samples:
        stack = []
        for lid in rs["locs"]:
            for fid, line in locs[lid]["lines"]:
                f = funcs[fid]
                stack.append((s(f.get(2, 0)), s(f.get(4, 0)), line))
        labels = {s(lb.get(1, 0)): s(lb.get(2, 0)) for lb in rs["labels"] if lb.get(2)}
        prof["samples"].append({"stack": stack, "values": rs["values"], "labels": labels})
    return prof


def load_dir(path):
    """Every .pb.gz / .pb profile in a folder, decoded, in name order."""
    out = []
    for name in sorted(os.listdir(path)):
        if name.endswith(".pb.gz") or name.endswith(".pb"):
            with open(os.path.join(path, name), "rb") as f:
                out.append(decode(f.read()))
    return out


def samples(profiles):
    """All samples of several decoded profiles, flattened."""
    return [s for p in profiles for s in p["samples"]]


def function_values(profiles, leaf_only=True):
    """{function name: summed first value}, by leaf frame (self) or by any
    frame of the stack (total)."""
    out = {}
    for smp in samples(profiles):
        names = [smp["stack"][0][0]] if leaf_only and smp["stack"] else \
            {f[0] for f in smp["stack"]}
        for n in names:
            out[n] = out.get(n, 0) + smp["values"][0]
    return out
