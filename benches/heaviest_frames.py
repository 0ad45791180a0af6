# The heaviest root frame of an /api/chains answer (no px=) and its heaviest child, as
# URL-encoded frame paths: what benches/serve_waits.sh and serve_waits_same.sh ask waits of.
# Usage: python3 benches/heaviest_frames.py CHAINS_JSON
import json, sys, urllib.parse

d = json.load(open(sys.argv[1]))
n = d["nodes"]
ch = {}
for i, x in enumerate(n):
    if x.get("parent") is not None:
        ch.setdefault(x["parent"], []).append(i)
kids = lambda i: ch.get(i, [])
r = max(kids(0), key=lambda i: n[i]["value"])
c = max(kids(r), key=lambda i: n[i]["value"]) if kids(r) else r
q = lambda p: urllib.parse.quote(p, safe="")
print(q(n[r]["name"]), q(n[r]["name"] + ";" + n[c]["name"]))
