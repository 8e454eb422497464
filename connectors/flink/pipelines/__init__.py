"""PyFlink pipelines (run in ``.venv-flink``; submitted with ``FlinkCluster.submit_python``).

``trace_source`` is plain Python shared by the jobs and the tests (it must not import the project or pyflink at
module level); ``wordcount`` and ``taxi`` are the jobs.
"""

from pathlib import Path

PIPELINES_DIR = Path(__file__).resolve().parent
WORDCOUNT = PIPELINES_DIR / "wordcount.py"
TAXI = PIPELINES_DIR / "taxi.py"
TRACE_SOURCE = PIPELINES_DIR / "trace_source.py"
