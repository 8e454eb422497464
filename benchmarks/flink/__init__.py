"""``bench_flink``: OM policies in closed loop on a live local Flink cluster (``command``; ``runner``: the harness strategies, ``product``: the product path)."""
