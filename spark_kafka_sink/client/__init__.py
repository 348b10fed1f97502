"""The only package that does I/O: sockets, TLS, the selector-driven network client, and the
small BlockingConnection (``client.blocking``) used by probes, admin calls and tests."""
