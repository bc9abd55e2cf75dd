"""The console's Schemas pages and its decoding of records in Confluent's wire format, in
headless Chromium and over HTTP, against a real broker serving the schema registry: records
produced with confluent-kafka's Avro, JSON Schema and Protobuf serializers are shown
decoded with their schema id and subject; records that do not decode are shown raw with
the reason."""

from __future__ import annotations

import html
import json
import struct
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from console_support import http_status, save_screenshot, start_console, stop_process, table
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess
from registry_support import compile_proto, post_json
from selenium.webdriver.common.by import By

PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "console",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "console",
    "fields": [{"name": "id", "type": "long"}, {"name": "buyer", "type": "console.Person"}],
}
EVENT_JSON = {
    "type": "object",
    "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
}
EVENT_PROTO = (
    'syntax = "proto3";\npackage consoleproto;\nmessage Event { string kind = 1; int64 n = 2; }\n'
)
UNKNOWN_ID = 987654


@dataclass
class Typed:
    broker: BrokerProcess
    console_url: str
    registry: SchemaRegistryClient
    person_id: int


def _produce(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(60) == 0


def _seed(broker: BrokerProcess, tmp: Path) -> SchemaRegistryClient:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, 1, 1) for t in ("people", "events-json", "events-proto")],
        operation_timeout=30,
    )
    for future in futures.values():
        future.result(timeout=60)
    sr = SchemaRegistryClient({"url": broker.registry_url})

    def ctx(topic: str, part: str) -> SerializationContext:
        return SerializationContext(
            topic, MessageField.KEY if part == "key" else MessageField.VALUE
        )

    keys = AvroSerializer(sr, '"string"')
    values = AvroSerializer(sr, json.dumps(PERSON))
    people = [
        (keys(f"{n}-key", ctx("people", "key")), values({"name": n, "age": a}, ctx("people", "")))
        for n, a in (("ada", 36), ("alan", 41), ("grace", 85))
    ]
    unknown = b"\x00" + struct.pack(">I", UNKNOWN_ID) + b"\x06abc"
    _produce(broker.bootstrap, "people", [*people, (None, unknown), (None, b"plain text")])

    as_json = JSONSerializer(json.dumps(EVENT_JSON), sr)
    _produce(
        broker.bootstrap,
        "events-json",
        [(None, as_json({"kind": "click", "n": 7}, ctx("events-json", "")))],
    )
    module = compile_proto(tmp, f"console_event_{uuid.uuid4().hex[:6]}", EVENT_PROTO)
    as_proto = ProtobufSerializer(module.Event, sr, {"use.deprecated.format": False})
    _produce(
        broker.bootstrap,
        "events-proto",
        [(None, as_proto(module.Event(kind="view", n=12), ctx("events-proto", "")))],
    )
    # A schema with a reference, for the subject page.
    status, body = post_json(
        f"{broker.registry_url}/subjects/orders-value/versions",
        {
            "schema": json.dumps(ORDER),
            "references": [{"name": "console.Person", "subject": "people-value", "version": 1}],
        },
    )
    assert status == 200, body
    return sr


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Typed]:
    root = tmp_path_factory.mktemp("console-schemas")
    broker = BrokerProcess(root / "data", env=FAST_COMMITS, registry=True, name="sr-console")
    console: subprocess.Popen | None = None
    try:
        broker.start()
        sr = _seed(broker, root)
        console, url = start_console(
            broker.bootstrap,
            root / "console.log",
            "--schema-registry-url",
            broker.registry_url,
        )
        person_id = sr.get_latest_version("people-value").schema_id
        yield Typed(broker, url, sr, person_id)
    finally:
        if console is not None:
            stop_process(console)
        broker.close()
        warn_tracebacks(broker)


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    assert "Lakelog console" in driver.title, driver.page_source[:2000]
    assert not driver.find_elements(By.ID, "error-message"), driver.page_source[:2000]


def test_schemas_page_lists_subjects(typed: Typed, browser: Any) -> None:
    open_page(browser, typed.console_url + "/schemas")
    rows = {r["data"]["subject"]: r["cells"] for r in table(browser, "#subject-table tbody tr")}
    assert set(rows) == {
        "people-key",
        "people-value",
        "events-json-value",
        "events-proto-value",
        "orders-value",
    }
    assert rows["people-value"] == ["people-value", "1", str(typed.person_id), "AVRO"]
    assert rows["events-json-value"][3] == "JSON"
    assert rows["events-proto-value"][3] == "PROTOBUF"
    save_screenshot(browser, "schemas")


