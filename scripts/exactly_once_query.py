"""One Spark driver of the exactly-once checker (scripts/exactly_once.py): the
tidemark_paimon source with sink columns, a query per lane (the append table,
the primary-key table's changelog) into the sink under test. Faults come
through files in the control directory, checked in every foreachBatch:
`kill-before-<lane>` / `kill-after-<lane>` (SIGKILL this driver before or
after the sink's commit), `stall-<lane>` (stop inside foreachBatch, before
the sink, until `release-<lane>` appears: a zombie in the making). Each
batch's outcome is a JSON line in the events file."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lanes", default="append,pk")
    parser.add_argument("--targets", required=True, help='JSON: {"postgres": DSN, "paimon": warehouse}, in write order')
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--config", required=True, help="JSON: per lane, table path, consumer, sink tables")
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--drain", action="store_true", help="read what there is (availableNow), then exit")
    parser.add_argument("--max-splits", default="")
    args = parser.parse_args()
    config = json.loads(args.config)
    control = pathlib.Path(args.control)
    events = open(args.events, "a", buffering=1)

    def log(**event):
        events.write(json.dumps({"pid": os.getpid(), "t": time.time(), **event}) + "\n")

    from harness import local_spark
    from pyspark.sql import functions as F

    from tidemark.sinks import PaimonSink, PostgresSink, SinkRefused

    spark = local_spark("exactly-once", spark_sql_shuffle_partitions="2")
    queries = []
    for lane in args.lanes.split(","):
        lane_config = config[lane]
        sinks = []
        for kind, target in json.loads(args.targets).items():
            name = lane_config["sinks"][kind]
            if kind == "postgres":
                mode = "upsert" if lane == "pk" else "append"
                sinks.append(PostgresSink(target, name, mode=mode, key_columns=["id"] if lane == "pk" else None))
            else:
                sinks.append(PaimonSink({"warehouse": target}, name))

        def batch(frame, batch_id, lane=lane, sinks=sinks):
            marker = control / f"kill-before-{lane}"
            if marker.exists():
                marker.unlink()
                log(event="kill", lane=lane, when="before", batch=batch_id)
                os.kill(os.getpid(), signal.SIGKILL)
            if (control / f"stall-{lane}").exists():
                (control / f"stall-{lane}").unlink()
                (control / f"stalled-{lane}").write_text(str(os.getpid()))
                log(event="stalled", lane=lane, batch=batch_id)
                while not (control / f"release-{lane}").exists():
                    time.sleep(0.1)
            frame = frame.withColumn("written_epoch", F.col("_tidemark_epoch"))
            if len(sinks) > 1:
                frame = frame.cache()  # read once, written to each sink
            for sink in sinks:
                try:
                    sink(frame, batch_id)
                except SinkRefused as refused:
                    log(event="refused", lane=lane, batch=batch_id, reason=refused.reason, sink=repr(sink))
                    raise
                log(event="batch", lane=lane, batch=batch_id, sink=repr(sink), **sink.last_batch)
            if len(sinks) > 1:
                frame.unpersist()
            marker = control / f"kill-after-{lane}"
            if marker.exists():
                marker.unlink()
                log(event="kill", lane=lane, when="after", batch=batch_id)
                os.kill(os.getpid(), signal.SIGKILL)

        reader = (
            spark.readStream.format("tidemark_paimon")
            .option("path", lane_config["path"])
            .option("consumer-id", lane_config["consumer"])
            .option("tidemark.endpoint", args.endpoint)
            .option("tidemark.lease-ttl", "5")
            .option("tidemark.sink-columns", "true")
            .option("scan.mode", "from-snapshot")
            .option("scan.snapshot-id", "1")
        )
        if lane == "pk":
            reader = reader.option("read.changelog", "true")
        if args.max_splits:
            reader = reader.option("max-splits-per-batch", args.max_splits)
        writer = (
            reader.load()
            .writeStream.foreachBatch(batch)
            .option("checkpointLocation", str(pathlib.Path(args.checkpoints) / lane))
        )
        writer = writer.trigger(availableNow=True) if args.drain else writer.trigger(processingTime="500 milliseconds")
        queries.append((lane, writer.start()))
    log(event="started", lanes=args.lanes)
    failed = False
    while queries:
        for lane, query in list(queries):
            if (control / f"stop-{os.getpid()}").exists():
                query.stop()
            if not query.isActive:
                error = query.exception()
                if error is not None:
                    failed = True
                    log(event="failed", lane=lane, message=str(error)[:2000])
                queries.remove((lane, query))
                if error is not None:
                    # One query ended (a zombie refused, a lease lost): the
                    # driver ends, and the checker starts another.
                    for _, other in queries:
                        other.stop()
        time.sleep(0.2)
    log(event="exited", failed=failed)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
