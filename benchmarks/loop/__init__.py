"""``manage.py bench_loop``: the product's control loop (manifest -> tick -> OM -> AM -> connector) measured scenario by scenario (see ``benchmarks.loop.runner``)."""
