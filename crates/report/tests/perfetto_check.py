"""Decode chainrec Perfetto exports with Perfetto's own generated schema (the PyPI
`perfetto` package's perfetto_trace_pb2) and report what they hold, as JSON on stdout.

Usage: perfetto_check.py FILE...   Exit status 1 when any file has a field or enum value
the schema does not know (protobuf keeps those as unknown fields), 2 on a decoding error.
"""

import json
import sys

from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def unknown_paths(msg, path, out):
    """Paths of unknown fields anywhere in msg."""
    for f in UnknownFieldSet(msg):
        out.append(f"{path}.<{f.field_number}>")
    for desc, value in msg.ListFields():
        if desc.type != desc.TYPE_MESSAGE:
            continue
        # protobuf >= 5 has is_repeated; older versions only label.
        repeated = desc.is_repeated if hasattr(desc, "is_repeated") else desc.label == desc.LABEL_REPEATED
        if repeated:
            for i, v in enumerate(value):
                unknown_paths(v, f"{path}.{desc.name}[{i}]", out)
        else:
            unknown_paths(value, f"{path}.{desc.name}", out)


def summary(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    unknown = []
    unknown_paths(trace, "trace", unknown)
    s = {
        "packets": len(trace.packet),
        "unknown_fields": unknown[:20],
        "unknown_field_count": len(unknown),
        "clocks": [],
        "primary_trace_clock": None,
        "packet_clock_ids": sorted({p.timestamp_clock_id for p in trace.packet if p.HasField("timestamp")}),
        "ftrace_clocks": sorted({pb.FtraceClock.Name(p.ftrace_events.ftrace_clock)
                                 for p in trace.packet if p.HasField("ftrace_events")}),
        "events": {},
        "processes": [],
        "threads": [],
        "tracks": [],
        "track_events": {},
        "lost_bundles": 0,
    }
    for p in trace.packet:
        if p.HasField("clock_snapshot"):
            cs = p.clock_snapshot
            s["clocks"] += [[pb.BuiltinClock.Name(c.clock_id) if c.clock_id < 64 else c.clock_id,
                             c.timestamp] for c in cs.clocks]
            s["primary_trace_clock"] = pb.BuiltinClock.Name(cs.primary_trace_clock)
        if p.HasField("process_tree"):
            for pr in p.process_tree.processes:
                s["processes"].append({
                    "pid": pr.pid,
                    "ppid": pr.ppid if pr.HasField("ppid") else None,
                    "cmdline": list(pr.cmdline),
                    "kthread": pr.is_kthread,
                })
            s["threads"] += [[t.tid, t.tgid, t.name] for t in p.process_tree.threads]
        if p.HasField("ftrace_events"):
            b = p.ftrace_events
            s["lost_bundles"] += int(b.lost_events)
            for e in b.event:
                kind = e.WhichOneof("event")
                s["events"][kind] = s["events"].get(kind, 0) + 1
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            s["tracks"].append({
                "uuid": d.uuid,
                "name": d.name,
                "counter": d.HasField("counter"),
                "thread": [d.thread.pid, d.thread.tid] if d.HasField("thread") else None,
                "process": [d.process.pid, list(d.process.process_labels)] if d.HasField("process") else None,
            })
        if p.HasField("track_event"):
            e = p.track_event
            key = pb.TrackEvent.Type.Name(e.type)
            s["track_events"][key] = s["track_events"].get(key, 0) + 1
            if e.name:
                s.setdefault("track_event_names", []).append(e.name)
    return s


def main():
    result = {}
    bad = False
    for path in sys.argv[1:]:
        try:
            result[path] = summary(path)
        except Exception as e:  # a decoding error of the schema itself
            print(json.dumps({"error": f"{path}: {e}"}))
            sys.exit(2)
        bad |= result[path]["unknown_field_count"] > 0
    print(json.dumps(result, indent=1))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
