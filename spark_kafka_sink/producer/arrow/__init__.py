"""The ``send_arrow`` pipeline: whole Arrow batches through the producer, over whole columns.

:meth:`KafkaProducer.send_arrow <spark_kafka_sink.producer.producer.KafkaProducer.send_arrow>`
runs the steps in this order, each in its own module:

1. read the columns: :mod:`.input` resolves and type-checks the value, key, headers, timestamp
   and partition columns, turns timestamps into ms, and holds what a send hands back
   (``ArrowSendResult``, ``ArrowSendError``);
2. check: :mod:`.check` finds the rows that cannot become records, for
   ``errors_tolerance="all"`` only;
3. plan: :mod:`.plan` chooses every row's partition and groups the rows by partition (from the
   row sizes :func:`.send.row_sizes` measures, for the sticky runs);
4. encode and append: :mod:`.send` encodes the rows into record batches in bounded chunks, each
   record checked against the size limits first, and orders the batches into turns for the
   accumulator's ``queue_encoded_batch``.

Nothing is imported here: pyarrow loads with the first Arrow send only.
"""
