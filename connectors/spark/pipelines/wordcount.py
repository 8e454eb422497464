"""The WordCount of paper 004 as two Spark applications chained through a durable intermediate.

    sentences (trace source) -> splitter (split + filter, stateless) -> words/ (parquet, file sink)
    words/ (file source) -> counter (count per word, stateful) -> counts + top words (idempotent sink)

- ``build_splitter``: reads the trace source (``kind=sentences``), splits each sentence into words, drops stop
  words, spends the stage's per-record cost (per sentence) and writes ``(sid, created, pos, word)`` with Spark's
  file sink to ``<workdir>/words`` (exactly-once through the sink's ``_spark_metadata`` log).
- ``build_counter``: reads ``<workdir>/words`` with the file source (only committed files), hash-partitions by
  word into ``shuffle_partitions`` tasks that spend the per-record cost (per word), and in ``foreachBatch``
  adds the batch's counts to the state of the previous batch (``BatchState`` under ``<workdir>/counts``; a
  replayed batch overwrites its own file: idempotent), writes the top ``top_k`` words to ``<workdir>/top.json``
  and reports the end-to-end latency (sink time - creation time of each word's sentence: mean, p95, n).

Both take ``(spark, StageOptions)`` and return the started ``StreamingQuery`` (checkpoints under
``<workdir>/checkpoints/<stage>``).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from connectors.spark.trace_source import keep_word, read_trace, warm_up

from .common import BatchState, StageOptions, burn, latency_stats, write_json_atomic

WORDS_SCHEMA = "sid long, created double, pos int, word string"


def _split_fn(cpu_ms: float, wait_ms: float):
    def split(batches):
        import pandas as pd

        for pdf in batches:
            burn(len(pdf), cpu_ms, wait_ms)
            rows = [
                (sid, created, pos, w)
                for sid, created, sentence in zip(pdf["id"], pdf["created"], pdf["sentence"], strict=True)
                for pos, w in enumerate(sentence.split(" "))
                if keep_word(w)
            ]
            yield pd.DataFrame(rows, columns=["sid", "created", "pos", "word"])

    return split


def _cost_fn(cpu_ms: float, wait_ms: float):
    def cost(batches):
        for pdf in batches:
            burn(len(pdf), cpu_ms, wait_ms)
            yield pdf

    return cost


def build_splitter(spark: Any, opts: StageOptions) -> Any:
    """Start the splitter query (see module docstring)."""
    src = read_trace(spark, opts.source_options("sentences"), opts.source, opts.path("input"))
    if opts.source == "files":  # small files are packed into few partitions: spread them over the tasks
        src = src.repartition(opts.partitions)
    words = src.mapInPandas(_split_fn(opts.cpu_ms, opts.wait_ms), WORDS_SCHEMA)
    return (
        words.writeStream.format("parquet")
        .option("path", opts.path("words"))
        .option("checkpointLocation", opts.path("checkpoints", "splitter"))
        .queryName("splitter")
        .trigger(processingTime=f"{opts.interval_s} seconds")
        .start()
    )


def wait_for_intermediate(path: str | Path, timeout_s: float = 900.0) -> None:
    """Wait until the splitter's file sink has committed its log (``_spark_metadata``) under ``path``, so the
    counter's file source reads only committed files."""
    meta = Path(path) / "_spark_metadata"
    deadline = time.monotonic() + timeout_s
    while not meta.is_dir():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no splitter output at {path} after {timeout_s:.0f} s")
        time.sleep(0.5)


def counter_sink(opts: StageOptions):
    """The counter's ``foreachBatch`` function (idempotent per batch id)."""
    state_store = BatchState(opts.path("counts"))

    def sink(df: Any, batch_id: int) -> None:
        rows = df.select("word", "created").collect()
        state = state_store.before(batch_id)
        counts = Counter(state.get("counts", {}))
        counts.update(r[0] for r in rows)
        words = int(state.get("words", 0)) + len(rows)
        top = counts.most_common(opts.top_k)
        state_store.save(batch_id, {"batch": batch_id, "words": words, "counts": dict(counts)})
        write_json_atomic(Path(opts.path("top.json")), {"batch": batch_id, "words": words, "top": top})
        mean_s, p95_s, n = latency_stats([r[1] for r in rows], time.time())
        opts.latency.report(batch_id, mean_s, p95_s, n)

    return sink


def build_counter(spark: Any, opts: StageOptions) -> Any:
    """Start the counter query (see module docstring); waits for the splitter's output to exist."""
    wait_for_intermediate(opts.path("words"))
    warm_up(spark, opts.shuffle_partitions)  # Python workers up before the first batch
    words = spark.readStream.schema(WORDS_SCHEMA).parquet(opts.path("words"))
    costed = words.repartition(opts.shuffle_partitions, "word").mapInPandas(
        _cost_fn(opts.cpu_ms, opts.wait_ms), WORDS_SCHEMA
    )
    return (
        costed.writeStream.foreachBatch(counter_sink(opts))
        .option("checkpointLocation", opts.path("checkpoints", "counter"))
        .queryName("counter")
        .trigger(processingTime=f"{opts.interval_s} seconds")
        .start()
    )


def final_counts(workdir: str | Path) -> tuple[Counter, int]:
    """(word counts, words) in the counter's newest state under ``workdir``."""
    state = BatchState(Path(workdir) / "counts").latest()
    return Counter(state.get("counts", {})), int(state.get("words", 0))
