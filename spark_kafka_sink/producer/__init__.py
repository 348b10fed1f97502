"""The producer: partitioner, buffer pool, accumulator, sender and the KafkaProducer facade."""
