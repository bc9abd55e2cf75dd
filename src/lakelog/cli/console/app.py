"""The console's Starlette app: one GET route per page, server-rendered from Jinja templates,
plus `/api/series` for the live charts. Nothing here changes the cluster: every route is a
GET and every cluster call is a describe, list or fetch.

Kept whole at about 600 lines: each route is a short handler that gathers a page's figures
and renders its template, and reading them in one file shows the whole console; what they
share (reads, records, decoding, the registry and table figures) lives in its own modules."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from lakelog.admin.client import AdminClient
from lakelog.admin.wire import KafkaError
from lakelog.cli import cost_model as cost
from lakelog.cli.console import reads, records
from lakelog.cli.console.auth import BasicAuth, SecurityHeaders
from lakelog.cli.console.connection import ClusterAccess
from lakelog.cli.console.decoding import Decoded, WireDecoder
from lakelog.cli.console.history import History
from lakelog.cli.console.inputs import BadInput, integer, text, timestamp_ms
from lakelog.cli.console.pipeline_runs import recent_runs
from lakelog.cli.console.registry_client import (
    RegistryAnswered,
    RegistryReader,
    RegistryUnavailable,
    default_registry_url,
)
from lakelog.cli.console.sampler import Sampler
from lakelog.cli.console.tables import TableView, table_mode, table_view

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
MAX_SERIES_PER_REQUEST = 64
NAV = (
    ("cluster", "Cluster"),
    ("topics", "Topics"),
    ("groups", "Consumer groups"),
    ("storage", "Storage & cost"),
    ("transactions", "Transactions"),
    ("mirrors", "Mirrors"),
    ("schemas", "Schemas"),
    ("pipeline", "Pipeline"),
)
SUBJECTS_DESCRIBED = 200
"""The schemas page shows the latest version of at most this many subjects (the rest by
name), so one page load asks the registry a bounded number of questions."""


@dataclass
class ConsoleConfig:
    access: ClusterAccess
    interval_s: float = 5.0
    history_s: float = 3600.0
    max_series: int = 1000
    metrics: list[str] = field(default_factory=list)
    user: str | None = None
    password: str | None = None
    prices: cost.Prices = field(default_factory=cost.Prices)
    retention_days: float = cost.DEFAULT_RETENTION_DAYS
    registry_url: str | None = None
    """The schema registry (None: the first bootstrap broker's default, port + 1001;
    "": none, so no schemas page content and no decoding)."""


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


def _number(value: float | None, whole: bool = False) -> str:
    """Counts (`whole`, or integral values) without decimals; other figures with two below
    100 and none from there (a rate of 10,297,072.19 reads as 10,297,072)."""
    if value is None:
        return "-"
    if whole or float(value).is_integer() or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC (2026-11-29T08:11:25.123Z)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def setting_row(key: str, value: str) -> tuple[str, str, str]:
    """(key, shown value, tooltip) of a mirror setting: times (`*.at`, epoch milliseconds)
    shown as ISO-8601 UTC with the raw value as the tooltip; the rest as they are."""
    if key.endswith(".at") and value.strip().isdigit():
        with contextlib.suppress(ValueError, OverflowError, OSError):
            return key, _iso_time(int(value)), value
    return key, value, ""


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:,.4f}"


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(bytes=_bytes, number=_number, time=_time, usd=_usd)
    return env


class Console:
    """The app's state: how to reach the cluster, the history and the sampler."""

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        points = max(2, int(config.history_s / config.interval_s) + 1)
        self.history = History(points, config.max_series)
        self.sampler = Sampler(config.access, self.history, config.interval_s, config.metrics)
        self.env = templates()
        url = config.registry_url
        if url is None:
            url = default_registry_url(config.access.bootstrap)
        self.registry = RegistryReader(url, config.access.security) if url else None
        self.decoder = WireDecoder(self.registry) if self.registry else None

    # ------------------------------------------------------------------ rendering

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        html = self.env.get_template(template).render(
            nav=NAV,
            section=context.pop("section", ""),
            interval_ms=int(self.config.interval_s * 1000),
            bootstrap=self.config.access.bootstrap,
            principal=self.config.access.security.username or "ANONYMOUS",
            sampler_errors=list(self.sampler.errors)[-5:],
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, status: int, message: str) -> Response:
        return self.page(request, "error.html", status, title=f"{status}", message=message)

    async def with_admin(
        self, request: Request, action: Callable[[AdminClient], Awaitable[Response]]
    ) -> Response:
        """Run `action` on a fresh admin connection; cluster problems become error pages."""
        try:
            client = await self.config.access.admin()
        except (KafkaError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            return self.error(request, 502, f"cannot reach {self.config.access.bootstrap}: {exc}")
        try:
            return await action(client)
        except reads.NotFound as exc:
            return self.error(request, 404, str(exc))
        except BadInput as exc:
            return self.error(request, 400, str(exc))
        except records.BrowseError as exc:
            return self.error(request, exc.status, str(exc))
        except KafkaError as exc:
            status = 403 if "authorization" in exc.error.name else 502
            return self.error(request, status, f"the cluster answered {exc}")
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            return self.error(request, 502, f"lost the cluster: {exc!r}")
        finally:
            await client.close()

    # ------------------------------------------------------------------ pages

    async def cluster(self, request: Request) -> Response:
        async def action(client: AdminClient) -> Response:
            brokers = await reads.cluster(client)
            zones = sorted(self.sampler.zone_bytes.items())
            return self.page(
                request,
                "cluster.html",
                section="cluster",
                title="Cluster",
                brokers=brokers,
                metrics_urls=self.sampler.urls,
                silent=self.sampler.silent_brokers,
                up={url: self.history.last(f"broker.up/{url}") for url in self.sampler.urls},
                zones=zones,
            )

        return await self.with_admin(request, action)

    async def topics(self, request: Request) -> Response:
        async def action(client: AdminClient) -> Response:
            rows = await reads.topics(client)
            rates = {
                t.name: (
                    self.history.last(f"topic.records_per_s/{t.name}"),
                    self.history.last(f"topic.bytes_per_s/{t.name}"),
                )
                for t in rows
            }
            return self.page(
                request,
                "topics.html",
                section="topics",
                title="Topics",
                topics=rows,
                rates=rates,
                tables=self.sampler.tables,
            )

        return await self.with_admin(request, action)

    async def topic(self, request: Request) -> Response:
        name = request.path_params["name"]

        async def action(client: AdminClient) -> Response:
            detail = await reads.topic(client, name)
            subjects, problem = await self.topic_subjects(name)
            return self.page(
                request,
                "topic.html",
                section="topics",
                title=f"Topic {name}",
                topic=detail,
                table=self.table_of(detail),
                browse=None,
                decoded={},
                subjects=subjects,
                registry_problem=problem,
                form={"partition": "0", "offset": "", "time": "", "limit": "20"},
            )

        return await self.with_admin(request, action)

    async def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        query = request.query_params

        async def action(client: AdminClient) -> Response:
            partition = integer(query, "partition", 0, high=1_000_000)
            offset = integer(query, "offset", None)
            at = timestamp_ms(query, "time")
            limit = integer(query, "limit", 20, low=1, high=records.MAX_RECORDS)
            if (offset is None) == (at is None):
                raise BadInput("give an offset or a time, not both or neither")
            detail = await reads.topic(client, name)
            if not any(p.partition == partition for p in detail.partitions):
                raise reads.NotFound(f"topic {name!r} has no partition {partition}")
            assert limit is not None and partition is not None
            page = await records.read(
                self.config.access.librdkafka_config(),
                name,
                partition,
                offset=offset,
                timestamp_ms=at,
                limit=limit,
            )
            subjects, problem = await self.topic_subjects(name)
            decoded = await self.decode(name, page, subjects)
            return self.page(
                request,
                "topic.html",
                section="topics",
                title=f"Topic {name}",
                topic=detail,
                table=self.table_of(detail),
                browse=page,
                decoded=decoded,
                subjects=subjects,
                registry_problem=problem,
                form={
                    "partition": str(partition),
                    "offset": text(query, "offset"),
                    "time": text(query, "time"),
                    "limit": str(limit),
                },
            )

        return await self.with_admin(request, action)

    def table_of(self, detail: reads.TopicDetail) -> TableView | None:
        """The topic's Table section, None when it is not a table topic."""
        mode = table_mode(detail.configs)
        if mode is None:
            return None
        name = detail.description.name
        return table_view(name, mode, self.sampler.tables.get(name))

    async def topic_subjects(self, topic: str) -> tuple[dict[str, str], str]:
        """The registry's subjects for `topic`'s keys and values (TopicNameStrategy:
        `<topic>-key`, `<topic>-value`) that exist, and why the registry could not say."""
        if self.registry is None:
            return {}, ""
        try:
            known = set(await self.registry.subjects())
        except (RegistryUnavailable, RegistryAnswered) as exc:
            return {}, f"the schema registry did not list subjects: {exc}"
        wanted = {part: f"{topic}-{part}" for part in ("key", "value")}
        return {part: s for part, s in wanted.items() if s in known}, ""

    async def decode(
        self, topic: str, page: records.Page, subjects: dict[str, str]
    ) -> dict[str, Decoded]:
        """Each record's key and value decoded with the registry, by "offset/key" and
        "offset/value" (absent: shown as it is)."""
        found: dict[str, Decoded] = {}
        if self.decoder is None:
            return found
        usages: dict[int, object] = {}
        for r in page.records:
            for part, raw in (("key", r.raw_key), ("value", r.raw_value)):
                subject = f"{topic}-{part}"
                done = await self.decoder.decode(raw, subject, part in subjects, usages)
                if done is not None:
                    found[f"{r.offset}/{part}"] = done
        return found

    async def schemas(self, request: Request) -> Response:
        if self.registry is None:
            return self.error(request, 404, "the console has no schema registry")
        try:
            names = await self.registry.subjects()
            latest = await asyncio.gather(
                *(self.registry.version(s, "latest") for s in names[:SUBJECTS_DESCRIBED]),
                return_exceptions=True,
            )
        except (RegistryUnavailable, RegistryAnswered) as exc:
            return self.error(request, 502, f"the schema registry at {self.registry.url}: {exc}")
        rows = [
            (s, latest[i] if i < len(latest) and not isinstance(latest[i], BaseException) else None)
            for i, s in enumerate(names)
        ]
        return self.page(
            request,
            "schemas.html",
            section="schemas",
            title="Schemas",
            rows=rows,
            registry_url=self.registry.url,
        )

    async def subject(self, request: Request) -> Response:
        if self.registry is None:
            return self.error(request, 404, "the console has no schema registry")
        subject = request.path_params["subject"]
        try:
            wanted = text(request.query_params, "version") or "latest"
            if wanted != "latest":
                wanted = str(integer(request.query_params, "version", None, 1, 2**31 - 1))
            versions = await self.registry.versions(subject)
            shown = await self.registry.version(subject, wanted)
            level = await self.registry.compatibility(subject)
        except BadInput as exc:
            return self.error(request, 400, str(exc))
        except RegistryAnswered as exc:
            return self.error(request, exc.status if exc.status < 500 else 502, str(exc))
        except RegistryUnavailable as exc:
            return self.error(request, 502, f"the schema registry at {self.registry.url}: {exc}")
        topic = next(
            (subject.removesuffix(end) for end in ("-key", "-value") if subject.endswith(end)),
            None,
        )
        return self.page(
            request,
            "subject.html",
            section="schemas",
            title=f"Subject {subject}",
            subject=subject,
            versions=versions,
            shown=shown,
            pretty=pretty_schema(shown.schema_type, shown.schema),
            level=level,
            topic=topic,
        )

    async def groups(self, request: Request) -> Response:
        async def action(client: AdminClient) -> Response:
            rows = await reads.groups(client)
            return self.page(
                request, "groups.html", section="groups", title="Consumer groups", groups=rows
            )

        return await self.with_admin(request, action)

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]

        async def action(client: AdminClient) -> Response:
            share = await reads.share_group(client, group_id)
            if share is not None:  # a share group (KIP-932): members and share offsets
                return self.page(
                    request,
                    "share_group.html",
                    section="groups",
                    title=f"Share group {group_id}",
                    share=share,
                )
            detail = await reads.group(client, group_id)
            prefix = f"group.partition_lag/{group_id}/"
            # topic/partition after the prefix: a longer group id ("a/b" vs "a") has more.
            partition_keys = [
                k for k in self.history.keys(prefix) if k[len(prefix) :].count("/") == 1
            ]
            return self.page(
                request,
                "group.html",
                section="groups",
                title=f"Group {group_id}",
                detail=detail,
                lag_key=f"group.lag/{group_id}",
                partition_keys=partition_keys,
            )

        return await self.with_admin(request, action)

    async def storage(self, request: Request) -> Response:
        window = self.sampler.usage_window()
        projection = None
        usage = None
        seconds: dict[str, float] = {}
        if window is not None:
            usage, seconds = window
            projection = cost.project(usage, self.config.prices, self.config.retention_days)
        return self.page(
            request,
            "storage.html",
            section="storage",
            title="Storage & cost",
            usage=usage,
            seconds=seconds,
            projection=projection,
            retention_days=self.config.retention_days,
            metrics_urls=self.sampler.urls,
            zones=sorted(self.sampler.zone_bytes.items()),
        )

    async def transactions(self, request: Request) -> Response:
        async def action(client: AdminClient) -> Response:
            rows = await reads.transactions(client)
            return self.page(
                request,
                "transactions.html",
                section="transactions",
                title="Transactions",
                transactions=rows,
            )

        return await self.with_admin(request, action)

    async def transaction(self, request: Request) -> Response:
        tid = request.path_params["tid"]

        async def action(client: AdminClient) -> Response:
            detail = await reads.transaction(client, tid)
            return self.page(
                request,
                "transaction.html",
                section="transactions",
                title=f"Transaction {tid}",
                txn=detail,
            )

        return await self.with_admin(request, action)

    async def mirrors(self, request: Request) -> Response:
        async def action(client: AdminClient) -> Response:
            try:
                found = await reads.mirrors(client)
                problem = ""
            except KafkaError as exc:
                found, problem = {}, f"the cluster does not list mirrors: {exc}"
            return self.page(
                request,
                "mirrors.html",
                section="mirrors",
                title="Mirrors",
                mirrors=sorted(found.items()),
                problem=problem,
            )

        return await self.with_admin(request, action)

    async def mirror(self, request: Request) -> Response:
        name = request.path_params["name"]

        async def action(client: AdminClient) -> Response:
            settings, partitions = await reads.mirror(client, name)
            return self.page(
                request,
                "mirror.html",
                section="mirrors",
                title=f"Mirror {name}",
                name=name,
                settings=[setting_row(k, v) for k, v in sorted(settings.items())],
                partitions=partitions,
            )

        return await self.with_admin(request, action)

    async def pipeline(self, request: Request) -> Response:
        runs, problem = await recent_runs(self.sampler.urls)
        return self.page(
            request,
            "pipeline.html",
            section="pipeline",
            title="Pipeline",
            runs=runs,
            runs_problem=problem,
        )

    async def series(self, request: Request) -> Response:
        keys = request.query_params.getlist("key")
        if len(keys) > MAX_SERIES_PER_REQUEST:
            return JSONResponse(
                {"error": f"at most {MAX_SERIES_PER_REQUEST} keys"}, status_code=400
            )
        if any(len(k) > 1024 for k in keys):
            return JSONResponse({"error": "key too long"}, status_code=400)
        return JSONResponse(
            {
                "interval_s": self.config.interval_s,
                "series": {k: self.history.points(k) for k in keys},
            }
        )

    async def root(self, request: Request) -> Response:
        return RedirectResponse("/cluster", status_code=302)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        detail = exc.detail if isinstance(exc, HTTPException) else "not found"
        return self.error(request, status, str(detail))

    async def crashed(self, request: Request, exc: Exception) -> Response:
        log.exception("console page %s failed", request.url.path, exc_info=exc)
        return self.error(request, 500, "the console failed to draw this page (see its log)")


