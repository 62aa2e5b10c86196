"""Monitoring (charts/helm-locker: monitoring.*): the ServiceMonitor, the PrometheusRule and the
Grafana dashboard, checked against what a running helm-locker exports.

- The rules pass `promtool check rules`, and `promtool test rules` (tests/monitoring/
  rules_test.yaml) shows each alert firing on the series that should fire it, and not on others.
- Every metric the rules and the dashboard read is one `helm-locker serve` exports (a renamed
  metric would otherwise leave an alert silently never firing).
- The certificate expiry and the releases by status are measured on a running server.

No cluster needed: the server reads release Secrets from a folder. promtool comes from $PROMTOOL,
PATH, or target/tools/promtool (scripts/e2e.sh puts it there, from Debian's prometheus package).
"""

import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.request

import harness
import test_chart as chart

ROOT = harness.ROOT
ALL_ON = {"monitoring": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                         "grafanaDashboard": {"enabled": True}}}
# Metrics from elsewhere the rules read: Prometheus' own and kube-state-metrics'.
FOREIGN = {"up", "kube_deployment_status_replicas_available"}


def promtool():
    for candidate in (os.environ.get("PROMTOOL"), shutil.which("promtool"),
                      os.path.join(ROOT, "target", "tools", "promtool")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise AssertionError("promtool not found: set PROMTOOL, or run scripts/e2e.sh, which installs it")


def exported_names(text):
    """The sample names an OpenMetrics exposition can carry, from its # TYPE lines."""
    names = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if not m:
            continue
        name, kind = m.groups()
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(kind, [""])
        names.update(name + s for s in suffixes)
    return names


def metric_names(expr):
    """Metric names in a PromQL expression (function names and label names left out)."""
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    without_grouping = re.sub(r"\b(by|without)\s*\([^)]*\)", "", without_labels)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", without_grouping))
    keywords = {"by", "without", "and", "or", "unless", "on", "ignoring", "bool", "offset"}
    return {n for n in names if n not in keywords and not re.fullmatch(r"\d+[smhdwy]?", n)}


class Monitoring(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="helm-locker-monitoring-")
        releases = os.path.join(cls.dir, "releases")
        os.makedirs(releases)
        shutil.copy(os.path.join(ROOT, "tests", "fixtures", "cluster-capture", "releases",
                                 "02-after-upgrade.json"), releases)
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "db"},
                      "data": {"a": "1"}}
        with open(os.path.join(releases, "db.json"), "w") as f:
            json.dump(harness.release_secret("db", "db", [config_map], status="failed", revision=2), f)
        cls.admin, cls.port = harness.free_port(), harness.free_port()
        cls.certs = os.path.join(cls.dir, "certs")
        cls.log = open(os.path.join(cls.dir, "helm-locker.log"), "w")
        cls.server = subprocess.Popen(
            [harness.BIN, "serve", "--self-signed", "--self-signed-dir", cls.certs, "--releases-dir", releases,
             "--addr", f"127.0.0.1:{cls.port}", "--admin-addr", f"127.0.0.1:{cls.admin}"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{cls.admin}/readyz", timeout=1):
                    break
            except OSError:
                if time.time() > deadline or cls.server.poll() is not None:
                    raise RuntimeError(f"helm-locker not ready; see {cls.log.name}")
                time.sleep(0.2)
        # One denied write, so the families labelled per request (admissions, denials) exist.
        with open(os.path.join(ROOT, "tests", "fixtures", "cluster-capture", "reviews",
                               "075-kubectl-patch-update-deployment-shop-web.json"), "rb") as f:
            review = f.read()
        context = ssl.create_default_context(cafile=os.path.join(cls.certs, "ca.crt"))
        request = urllib.request.Request(f"https://localhost:{cls.port}/validate", data=review,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=5) as r:
            assert json.load(r)["response"]["allowed"] is False
        with urllib.request.urlopen(f"http://127.0.0.1:{cls.admin}/metrics", timeout=5) as r:
            cls.metrics = r.read().decode()
        _, cls.docs = chart.render(ALL_ON)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait(timeout=30)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def sample(self, series):
        for line in self.metrics.splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        self.fail(f"{series} not in /metrics:\n{self.metrics}")

    def test_monitoring_is_off_by_default(self):
        _, docs = chart.render()
        self.assertEqual([d["kind"] for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")], [])
        self.assertFalse([d for d in docs if d["metadata"]["name"].endswith("-dashboard")])

    def test_the_rules_pass_promtool_and_fire_on_what_they_should(self):
        rule = chart.one(self.docs, "PrometheusRule")
        with tempfile.TemporaryDirectory() as work:
            # JSON is YAML: promtool reads the rendered spec as a rule file.
            with open(os.path.join(work, "rules.yaml"), "w") as f:
                json.dump(rule["spec"], f, indent=1)
            shutil.copy(os.path.join(ROOT, "tests", "monitoring", "rules_test.yaml"), work)
            for args in (["check", "rules", "rules.yaml"], ["test", "rules", "rules_test.yaml"]):
                run = subprocess.run([promtool(), *args], cwd=work, capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, f"promtool {' '.join(args)}:\n{run.stdout}\n{run.stderr}")
        alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
        self.assertEqual(alerts, {"HelmLockerDown", "HelmLockerNoReadyReplica", "HelmLockerDenialsSpiking",
                                  "HelmLockerRevertsFailing", "HelmLockerCertificateExpiring",
                                  "HelmLockerReleaseFailed", "HelmLockerExceptionOpenLong",
                                  "HelmLockerReleaseStuckPending", "HelmLockerRevertFights",
                                  "HelmLockerAuthorRefused", "HelmLockerObjectsMissing"})
        with open(os.path.join(ROOT, "tests", "monitoring", "rules_test.yaml")) as f:
            tested = set(re.findall(r"alertname: (\w+)", f.read()))
        self.assertEqual(tested, alerts, "every alert has a promtool unit test")

    def test_thresholds_and_labels_come_from_values(self):
        values = chart.merged(ALL_ON, {"monitoring": {"prometheusRule": {
            "denialsPerSecond": 2, "certificateExpiryDays": 7, "releaseFailedFor": "2h", "exceptionOpenFor": "30m",
            "labels": {"release": "kube-prometheus-stack"}, "additionalAlertLabels": {"team": "platform"}}}})
        _, docs = chart.render(values, namespace="locker", name="hl")
        rule = chart.one(docs, "PrometheusRule")
        self.assertEqual(rule["metadata"]["labels"]["release"], "kube-prometheus-stack")
        rules = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
        self.assertIn("> 2", rules["HelmLockerDenialsSpiking"]["expr"])
        self.assertIn("< 604800", rules["HelmLockerCertificateExpiring"]["expr"])
        self.assertEqual(rules["HelmLockerReleaseFailed"]["for"], "2h")
        self.assertIn("> 1800", rules["HelmLockerExceptionOpenLong"]["expr"])
        self.assertIn('up{job="hl-helm-locker",namespace="locker"}', rules["HelmLockerDown"]["expr"])
        for r in rules.values():
            self.assertEqual(r["labels"]["team"], "platform", r["alert"])

    def test_every_metric_the_rules_and_the_dashboard_read_is_exported(self):
        exported = exported_names(self.metrics)
        rule = chart.one(self.docs, "PrometheusRule")
        exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
        dashboard = json.loads(self.dashboard()["data"]["helm-locker.json"])
        exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        read = set().union(*(metric_names(e) for e in exprs)) - FOREIGN
        functions = {"absent", "sum", "rate", "increase", "max", "min", "time", "histogram_quantile"}
        self.assertEqual(read - functions - exported, set(), f"exported: {sorted(exported)}")
        self.assertIn("helm_locker_certificate_expiry_timestamp_seconds", read)

    def test_the_certificate_expiry_is_that_of_the_certificate_served(self):
        decoded = ssl._ssl._test_decode_cert(os.path.join(self.certs, "tls.crt"))
        not_after = ssl.cert_time_to_seconds(decoded["notAfter"])
        self.assertEqual(self.sample("helm_locker_certificate_expiry_timestamp_seconds"), not_after)
        self.assertGreater(not_after, time.time() + 30 * 86400)

    def test_releases_are_counted_by_the_status_of_their_newest_revision(self):
        self.assertEqual(self.sample('helm_locker_releases_by_status{status="deployed"}'), 1)
        self.assertEqual(self.sample('helm_locker_releases_by_status{status="failed"}'), 1)
        # Statuses no release has are 0, not absent: an alert on them never sees a gap.
        self.assertEqual(self.sample('helm_locker_releases_by_status{status="pending-upgrade"}'), 0)

    def test_the_service_monitor_scrapes_the_admin_port_of_every_replica(self):
        monitor = chart.one(self.docs, "ServiceMonitor")
        service = chart.one(self.docs, "Service")
        deployment = chart.one(self.docs, "Deployment")
        labels = service["metadata"]["labels"]
        for key, value in monitor["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels.get(key), value)
        port = monitor["spec"]["endpoints"][0]["port"]
        target = next(p["targetPort"] for p in service["spec"]["ports"] if p["name"] == port)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        self.assertIn(target, [p["name"] for p in container["ports"]])
        self.assertEqual(monitor["spec"]["endpoints"][0]["path"], "/metrics")
        admin = next(e["value"] for e in container["env"] if e["name"] == "HELM_LOCKER_ADMIN_ADDR")
        admin_port = next(p["containerPort"] for p in container["ports"] if p["name"] == target)
        self.assertTrue(admin.endswith(f":{admin_port}"), admin)

    def dashboard(self):
        return next(d for d in self.docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard"))

    def test_the_dashboard_is_a_grafana_dashboard_for_the_sidecar(self):
        config_map = self.dashboard()
        self.assertEqual(config_map["metadata"]["labels"]["grafana_dashboard"], "1")
        dashboard = json.loads(config_map["data"]["helm-locker.json"])
        with open(os.path.join(chart.CHART, "files", "dashboard.json")) as f:
            self.assertEqual(dashboard, json.load(f))
        self.assertEqual(dashboard["uid"], "helm-locker")
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")
        cells = set()
        for panel in dashboard["panels"]:
            g = panel["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, panel["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"{panel['title']} overlaps another panel")
                    cells.add((x, y))
            self.assertTrue(panel["targets"], panel["title"])
            for target in panel["targets"]:
                self.assertEqual(target["datasource"]["uid"], "${datasource}")
                self.assertIn('job=~"$job"', target["expr"], panel["title"])
        variables = {v["name"] for v in dashboard["templating"]["list"]}
        self.assertEqual(variables, {"datasource", "job"})


if __name__ == "__main__":
    unittest.main()
