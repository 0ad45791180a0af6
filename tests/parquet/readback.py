"""Read a chainrec Parquet export (waits + stacks tables) with pyarrow and with DuckDB, as
users do, and print both as one JSON document for tests/parquet.rs to compare with
`chainrec waits --json`. Timestamps become integer ns (JSON has no timestamp type).

usage: readback.py WAITS.parquet STACKS.parquet
"""
import json
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


def arrow_table(path):
    f = pq.ParquetFile(path)
    t = f.read()
    for i, field in enumerate(t.schema):
        if pa.types.is_timestamp(field.type):
            t = t.set_column(i, field.name, t.column(i).cast(pa.int64()))
    meta = {k.decode(): v.decode() for k, v in (f.metadata.metadata or {}).items()
            if k.decode().startswith("chainrec.")}
    return {"rows": t.to_pylist(), "row_groups": f.metadata.num_row_groups, "metadata": meta}


def duck_table(con, path):
    types = {r[0]: r[1] for r in con.execute(
        "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))", [path]).fetchall()}
    ts = [c for c, t in types.items() if t.startswith("TIMESTAMP")]
    replace = f" REPLACE ({', '.join(f'epoch_ns({c}) AS {c}' for c in ts)})" if ts else ""
    cur = con.execute(f"SELECT *{replace} FROM read_parquet(?)", [path])
    cols = [d[0] for d in cur.description]
    return {"rows": [dict(zip(cols, r)) for r in cur.fetchall()], "types": types}


waits, stacks = sys.argv[1], sys.argv[2]
con = duckdb.connect()
json.dump({
    "pyarrow": {"waits": arrow_table(waits), "stacks": arrow_table(stacks)},
    "duckdb": {"waits": duck_table(con, waits), "stacks": duck_table(con, stacks)},
}, sys.stdout)
