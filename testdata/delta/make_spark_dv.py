"""Make the Delta fixture that deltalake cannot write: deletion vectors (on
disk), column mapping by name with a renamed column, and V2 checkpoints
with sidecars, written by the reference implementation (Spark + Delta).

Run once, by hand; the table and the rows Spark reads at every version are
committed under testdata/delta/spark_dv/ and testdata/delta/spark_dv.expected.json.

    python3 -m venv /tmp/spark && /tmp/spark/bin/pip install pyspark==4.0.1 delta-spark==4.0.0
    /tmp/spark/bin/python testdata/delta/make_spark_dv.py

Needs Java 17 and Maven Central (delta-spark's jars, io.delta:delta-spark_2.13:4.0.0).
"""
import json
import os
import shutil
import sys

from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "spark_dv")
shutil.rmtree(path, ignore_errors=True)

spark = (
    configure_spark_with_delta_pip(
        SparkSession.builder.master("local[1]")
        .appName("servingsnap-dv-fixture")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
t = f"delta.`{path}`"


def sql(q):
    print(q, file=sys.stderr)
    spark.sql(q)


# v0: the table. Deletion vectors, column mapping by name, V2 checkpoints
# (with sidecars) every 3 commits.
sql(f"""CREATE TABLE {t} (series_id STRING, period DATE, value DOUBLE, region STRING)
USING delta PARTITIONED BY (region)
TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name',
               'delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '3',
               'delta.minReaderVersion' = '3', 'delta.minWriterVersion' = '7')""")


def rows(series, region, start, n, base):
    vals = []
    for i in range(n):
        vals.append(f"('{series}', DATE'{start}' + INTERVAL {i} DAY, {base + i * 1.5}, '{region}')")
    return ",".join(vals)


# v1, v2: appends, several files per region.
sql(f"INSERT INTO {t} VALUES " + ",".join([rows("PET.A.D", "east", "2024-01-01", 20, 10.0), rows("PET.B.D", "west", "2024-01-01", 20, 50.0)]))
sql(f"INSERT INTO {t} VALUES " + ",".join([rows("PET.C.D", "east", "2024-02-01", 15, 100.0), rows("PET.A.D", "east", "2024-01-21", 10, 40.0)]))
# v3: a delete that leaves deletion vectors (rows deleted in place); a checkpoint at v3.
sql(f"DELETE FROM {t} WHERE series_id = 'PET.A.D' AND value > 25 AND value < 45")
# v4: schema evolution: a new column.
sql(f"ALTER TABLE {t} ADD COLUMNS (note STRING)")
# v5: rows with the new column.
sql(f"INSERT INTO {t} VALUES ('PET.D.D', DATE'2024-03-01', 7.5, 'west', 'first'), ('PET.D.D', DATE'2024-03-02', 8.5, 'west', 'second')")
# v6: rename it (column mapping keeps the data); checkpoint at v6.
sql(f"ALTER TABLE {t} RENAME COLUMN note TO comment")
# v7: a second delete on a file that already has a deletion vector (its DV is replaced).
sql(f"DELETE FROM {t} WHERE series_id = 'PET.A.D' AND value < 13")
# v8: delete from another file.
sql(f"DELETE FROM {t} WHERE series_id = 'PET.B.D' AND value > 70")

versions = {}
last = spark.sql(f"DESCRIBE HISTORY {t}").agg({"version": "max"}).collect()[0][0]
for v in range(0, last + 1):
    df = spark.read.format("delta").option("versionAsOf", v).load(path)
    out = []
    for r in df.collect():
        d = r.asDict()
        d["period"] = d["period"].isoformat() if d["period"] else None
        out.append(d)
    out.sort(key=lambda d: (d["series_id"], d["period"]))
    versions[str(v)] = {"columns": df.columns, "rows": out}
with open(os.path.join(here, "spark_dv.expected.json"), "w") as f:
    json.dump(versions, f, indent=1, sort_keys=True)
    f.write("\n")
# Spark's checksum side files and Hadoop .crc files are not part of the table.
for root, _, files in os.walk(path):
    for name in files:
        if name.endswith(".crc"):
            os.remove(os.path.join(root, name))
print("versions 0..%d written to %s" % (last, path), file=sys.stderr)
