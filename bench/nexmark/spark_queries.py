"""The Nexmark queries on Spark Structured Streaming (DataFrame API), over the same event files, writing the same
lines as :mod:`bench.nexmark.queries`, so :mod:`bench.nexmark.oracle` checks both.

Spark cannot express q4: the average of per-auction maxima is an aggregation of an aggregation without time
windows, which Structured Streaming allows in no output mode (append mode needs every aggregation bounded by
a watermark; update and complete modes allow one stateful operator). The others are written as a Spark user
would write them:

* q0–q2: projections and a filter;
* q3: a stream-stream inner join without watermarks (both sides kept in state, as Flink's regular join);
* q5: a sliding-window count per auction, then per window the largest count and the auctions that have it
  (chained time-window aggregations, ``window_time``);
* q7: per tumbling window, ``max(struct(price, ...))``: one highest bid per window (ties: the largest auction,
  bidder, time);
* q8: people and distinct sellers per tumbling window, joined on id and window (a time-window join);
* q11: ``session_window`` counts per bidder (a session ends at its last bid + 10 s; a bid exactly 10 s after
  the last starts a new session in Spark, where Flink's sessions merge windows that touch).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.nexmark.queries import SLIDE_MS, WINDOW_MS

__all__ = ["SPARK_QUERIES", "events", "run"]

SPARK_QUERIES = ("q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11")


def events(spark: SparkSession, directory: str, files_per_trigger: int) -> DataFrame:
    """The event lines as columns: ``kind``, ``f`` (the fields) and ``ts`` (event time)."""
    raw = spark.readStream.option("maxFilesPerTrigger", files_per_trigger).text(directory)
    f = F.split("value", "\t")
    return raw.select(f[0].alias("kind"), f.alias("f"), F.timestamp_millis(f[1].cast("long")).alias("ts"))


def _people(e: DataFrame) -> DataFrame:
    return e.where("kind = 'P'").select(
        F.col("f")[2].cast("long").alias("id"),
        F.col("f")[3].alias("name"),
        F.col("f")[6].alias("city"),
        F.col("f")[7].alias("state"),
        "ts",
    )


def _auctions(e: DataFrame) -> DataFrame:
    return e.where("kind = 'A'").select(
        F.col("f")[2].cast("long").alias("id"),
        F.col("f")[7].cast("long").alias("seller"),
        F.col("f")[8].cast("int").alias("category"),
        "ts",
    )


def _bids(e: DataFrame) -> DataFrame:
    return e.where("kind = 'B'").select(
        F.col("f")[2].cast("long").alias("auction"),
        F.col("f")[3].cast("long").alias("bidder"),
        F.col("f")[4].cast("long").alias("price"),
        F.col("f")[5].alias("channel"),
        F.col("f")[1].cast("long").alias("millis"),
        "ts",
    )


def _line(*cols: Any) -> Any:
    return F.concat_ws("\t", *[F.col(c) if isinstance(c, str) else c for c in cols]).alias("value")


def _ms(col: str) -> Any:
    return F.unix_millis(F.col(col))


def q0(e: DataFrame, delay: str) -> DataFrame:
    return _bids(e).select(_line("auction", "bidder", "price", "channel", "millis"))


def q1(e: DataFrame, delay: str) -> DataFrame:
    b = _bids(e)
    return b.select(_line("auction", "bidder", F.format_string("%.3f", F.col("price") * 0.908), "millis"))


def q2(e: DataFrame, delay: str) -> DataFrame:
    return _bids(e).where(F.col("auction") % 123 == 0).select(_line("auction", "price"))


def q3(e: DataFrame, delay: str) -> DataFrame:
    p = _people(e).where(F.col("state").isin("OR", "ID", "CA")).drop("ts")
    a = _auctions(e).where("category = 10").withColumnRenamed("id", "auction").drop("ts")
    return a.join(p, a.seller == p.id).select(_line("name", "city", "state", "auction"))


def q5(e: DataFrame, delay: str) -> DataFrame:
    b = _bids(e).withWatermark("ts", delay)
    counts = b.groupBy(F.window("ts", f"{WINDOW_MS} milliseconds", f"{SLIDE_MS} milliseconds"), "auction").count()
    per_window = counts.select(F.window_time("window").alias("t"), "auction", "count").groupBy(
        F.window("t", f"{SLIDE_MS} milliseconds")
    )
    top = per_window.agg(F.max("count").alias("top"), F.collect_list(F.struct("auction", "count")).alias("all"))
    hot = top.select("window", "top", F.explode(F.filter("all", lambda c: c["count"] == F.col("top"))).alias("c"))
    return hot.select(_line(_ms("window.end"), "c.auction", "c.count"))


def q7(e: DataFrame, delay: str) -> DataFrame:
    b = _bids(e).withWatermark("ts", delay)
    best = b.groupBy(F.window("ts", f"{WINDOW_MS} milliseconds")).agg(
        F.max(F.struct("price", "auction", "bidder", "millis")).alias("b")
    )
    return best.select(_line(_ms("window.end"), "b.auction", "b.bidder", "b.price", "b.millis"))


def q8(e: DataFrame, delay: str) -> DataFrame:
    size = f"{WINDOW_MS} milliseconds"
    p = _people(e).withWatermark("ts", delay).select("id", "name", F.window("ts", size).alias("pw"))
    sellers = _auctions(e).withWatermark("ts", delay).groupBy(F.window("ts", size).alias("aw"), "seller").count()
    joined = p.join(sellers, (p.id == sellers.seller) & (p.pw == sellers.aw))
    return joined.select(_line("id", "name", _ms("pw.start")))


def q11(e: DataFrame, delay: str) -> DataFrame:
    b = _bids(e).withWatermark("ts", delay)
    sessions = b.groupBy(F.session_window("ts", f"{WINDOW_MS} milliseconds").alias("s"), "bidder").count()
    return sessions.select(_line("bidder", "count", _ms("s.start"), _ms("s.end")))


def run(spark: SparkSession, query: str, directory: str, output: str, checkpoint: str, disorder_ms: int) -> None:
    """Run ``query`` over the event files to the end (``availableNow``), writing its lines as text files into
    ``output``, checkpointing into ``checkpoint``."""
    build = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q5": q5, "q7": q7, "q8": q8, "q11": q11}[query]
    result = build(events(spark, directory, 2), f"{disorder_ms} milliseconds")
    writer = (
        result.writeStream.format("text")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
    )
    writer.start().awaitTermination()
