"""FakeRegistry: a small Confluent Schema Registry on 127.0.0.1, in a thread, for the client's
unit tests.

It answers the calls the client makes, with the Confluent API's statuses and error bodies
(``{"error_code": 40401, "message": "Subject 'x' not found."}``):

- ``POST /subjects/{s}/versions``: ``{"id"}``; a schema that is not JSON is 422/42201; a new
  schema under a subject made strict with :meth:`lock_subject` is 409. Identical schema text
  gets the same id under every subject, as in Confluent's registry; ``normalize=true`` stores the
  schema's compact JSON form;
- ``POST /subjects/{s}``: the version (40401 no subject, 40403 schema not under it);
- ``GET /subjects/{s}/versions/{latest|n}`` (40401, 40402), ``GET /schemas/ids/{id}`` (40403),
  ``GET /subjects``.

Path segments are unescaped one by one, so a subject with ``/`` arrives whole only when the
client escaped it. ``basic=(user, password)`` or ``bearer=token`` makes every request need those
credentials (401 otherwise); ``tls`` (an ``embedded.TlsMaterial``) serves HTTPS with its server
certificate, and ``client_certificates=True`` asks for a client certificate its CA signed.
``base_path`` serves the API under a prefix (Apicurio's ``/apis/ccompat/v7``). :meth:`fail_next`
answers the next requests with an error status. ``seen`` lists every request (method, path,
query, headers, body).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str                     # as sent, escaped, without the base path
    segments: tuple[str, ...]     # unescaped
    query: dict[str, str]
    headers: dict[str, str] = field(repr=False)
    body: Any = None


class FakeRegistry:
    def __init__(self, *, basic: tuple[str, str] | None = None, bearer: str | None = None,
                 tls: Any = None, client_certificates: bool = False, base_path: str = ""):
        self._basic = basic
        self._bearer = bearer
        self._tls = tls
        self._client_certificates = client_certificates
        self.base_path = base_path.rstrip("/")
        self._lock = threading.Lock()
        self.schemas: dict[int, tuple[str, str]] = {}     # id -> (text, type)
        self.subjects: dict[str, list[int]] = {}          # subject -> ids, version 1 first
        self._locked: set[str] = set()
        self._failures: list[tuple[int, int]] = []        # (status, error code) to answer next
        self.seen: list[Seen] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeRegistry:
        server = ThreadingHTTPServer((HOST, 0), _handler(self))
        server.daemon_threads = True
        if self._tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self._tls.server_cert_path, self._tls.server_key_path)
            if self._client_certificates:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(cafile=self._tls.ca_path)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="fake-registry",
                                        daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeRegistry:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{HOST}:{self._server.server_address[1]}{self.base_path}"

    # --- what tests steer and read ----------------------------------------------------------------

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register directly (a schema someone else registered)."""
        with self._lock:
            return self._register(subject, schema, schema_type)

    def lock_subject(self, subject: str) -> None:
        """From now on a schema new to ``subject`` is incompatible (409)."""
        with self._lock:
            self._locked.add(subject)

    def fail_next(self, status: int, error_code: int | None = None, count: int = 1) -> None:
        with self._lock:
            self._failures.extend([(status, error_code or status * 100 + 1)] * count)

    def requests_to(self, method: str, *segments: str) -> int:
        with self._lock:
            return sum(1 for seen in self.seen if seen.method == method and seen.segments == segments)

    # --- the API --------------------------------------------------------------------------------

    def answer(self, method: str, raw_path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        split = urllib.parse.urlsplit(raw_path)
        path = split.path
        if self.base_path:
            if not path.startswith(self.base_path + "/"):
                return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}
            path = path[len(self.base_path):]
        segments = tuple(urllib.parse.unquote(part) for part in path.strip("/").split("/"))
        query = dict(urllib.parse.parse_qsl(split.query))
        with self._lock:
            self.seen.append(Seen(method, path, segments, query, headers, body))
            if not self._authorized(headers):
                return 401, {"error_code": 401, "message": "Unauthorized"}
            if self._failures:
                status, code = self._failures.pop(0)
                return status, {"error_code": code, "message": f"injected failure {status}"}
            return self._route(method, segments, query, body)

    def _authorized(self, headers: dict[str, str]) -> bool:
        given = headers.get("authorization")
        if self._basic is not None:
            expected = base64.b64encode(":".join(self._basic).encode()).decode()
            return given == f"Basic {expected}"
        if self._bearer is not None:
            return given == f"Bearer {self._bearer}"
        return True

    def _route(self, method: str, segments: tuple[str, ...], query: dict[str, str],
               body: Any) -> tuple[int, Any]:
        match method, segments:
            case "GET", ("subjects",):
                return 200, sorted(self.subjects)
            case "POST", ("subjects", subject, "versions"):
                return self._post_version(subject, query, body)
            case "POST", ("subjects", subject):
                return self._lookup(subject, query, body)
            case "GET", ("subjects", subject, "versions", version):
                return self._version(subject, version)
            case "GET", ("schemas", "ids", schema_id) if schema_id.isdigit():
                return self._by_id(int(schema_id))
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}

    def _post_version(self, subject: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        text, kind, problem = self._schema_of(body, query)
        if problem is not None:
            return problem
        ids = self.subjects.get(subject, [])
        known = [i for i in ids if self.schemas[i] == (text, kind)]
        if not known and subject in self._locked and ids:
            return 409, {"error_code": 409, "message": (
                f"Schema being registered is incompatible with an earlier schema for subject "
                f"\"{subject}\", details: [READER_FIELD_MISSING_DEFAULT_VALUE]")}
        return 200, {"id": self._register(subject, text, kind)}

    def _lookup(self, subject: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        text, kind, problem = self._schema_of(body, query)
        if problem is not None:
            return problem
        if subject not in self.subjects:
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        for version, schema_id in enumerate(self.subjects[subject], start=1):
            if self.schemas[schema_id] == (text, kind):
                return 200, {"subject": subject, "id": schema_id, "version": version, "schema": text}
        return 404, {"error_code": 40403, "message": "Schema not found"}

    def _version(self, subject: str, version: str) -> tuple[int, Any]:
        if subject not in self.subjects:
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        ids = self.subjects[subject]
        number = len(ids) if version == "latest" else int(version) if version.isdigit() else 0
        if not 1 <= number <= len(ids):
            return 404, {"error_code": 40402, "message": f"Version {version} not found."}
        text, kind = self.schemas[ids[number - 1]]
        answer = {"subject": subject, "id": ids[number - 1], "version": number, "schema": text}
        if kind != "AVRO":
            answer["schemaType"] = kind
        return 200, answer

    def _by_id(self, schema_id: int) -> tuple[int, Any]:
        if schema_id not in self.schemas:
            return 404, {"error_code": 40403, "message": f"Schema {schema_id} not found"}
        text, kind = self.schemas[schema_id]
        return 200, {"schema": text} if kind == "AVRO" else {"schema": text, "schemaType": kind}

    def _schema_of(self, body: Any, query: dict[str, str]) -> tuple[str, str, tuple[int, Any] | None]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            return "", "", (422, {"error_code": 422, "message": "Unrecognized field or missing schema"})
        text, kind = body["schema"], body.get("schemaType") or "AVRO"
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            return "", "", (422, {"error_code": 42201, "message": f"Invalid schema {text[:40]}, details: {exc}"})
        if query.get("normalize", "false").lower() == "true":
            text = json.dumps(parsed, separators=(",", ":"))
        return text, kind, None

    def _register(self, subject: str, text: str, kind: str) -> int:
        same = [i for i, known in self.schemas.items() if known == (text, kind)]
        schema_id = same[0] if same else max(self.schemas, default=0) + 1
        self.schemas[schema_id] = (text, kind)
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id


def _handler(registry: FakeRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            self._serve(body)

        def _serve(self, body: Any) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, answer = registry.answer(self.command, self.path, headers, body)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

    return Handler
