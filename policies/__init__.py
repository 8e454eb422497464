"""Auto-scaling policies and the trace-driven simulator (pure Python + numpy, no Django)."""
