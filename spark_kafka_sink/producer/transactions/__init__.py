"""The producer's transaction wing: producer id and epoch, per-partition sequences (idempotence)
and the transactional lifecycle, as Java's ``TransactionManager`` and its helpers. The sender and
the accumulator use it; it imports nothing else of the producer (type-only imports aside).

Its modules, from the bottom up:

- :mod:`.states`: the state table (``TransactionState``, ``TRANSITIONS``: every state and event
  in one table) and ``TransactionalResult``, what a caller waits on;
- :mod:`.partition_map`: the per-partition bookkeeping (``TxnPartitionMap``: sequences, batches
  in flight, the last acknowledged offset) and ``ProducerIdAndEpoch``;
- :mod:`.manager`: ``TransactionManager``, the producer id and epoch, the state table's walk and
  the transactional lifecycle, shared by the caller's threads and the sender thread behind one
  lock; it calls nothing outside itself while holding it;
- :mod:`.idempotence`: ``Idempotence``, the sender thread's sequence bookkeeping and decisions
  (drain gate, sequences, retry, epoch bumps), with no lock; it calls the manager, never the
  other way round;
- :mod:`.requests`: one handler per coordinator request (FindCoordinator, InitProducerId,
  AddPartitionsToTxn, EndTxn) and ``TxnRequestSender``, which sends what the manager asks for;
- :mod:`.resumable`: the resumable commit path used by the exactly-once driver
  (``ResumableTransaction``, ``commit_resumable``, ``abort_resumable``,
  ``fence_transactional_ids``): EndTxn or InitProducerId without a producer.
"""
