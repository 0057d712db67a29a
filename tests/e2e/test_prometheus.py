"""The shipped monitoring against a real Prometheus: Debian's prometheus (scripts/prometheus.sh)
scrapes a Kelp carrying real traffic and evaluates ops/prometheus/kelp-rules.yml, and every
query of ops/grafana/kelp-dashboard.json runs on it.

Checked through Prometheus's HTTP API: the target is up; every metric name the rules and the
dashboard use (read from the rules Prometheus loaded and from the dashboard file) has series,
except the few listed in NOT_MADE with the reason; every rule evaluates without error and every
recording rule has samples; KelpConsumerLagGrowing goes pending while a stopped group's lag
grows, KelpDown once Kelp is stopped; every dashboard query (its template variables set to this
Kelp, topic and group) evaluates, with data unless it needs a NOT_MADE series. promtool checks
and unit-tests the rule files (ops/prometheus/kelp-rules.test.yml).

Runs once, on the local-storage pass (conftest.ENGINE_NEUTRAL): the series the rules use are
the local engine's; the SeaweedMQ-only ones are listed in NOT_MADE.
"""

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

import pytest

import conftest
from conftest import ROOT, Broker, free_port, require

pytestmark = conftest.ENGINE_NEUTRAL

RULES_DIR = ROOT / "ops/prometheus"
DASHBOARD = ROOT / "ops/grafana/kelp-dashboard.json"
PROM_SH = ROOT / "scripts/prometheus.sh"

# Metric names the rules or the dashboard use that this test cannot make appear, and why.
# (They must still be used somewhere: test_not_made_names_are_used keeps the list honest.)
NOT_MADE = {
    "kelp_forwarder_queue_depth": "--storage seaweedmq only",
    "kelp_forwarder_inflight_bytes": "--storage seaweedmq only",
    "kelp_forwarder_published_records_total": "--storage seaweedmq only",
    "kelp_forwarder_stream_errors_total": "--storage seaweedmq only",
}

# Grafana's interval variables, as the dashboard would get them over a short range.
INTERVALS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}

LAG_RECORDS = 1500  # produced per lag step, each above the alert's floor of 1000 on its own


