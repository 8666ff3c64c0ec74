"""Kafka clients (confluent-kafka): admin in batch, the MM2 workload, topic readers."""
