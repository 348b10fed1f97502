"""``make demo`` (``python -m demo``): the streaming job end to end on a real Apache Kafka.

Click events are generated as JSON-lines files, ``jobs/stream_to_kafka.py`` streams them to a topic
with ``spark-submit`` (``--trigger availableNow`` in several micro-batches), and an independent
client (confluent-kafka) reads the topic back so the counts can be compared. See demo/README.md.
"""
