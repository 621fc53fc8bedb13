"""The OTLP/HTTP trace receiver: spans of RAG pipelines in, one answer per trace out, ingested
through monitoring's ingest service (docs/api.md, "OpenTelemetry")."""
