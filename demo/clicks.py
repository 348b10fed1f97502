"""A realistic, reproducible click-stream: JSON-lines files of page-view events.

Events come in user sessions (a few pages each, seconds apart, the referrer of a page being the
page before), users follow a long-tailed activity curve (a few users make many events), and the
files are consecutive slices of time, as hourly log files would be. The same ``seed`` gives the
same files, byte for byte.
"""

from __future__ import annotations

import datetime
import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("event_id", "user_id", "session_id", "ts", "page", "referrer", "device", "country",
          "duration_ms")

START = datetime.datetime(2024, 5, 6, 8, 0, tzinfo=datetime.timezone.utc)
USERS = 20_000
PAGES = ("/", "/search", "/category/shoes", "/category/jackets", "/category/bags", "/cart",
         "/checkout", "/account", "/help", "/blog/spring-sale")
EXTERNAL_REFERRERS = ("direct", "https://www.google.com/", "https://www.bing.com/",
                      "https://t.co/", "https://news.ycombinator.com/", "https://mail.example.com/")
DEVICES = ("mobile", "desktop", "tablet")
DEVICE_WEIGHTS = (0.58, 0.36, 0.06)
COUNTRIES = ("US", "DE", "GB", "FR", "IN", "BR", "JP", "CA", "NL", "ES")
COUNTRY_WEIGHTS = (0.30, 0.12, 0.10, 0.08, 0.10, 0.07, 0.06, 0.06, 0.05, 0.06)


@dataclass(frozen=True)
class ClickData:
    """What :func:`write_clicks` wrote: the directory, its files, events and bytes."""

    directory: Path
    files: tuple[Path, ...]
    events: int
    bytes: int


def write_clicks(directory: str | Path, events: int, files: int, *, seed: int = 7) -> ClickData:
    """Write ``events`` click events as JSON lines into ``files`` files (``clicks-0000.json``,
    ...) in ``directory``, in time order, split as evenly as possible."""
    if events < 1 or files < 1:
        raise ValueError(f"need at least one event and one file, got events={events}, files={files}")
    if files > events:
        raise ValueError(f"more files ({files}) than events ({events}): some would be empty")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stream = _events(random.Random(seed))
    written: list[Path] = []
    total_bytes = 0
    for index in range(files):
        count = events // files + (1 if index < events % files else 0)
        path = directory / f"clicks-{index:04d}.json"
        lines = [json.dumps(next(stream), separators=(",", ":")) for _ in range(count)]
        text = "\n".join(lines) + "\n"
        path.write_text(text, encoding="utf-8")
        total_bytes += len(text.encode())
        written.append(path)
    return ClickData(directory, tuple(written), events, total_bytes)


def _events(rng: random.Random):
    """An endless time-ordered stream of events, session by session."""
    clock = START
    while True:
        user = int(USERS * rng.random() ** 2.5)  # low ids are the busy users
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        device = rng.choices(DEVICES, DEVICE_WEIGHTS)[0]
        country = rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0]
        referrer = rng.choice(EXTERNAL_REFERRERS)
        page = rng.choice(PAGES[:5])
        moment = clock
        for _ in range(1 + min(int(rng.expovariate(1 / 4)), 30)):
            duration_ms = int(rng.lognormvariate(8.5, 1.0))
            yield {
                "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "user_id": f"u{user:05d}",
                "session_id": session_id,
                "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "page": page,
                "referrer": referrer,
                "device": device,
                "country": country,
                "duration_ms": duration_ms,
            }
            referrer = page
            page = _next_page(rng, page)
            moment += datetime.timedelta(milliseconds=duration_ms + rng.randrange(200, 3000))
        clock += datetime.timedelta(milliseconds=rng.randrange(5, 400))


def _next_page(rng: random.Random, page: str) -> str:
    """Where a visitor goes next: mostly browsing, sometimes on towards the cart and checkout."""
    if page == "/cart" and rng.random() < 0.4:
        return "/checkout"
    if page.startswith("/category") and rng.random() < 0.15:
        return "/cart"
    return rng.choice(PAGES)
