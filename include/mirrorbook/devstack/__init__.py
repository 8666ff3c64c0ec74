"""The embedded local stack: real Kafka brokers and a real Connect worker with MM2, from Maven jars."""