def pretty_schema(schema_type: str, schema: str) -> str:
    """Avro and JSON Schema indented; Protobuf's .proto text as it is."""
    if schema_type == "PROTOBUF":
        return schema
    try:
        return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
    except ValueError:
        return schema


def create_app(config: ConsoleConfig) -> ASGIApp:
    console = Console(config)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        console.sampler.start()
        try:
            yield
        finally:
            await console.sampler.stop()

    routes = [
        Route("/", console.root),
        Route("/cluster", console.cluster),
        Route("/topics", console.topics),
        Route("/topics/{name}/messages", console.messages),
        Route("/topics/{name}", console.topic),
        Route("/groups", console.groups),
        Route("/groups/{group_id:path}", console.group),
        Route("/storage", console.storage),
        Route("/transactions", console.transactions),
        Route("/transactions/{tid:path}", console.transaction),
        Route("/mirrors", console.mirrors),
        Route("/mirrors/{name}", console.mirror),
        Route("/schemas", console.schemas),
        Route("/schemas/{subject:path}", console.subject),
        Route("/pipeline", console.pipeline),
        Route("/api/series", console.series),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: console.not_found, Exception: console.crashed},
    )
    app.state.console = console
    guarded: ASGIApp = app
    if config.user is not None:
        guarded = BasicAuth(app, config.user, config.password or "")
    return SecurityHeaders(guarded)
