"""The HTTP management API (RabbitMQ's paths and formats) and the Prometheus endpoint."""