def metric_names(expr):
    """The kelp_ metric and kelp: recorded names an expression reads (string literals,
    such as label values, left out)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return set(re.findall(r"(?<![\w:])(kelp[_:][A-Za-z0-9_:]*)", bare))


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_queries(dash):
    """(panel title, expr) of every panel target, and the variables' label_values queries."""
    targets = [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
    variables = [(v["name"], v["definition"]) for v in dash["templating"]["list"]
                 if v["type"] == "query"]
    return targets, variables


def substitute(expr, values):
    """expr with Grafana's $var / ${var} references replaced; an unknown one fails."""
    def repl(m):
        name = m.group(1) or m.group(2)
        assert name in values, f"unknown dashboard variable ${name} in {expr}"
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


class Prometheus:
    """The HTTP API of the Prometheus scripts/prometheus.sh started."""

    def __init__(self, url):
        self.url = url

    def get(self, path, **params):
        q = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400/422: a bad query; the body says why
            return json.load(e)

    def query(self, expr):
        """The instant vector of expr now; a failed evaluation fails the test."""
        r = self.get("/api/v1/query", query=expr)
        assert r["status"] == "success", (expr, r)
        return r["data"]["result"]

    def series(self, match, start):
        r = self.get("/api/v1/series", **{"match[]": match, "start": start})
        assert r["status"] == "success", (match, r)
        return r["data"]


def until(what, fn, timeout=60.0):
    """Polls fn until it returns something true (returned), failing after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.25)


def produce(bootstrap, topic, n):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=b"v" * 64)
    assert p.flush(30) == 0


def consume_and_commit(bootstrap, topic, group, n):
    """A group member reads n records, commits their offsets synchronously and leaves."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got, deadline = 0, time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == n, f"consumed {got} of {n}"
        c.commit(asynchronous=False)
    finally:
        c.close()


def alert_states(prom, name, **labels):
    sel = ",".join([f'alertname="{name}"'] + [f'{k}="{v}"' for k, v in labels.items()])
    return {s["metric"]["alertstate"] for s in prom.query(f"ALERTS{{{sel}}}")}


def test_promtool_checks_and_unit_tests_the_rules():
    require(shutil.which("promtool") is not None, "promtool (scripts/install-deps.sh)")
    r = subprocess.run(["promtool", "check", "rules", "kelp-rules.yml"], cwd=RULES_DIR,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["promtool", "test", "rules", "kelp-rules.test.yml"], cwd=RULES_DIR,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    # The operators' example names the rules where they would be installed: syntax only.
    r = subprocess.run(["promtool", "check", "config", "--syntax-only",
                        "prometheus.example.yml"], cwd=RULES_DIR, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dashboard_is_well_formed():
    dash = dashboard()
    assert 36 <= dash["schemaVersion"] <= 41
    names = {v["name"]: v for v in dash["templating"]["list"]}
    assert names["DS_PROMETHEUS"]["type"] == "datasource"
    assert {"instance", "topic", "group"} <= set(names)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
            substitute(t["expr"], {**INTERVALS, **{n: ".*" for n in names}})


def test_not_made_names_are_used():
    targets, _ = dashboard_queries(dashboard())
    used = set().union(*(metric_names(e) for _, e in targets))
    used |= metric_names((RULES_DIR / "kelp-rules.yml").read_text())
    assert set(NOT_MADE) <= used, set(NOT_MADE) - used


def test_prometheus_scrapes_kelp_with_the_shipped_rules_and_dashboard(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic
    require(shutil.which("prometheus") is not None, "prometheus (scripts/install-deps.sh)")
    mport, pport = free_port(), free_port()
    instance = f"127.0.0.1:{mport}"
    pdir = tmp_path / "prometheus"
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="kelp-prom-") as d:
        b = Broker(d, ["--metrics-addr", instance])
        b.start()
        try:
            r = subprocess.run([str(PROM_SH), "start", str(pdir), str(pport), instance],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            prom = Prometheus(r.stdout.strip().splitlines()[-1])
            until("up{job=\"kelp\"} == 1",
                  lambda: prom.query(f'up{{job="kelp",instance="{instance}"}} == 1'))

            # Rules Prometheus loaded: all of the file's, all evaluating cleanly.
            groups = prom.get("/api/v1/rules")["data"]["groups"]
            rules = [rule for g in groups for rule in g["rules"]]
            check = subprocess.run(["promtool", "check", "rules", "kelp-rules.yml"],
                                   cwd=RULES_DIR, capture_output=True, text=True, timeout=60)
            assert f"{len(rules)} rules found" in check.stdout, (len(rules), check.stdout)
            recorded = [rule["name"] for rule in rules if rule["type"] == "recording"]
            alerts = [rule["name"] for rule in rules if rule["type"] == "alerting"]
            assert {"KelpDown", "KelpConsumerLagGrowing"} <= set(alerts)

            # Traffic: a topic, records, a group that reads and commits them, an error answer.
            topic, group = f"prom-{uuid.uuid4().hex[:8]}", f"g-prom-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
            produce(b.bootstrap, topic, 200)
            consume_and_commit(b.bootstrap, topic, group, 200)
            # Twice: a counter's first sample is its start, only the second error is a rate.
            errors = f'kelp_request_errors_total{{instance="{instance}",api="CreateTopics"}}'
            for n in (1, 2):
                with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS|already exists"):
                    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
                until(f"{errors} == {n}", lambda: prom.query(f"{errors} == {n}"))

            # The group is gone and its topic grows: its lag grows, in two steps Prometheus
            # sees one after the other.
            lag = f'kelp:consumer_group_lag:sum{{group="{group}"}}'
            for step in (1, 2):
                produce(b.bootstrap, topic, LAG_RECORDS)
                until(f"{lag} >= {step * LAG_RECORDS}",
                      lambda: prom.query(f"{lag} >= {step * LAG_RECORDS}"))
            states = until("KelpConsumerLagGrowing pending or firing",
                           lambda: alert_states(prom, "KelpConsumerLagGrowing", group=group))
            assert states <= {"pending", "firing"}, states

            # Every metric name the rules and the dashboard read has series.
            dash = dashboard()
            targets, variables = dashboard_queries(dash)
            exprs = [rule["query"] for rule in rules] + [e for _, e in targets] + \
                [e for _, e in variables]
            used = set().union(*(metric_names(e) for e in exprs))
            raw = {n for n in used if not n.startswith("kelp:")}
            assert used - raw <= set(recorded), f"not recorded: {used - raw - set(recorded)}"
            wanted = raw - set(NOT_MADE)

            def missing():
                return {n for n in wanted
                        if not prom.series(f'{{__name__="{n}",instance="{instance}"}}', start)}
            deadline = time.monotonic() + 30
            while (absent := missing()) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert not absent, f"no series in Prometheus for {sorted(absent)}"

            # Every recording rule has samples, every rule evaluated without error.
            for name in recorded:
                until(f"samples of {name}",
                      lambda: prom.series(f'{{__name__="{name}",instance="{instance}"}}', start),
                      timeout=30)
            groups = prom.get("/api/v1/rules")["data"]["groups"]
            bad = [(rule["name"], rule.get("lastError")) for g in groups for rule in g["rules"]
                   if rule["health"] != "ok"]
            assert not bad, bad
            # ... and what they record is the traffic's (a NaN compares false: no result).
            i = f'instance="{instance}"'
            for expr in [f"kelp:produce_bytes:rate1m{{{i}}} > 0",
                         f"kelp:fetch_bytes:rate1m{{{i}}} > 0",
                         f'kelp:requests_by_api:rate5m{{{i},api="Produce"}} > 0',
                         f'kelp:request_errors:rate5m{{{i},api="CreateTopics",'
                         f'error="TOPIC_ALREADY_EXISTS"}} > 0',
                         f'kelp:consumer_group_lag:sum{{{i},group="{group}"}} '
                         f'== {2 * LAG_RECORDS}',
                         f'kelp:storage_latency_seconds:p99_5m{{{i},engine="local",op="append"}}'
                         f' > 0',
                         f"kelp:data_dir_free:ratio{{{i}}} > 0 < 1"]:
                until(expr, lambda: prom.query(expr), timeout=30)

            # Every dashboard query evaluates, on this Kelp, topic and group; with data unless
            # it reads a series this test cannot make.
            values = {**INTERVALS, "instance": instance, "topic": topic,
                      "group": group, "DS_PROMETHEUS": "unused"}
            empty = []
            for title, expr in targets:
                q = substitute(expr, values)
                if not prom.query(q) and not metric_names(q) & set(NOT_MADE):
                    empty.append((title, q))
            assert not empty, f"dashboard queries without data: {empty}"
            for name, definition in variables:
                m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", definition)
                assert m, (name, definition)
                found = {s.get(m.group(2)) for s in
                         prom.series(substitute(m.group(1), values), start)}
                expect = {"instance": instance, "topic": topic, "group": group}[name]
                assert expect in found, (name, definition, found)

            # Kelp stops: the target goes down and KelpDown goes pending.
            b.stop()
            states = until("KelpDown pending",
                           lambda: alert_states(prom, "KelpDown", instance=instance))
            assert states == {"pending"}, states  # its for: 1m has not passed
        finally:
            subprocess.run([str(PROM_SH), "stop", str(pdir)], capture_output=True, timeout=60)
            b.stop()
            b.log.close()
