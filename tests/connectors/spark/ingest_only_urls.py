"""URLconf of the live Spark tests: only the ingest endpoints the job's agent calls (the test does not depend
on the rest of the web app)."""

from django.urls import include, path

urlpatterns = [path("api/v1/ingest/", include("autoscaler.ingest.urls"))]
