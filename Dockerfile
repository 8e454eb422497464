# The control plane's web image (gunicorn), also the Celery worker's and beat's. Build: docker compose build web
# No Spark in it: the project without its [spark] extra (pyspark, pyarrow, pandas) and no JVM; the Spark services
# of docker-compose.yml have their own image.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 AUTOSCALER_VAR_DIR=/app/var
WORKDIR /app
COPY pyproject.toml README.md ./
COPY autoscaler ./autoscaler
COPY policies ./policies
COPY connectors ./connectors
COPY dashboard ./dashboard
COPY manage.py ./
COPY manifests ./manifests
RUN pip install --no-cache-dir . \
    && DJANGO_DEBUG=1 SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && useradd --create-home app && mkdir -p /app/var && chown -R app /app/var
USER app
EXPOSE 8000
CMD ["gunicorn", "autoscaler.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2"]
