"""The word count of the live Spark tests: JSON-lines files of words (stamped with their creation time) read by a
file source, counted into a memory sink in complete mode, the sink's end-to-end latency observed as ``e2e``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.connectors.spark.memory_wc import SMALL

#: the driver's Spark conf of the live tests (its UI on a free port of 127.0.0.1)
DRIVER_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.port": "0",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.showConsoleProgress": "false",
}


def start_agent(build_query, master_url: str, url: str, token: str, apply_timeout_s: float):
    """The word count's driver with its agent (operator ``counter`` of application ``wc``), one small executor,
    not blocking; the agent ships to ``url`` with ``token`` every half second and polls as often."""
    from connectors.spark.agent import run

    return run(
        build_query,
        DRIVER_CONF,
        master=master_url,
        application="wc",
        operator="counter",
        url=url,
        token=token,
        profile=SMALL,
        executors=1,
        block=False,
        apply_timeout_s=apply_timeout_s,
        poll_interval_s=0.5,
        ship_interval_s=0.5,
    )


def write_words(directory: Path, name: str, counts: dict[str, int]) -> int:
    """One JSON-lines file of words stamped with their creation time (s); returns the number of records."""
    now = time.time()
    lines = [json.dumps({"word": w, "created": now}) for w, n in counts.items() for _ in range(n)]
    tmp = directory.parent / f".{name}"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(directory / name)  # atomic: the file source never sees a partial file
    return len(lines)


def build_query_factory(in_dir: Path, checkpoint: Path):
    """``build_query(spark)`` of the agent: the word count of the files in ``in_dir`` (at most one file per
    micro-batch, a trigger every second) into the memory table ``counts``, checkpointed in ``checkpoint``."""

    def build(spark):
        from pyspark.sql import functions as F

        words = (
            spark.readStream.schema("word string, created double")
            .option("maxFilesPerTrigger", 1)
            .json(str(in_dir))
        )
        lat = F.unix_micros(F.current_timestamp()) / 1e6 - F.col("created")
        observed = words.withColumn("lat", lat).observe(
            "e2e",
            F.avg("lat").alias("mean_s"),
            F.percentile_approx("lat", 0.95).alias("p95_s"),
            F.count(F.lit(1)).alias("n"),
        )
        counts = observed.groupBy("word").count()
        return (
            counts.writeStream.outputMode("complete")
            .format("memory")
            .queryName("counts")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="1 second")
            .start()
        )

    return build


def counts_of(agent) -> dict[str, int]:
    """The word counts the agent's query has written so far."""
    return {r["word"]: r["count"] for r in agent.spark.sql("select * from counts").collect()}
