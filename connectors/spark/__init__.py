"""The Spark Structured Streaming connector.

- ``agent``: the job-side library (one line in the job) that ships query progress to the autoscaler and applies
  the desired executor count / profile inside the driver;
- ``monitor`` / ``realizer`` / ``connector``: the control-plane side (observations from the ingested progress,
  desired state written for the agent, verified on the driver's REST API);
- ``store``: the storage those read and write, a protocol (the control plane implements it on its database) and
  an in-memory implementation;
- ``cluster``: a standalone master and workers on 127.0.0.1 from the pip package;
- ``provider``: the ``spark-standalone`` node provider (a node = a Worker process).

See the README section "Spark: how the model maps onto Spark".
"""