def test_subject_page_shows_the_schema_pretty_with_its_facts(typed: Typed, browser: Any) -> None:
    open_page(browser, typed.console_url + "/schemas/orders-value")
    facts = {r["data"]["fact"]: r["cells"][0] for r in table(browser, "#schema-facts tr")}
    latest = typed.registry.get_latest_version("orders-value")
    assert facts["version"] == "1"
    assert facts["id"] == str(latest.schema_id)
    assert facts["type"] == "AVRO"
    assert facts["compatibility"] == "BACKWARD"
    assert facts["references"] == "console.Person: people-value version 1"
    shown = browser.find_element(By.ID, "schema-text").text
    assert json.loads(shown) == ORDER
    assert '\n  "name": "Order",' in shown  # indented, one key a line
    link = browser.find_element(By.CSS_SELECTOR, "#schema-facts a")
    link.click()
    assert browser.find_element(By.ID, "schema-text").text == json.dumps(PERSON, indent=2)
    save_screenshot(browser, "schema-subject")


def test_topic_page_names_its_key_and_value_subjects(typed: Typed, browser: Any) -> None:
    open_page(browser, typed.console_url + "/topics/people")
    links = browser.find_elements(By.CSS_SELECTOR, "#topic-subjects a")
    assert {a.get_attribute("data-part"): a.text for a in links} == {
        "key": "people-key",
        "value": "people-value",
    }
    links[1].click()
    assert browser.current_url.endswith("/schemas/people-value")
    open_page(browser, typed.console_url + "/topics/events-json")
    assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#topic-subjects a")] == [
        "events-json-value"
    ]


def test_message_browser_decodes_avro_and_explains_what_does_not_decode(
    typed: Typed, browser: Any
) -> None:
    open_page(browser, typed.console_url + "/topics/people/messages?partition=0&offset=0")
    script = """
    return Array.from(document.querySelectorAll('#record-table tbody tr')).map((row) => {
      const part = (name) => {
        const td = row.querySelector(`td[data-part="${name}"]`);
        const pick = (css) => { const e = td.querySelector(css); return e ? e.innerText : null; };
        return {decoded: pick('pre.decoded'), schema: pick('.schema-of'), reason: pick('.reason'),
                text: td.innerText};
      };
      return {offset: row.dataset.offset, key: part('key'), value: part('value')};
    });"""
    rows = {r["offset"]: r for r in browser.execute_script(script)}
    assert sorted(rows) == ["0", "1", "2", "3", "4"]
    ada = rows["0"]["value"]
    assert json.loads(ada["decoded"]) == {"name": "ada", "age": 36}
    assert ada["schema"] == f"AVRO · schema id {typed.person_id} · people-value v1"
    assert json.loads(rows["0"]["key"]["decoded"]) == "ada-key"
    assert "people-key v1" in rows["0"]["key"]["schema"]
    assert json.loads(rows["2"]["value"]["decoded"]) == {"name": "grace", "age": 85}
    assert rows["3"]["value"]["decoded"] is None
    assert rows["3"]["value"]["reason"] == f"schema id {UNKNOWN_ID} is not in the registry"
    assert rows["4"]["value"]["decoded"] is None
    assert "plain text" in rows["4"]["value"]["text"]
    assert rows["4"]["value"]["reason"].startswith("not in the schema registry's wire format")
    save_screenshot(browser, "messages-decoded")


def _page(typed: Typed, path: str) -> str:
    status, body = http_status(typed.console_url + path)
    assert status == 200, body[:2000]
    return html.unescape(body)


def test_json_and_protobuf_values_are_decoded(typed: Typed) -> None:
    page = _page(typed, "/topics/events-json/messages?partition=0&offset=0")
    json_id = typed.registry.get_latest_version("events-json-value").schema_id
    assert json.dumps({"kind": "click", "n": 7}, indent=2) in page
    assert f"JSON · schema id {json_id} · " in page and ">events-json-value v1</a>" in page

    page = _page(typed, "/topics/events-proto/messages?partition=0&offset=0")
    proto_id = typed.registry.get_latest_version("events-proto-value").schema_id
    assert 'consoleproto.Event {\n  "kind": "view",\n  "n": "12"\n}' in page, page[
        page.find("record-table") :
    ][:3000]
    assert f"PROTOBUF · schema id {proto_id} · " in page


def test_unknown_subjects_and_bad_versions_are_4xx_pages(typed: Typed) -> None:
    status, body = http_status(typed.console_url + "/schemas/no-such-subject")
    assert status == 404 and "Subject &#39;no-such-subject&#39; not found" in body
    status, body = http_status(typed.console_url + "/schemas/people-value?version=x")
    assert status == 400
    status, body = http_status(typed.console_url + "/schemas/people-value?version=9")
    assert status == 404


def test_an_unreachable_registry_leaves_pages_up(typed: Typed, tmp_path: Path) -> None:
    from e2e_harness import HOST, free_port

    console, url = start_console(
        typed.broker.bootstrap,
        tmp_path / "console.log",
        "--schema-registry-url",
        f"http://{HOST}:{free_port()}",
    )
    try:
        status, body = http_status(url + "/topics/people/messages?partition=0&offset=0")
        assert status == 200
        assert "the schema registry did not list subjects" in body
        assert f"schema id {typed.person_id}: cannot reach" in html.unescape(body)
        status, body = http_status(url + "/schemas")
        assert status == 502 and "cannot reach" in body
    finally:
        stop_process(console)
