"""Apache Flink connector: cluster runtime, REST client, monitor, realizer, node provider and PyFlink pipelines.

The autoscaler side talks to Flink only over the JobManager's REST API (``rest``) and starts processes with the
distribution's shell scripts (``cluster``); it never imports pyflink. PyFlink jobs (``pipelines``) run in the
separate ``.venv-flink`` created by ``scripts/flink_env.sh``.
"""
