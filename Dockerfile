# One image for the Ray head, Ray workers and gateway replicas.
FROM python:3.11-slim
WORKDIR /app
# KubeRay operators before 1.6 probe Ray pods with wget.
RUN apt-get update && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY telemetry telemetry
COPY protocol protocol
COPY engine engine
COPY store store
COPY team team
COPY actors actors
COPY coordinator coordinator
COPY gateway gateway
COPY personas personas
RUN pip install --no-cache-dir .
ENV YEAFT_DATA_DIR=/data
EXPOSE 8765
CMD ["yeaft", "serve", "--host", "0.0.0.0"]
