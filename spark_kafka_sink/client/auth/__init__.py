"""Authentication: SASL credentials, mechanisms and the exchange that runs them on a connection.

From the producer's properties to an authenticated connection, in order:

- ``jaas``: the credentials (:class:`~.jaas.SaslCredentials`) from ``sasl.mechanism``,
  ``sasl.jaas.config`` or ``sasl.username``/``sasl.password``, and for OAUTHBEARER its token source;
- ``sasl``: the mechanisms, sans I/O: PLAIN and SCRAM-SHA-256/512 (a user and a password),
  OAUTHBEARER (a token);
- ``authenticator``: the SASL exchange on one connection (SaslHandshake, then SaslAuthenticate
  rounds), driven by the network client and by the blocking connection alike.

OAUTHBEARER's tokens:

- ``oauth_token``: the token and its SASL extensions, checked as Kafka checks them;
- ``oauth``: where tokens come from (a function: ``oauth_cb`` or
  ``sasl.oauthbearer.token.provider``; an unsecured JWT for tests; OIDC) and the cache that
  refreshes them;
- ``oidc``: OIDC client-credentials tokens from a token endpoint (``sasl.oauthbearer.method=oidc``);
- ``msk_iam``: Amazon MSK IAM, a ``sasl.oauthbearer.token.provider``
  (``spark_kafka_sink.client.auth.msk_iam:msk_iam_token``).

Nothing here imports the producer or Spark; the sockets stay in the rest of ``client``.
"""
