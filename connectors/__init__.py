"""Engine connectors: the Monitor (metrics of one control period) and the Realizer (apply a scaling plan).

The MAPE loop reads like the Flink Kubernetes operator's autoscaler: ``connectors`` monitor and realize,
``policies`` analyze and plan, ``autoscaler`` orchestrates and persists.
"""
