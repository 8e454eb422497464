"""``bench_dashboard``: server time of the application dashboard on a large decision log (``command``)."""
