"""Query a `chainrec export --parquet-dir` layout as a fleet does: with DuckDB
(read_parquet over the tree, hive_partitioning) and with PySpark in local mode
(spark.read.parquet of the table's directory: partition discovery), the same SQL in both,
and print the answers as one JSON document for tests/parquet.rs.

usage: fleet.py DIR [duckdb|spark ...]
"""
import json
import sys

# The weight of the chain graph (docs/REPORTS.md: the blocked time the levels explain plus
# the runnable part) of the waits chains start from (root), per host and waiting thread:
# the top chains of the fleet.
TOP = """
SELECT host, comm, CAST(sum(attributed_ns + coalesce(runq_ns, offcpu_ns, 0)) AS BIGINT) AS ns,
       count(*) AS waits
FROM waits WHERE root
GROUP BY host, comm
ORDER BY ns DESC, host, comm
LIMIT 10
"""
# The partition columns and the stacks table joined on (trace, stack id).
PARTS = """
SELECT host, CAST(date AS STRING) AS date, count(*) AS waits,
       count(DISTINCT trace) AS traces
FROM waits GROUP BY host, date ORDER BY host, date NULLS FIRST
"""
JOIN = """
SELECT w.host, s.kind, count(*) AS waits
FROM waits w JOIN stacks s ON w.trace = s.trace AND w.kstack = s.stack_id
GROUP BY w.host, s.kind ORDER BY w.host, s.kind
"""
QUERIES = {"top": TOP, "parts": PARTS, "join": JOIN}


def duck(root):
    import duckdb
    con = duckdb.connect()
    for t in ("waits", "stacks"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{root}/{t}/**/*.parquet', hive_partitioning=true)")
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE waits)").fetchall())
    out = {"types": {c: types.get(c) for c in ("host", "date")}}
    for name, q in QUERIES.items():
        out[name] = [list(r) for r in con.execute(q.replace("STRING", "VARCHAR")).fetchall()]
    return out


def spark(root):
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master("local[1]").appName("chainrec-fleet")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    try:
        for t in ("waits", "stacks"):
            s.read.parquet(f"{root}/{t}").createOrReplaceTempView(t)
        types = dict(s.table("waits").dtypes)
        out = {"types": {c: types.get(c) for c in ("host", "date")}}
        for name, q in QUERIES.items():
            out[name] = [list(r) for r in s.sql(q).collect()]
        return out
    finally:
        s.stop()


root = sys.argv[1]
readers = sys.argv[2:] or ["duckdb", "spark"]
json.dump({r: {"duckdb": duck, "spark": spark}[r](root) for r in readers}, sys.stdout)
