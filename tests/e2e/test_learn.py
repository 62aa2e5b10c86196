"""Issue 68, adopt without fear: writers learned in `warn` mode, proposed, accepted as scoped
rules, then `deny` — on a real control plane (1.36.2), the locker run as the chart runs it (its
ServiceAccount and the chart's rendered RBAC: tests/e2e/chart_rbac.py), real Helm 4 (server-side
apply).

The admin installs `shop/shop`: a Deployment `shop-web` (2 replicas), a ConfigMap
`shop-settings` (`mode`, `flags`) and a Secret `shop-creds`. In `ops` run two controllers as pods
(Pod objects with pod-bound service-account tokens from the TokenRequest API; no kubelet is
needed for the API server to bind a token to a Pod): `scaler` sizes `shop-web` through `/scale`,
`configurer` patches `shop-settings`' `mode`. alice (a human with `edit` in shop) patches
`flags` and the Secret's password; `batch`'s token is used with no pod.

1. In `warn` every write goes through with a warning and is learned; `kubectl locker learn -A`
   proposes exactly the two controllers' rules (their paths, their objects), names alice with
   the `helm upgrade` that makes her change, flags the pod-less token. Evidence a tenant writes
   (a learned ConfigMap in her own namespace) proposes nothing. No Secret value is in any object
   the locker wrote.
2. `learn accept ID ID --apply`, then `deny`: the two controllers' writes go through with the
   rule named, and stay (no revert fight); alice's, the pod-less token's and the scaler writing
   another path are denied; a rules ConfigMap of the locker's name in a tenant's namespace gives
   nothing; a rule past its `until` stops matching. The admin's `helm upgrade` succeeds after the
   controllers' writes (Helm 4 applies server-side: the reverter hands the fields a rule gives
   back to Helm's entry, so the upgrade does not conflict), and the controllers write again.
3. The leader restarts: the proposals are the same.

Runs on the newest Kubernetes only (not in scripts/e2e.sh's FLOOR): pod-bound tokens carry the
pod's name in the request's `extra` from 1.32 on.

    cd tests/e2e && KUBEBUILDER_ASSETS=... HELM_LOCKER_BIN=target/debug/helm-locker \\
        .venv-e2e/bin/python -m unittest -v test_learn
"""

import base64
import json
import time
import unittest

import helm_python as helm

from chart_rbac import NS as LOCKER_NS, RELEASE as LOCKER, bind, chart_rbac_env, locked, unlock
from harness import BIN, PlaneTest, ControlPlane, eventually, write_files

NS = "shop"
OPS = "ops"
RELEASE = "shop"
PASSWORD = "hunter2-original"
NEW_PASSWORD = "hunter2-changed"
WRITERS = f"{LOCKER}-writers"
SWITCHES = f"{LOCKER}-switches"
LEARNED_PREFIX = f"{LOCKER}-learned-"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
    "values.yaml": "replicas: 2\nmode: normal\nflags: a\ntag: \"1\"\n",
    "templates/web.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: "nginx:{{ .Values.tag }}"
""",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  mode: {{ .Values.mode | quote }}
  flags: {{ .Values.flags | quote }}
""",
    "templates/creds.yaml": f"""apiVersion: v1
kind: Secret
metadata:
  name: {{{{ .Release.Name }}}}-creds
stringData:
  password: {PASSWORD}
""",
}


def role(name, namespace, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}


# What each controller may do in shop: no more than its job.
RBAC = [
    role("scaler", NS, [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch", "update"]},
                        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]}]),
    role("configurer", NS, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}]),
    role("batch", NS, [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch"]}]),
]


def pod(name, account):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": OPS},
            "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]}}


class Learn(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for namespace in (NS, OPS, "tenant"):
            assert k("create", "namespace", namespace).returncode == 0
        for account in ("scaler", "configurer", "batch"):
            assert k("-n", OPS, "create", "serviceaccount", account).returncode == 0
        out = k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": RBAC}))
        assert out.returncode == 0, out.stderr
        for args in (("-n", NS, "create", "rolebinding", "scaler", "--role=scaler", f"--serviceaccount={OPS}:scaler"),
                     ("-n", NS, "create", "rolebinding", "configurer", "--role=configurer", f"--serviceaccount={OPS}:configurer"),
                     ("-n", NS, "create", "rolebinding", "batch", "--role=batch", f"--serviceaccount={OPS}:batch")):
            out = k(*args)
            assert out.returncode == 0, out.stderr
        for ns in (NS, "tenant"):
            bind(cls.plane, "alice", "edit", ns)
        for name, account in (("scaler-0", "scaler"), ("configurer-0", "configurer")):
            out = k("apply", "-f", "-", input=json.dumps(pod(name, account)))
            assert out.returncode == 0, out.stderr
        cls.tokens = {
            "scaler": cls.token("scaler", "scaler-0"),
            "configurer": cls.token("configurer", "configurer-0"),
            "batch": cls.token("batch", None),
        }
        cls.chart = write_files("learn-chart-", CHART)
        values = {"revert": {"enabled": True}, "learn": {"enabled": True}}
        cls.env = chart_rbac_env(cls.plane, values)
        # The switches (mode) and rules ConfigMaps as the chart makes them; the locker starts in warn.
        for name, data in ((SWITCHES, {"mode": "warn", "revert": "true"}), (WRITERS, {})):
            out = k("-n", LOCKER_NS, "apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}))
            assert out.returncode == 0, out.stderr
        cls.start_locker()
        helm.Config(kubeconfig_path=cls.plane.kubeconfig, namespace=NS).install(cls.chart, RELEASE, {})

    @classmethod
    def start_locker(cls):
        cls.locker = locked(cls.plane, cls.env, "learn", "--mode", "warn",
                            "--switches-configmap", SWITCHES, "--writers-configmap", WRITERS,
                            "--learned-configmap-prefix", LEARNED_PREFIX, "--learn-interval", "2s",
                            webhook="learn-lock")

    @classmethod
    def tearDownClass(cls):
        unlock(cls.plane, cls.locker, "learn-lock")
        cls.plane.down()

    @classmethod
    def token(cls, account, pod_name):
        bound = ("--bound-object-kind", "Pod", "--bound-object-name", pod_name) if pod_name else ()
        out = cls.plane.kubectl("-n", OPS, "create", "token", account, "--duration", "2h", *bound)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def log(self):
        return self.locker.log_text()[-4000:]

    def as_account(self, account, *args, input=None):
        return self.k("--token", self.tokens[account], *args, input=input)

    def scale(self, account, replicas, manager="scaler"):
        return self.as_account(account, "-n", NS, "patch", "deployment", f"{RELEASE}-web", "--subresource=scale",
                               f"--field-manager={manager}", "--type=merge",
                               "-p", json.dumps({"spec": {"replicas": replicas}}))

    def set_mode(self, value):
        return self.as_account("configurer", "-n", NS, "patch", "configmap", f"{RELEASE}-settings",
                               "--field-manager=configurer", "--type=merge", "-p", json.dumps({"data": {"mode": value}}))

    def alice_flags(self, value):
        return self.k("--as=alice", "-n", NS, "patch", "configmap", f"{RELEASE}-settings", "--type=merge",
                      "-p", json.dumps({"data": {"flags": value}}))

    def alice_password(self):
        return self.k("--as=alice", "-n", NS, "patch", "secret", f"{RELEASE}-creds", "--type=merge",
                      "-p", json.dumps({"stringData": {"password": NEW_PASSWORD}}))

    def replicas(self):
        return self.get("-n", NS, "deployment", f"{RELEASE}-web")["spec"]["replicas"]

    def mode(self):
        return self.get("-n", NS, "configmap", f"{RELEASE}-settings")["data"]["mode"]

    def owns(self, manager, kind, name):
        """Whether `manager` has a managedFields entry on the object."""
        live = self.get("-n", NS, kind, name, "--show-managed-fields")
        return any(m.get("manager") == manager for m in live["metadata"].get("managedFields", []))

    def plugin(self, *args):
        return self.plane.run([BIN, "kubectl", *args], env=self.plane.env)

    def learn(self):
        out = self.plugin("learn", "-A", "--locker-namespace", LOCKER_NS, "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def learned_entries(self):
        items = self.get("-n", LOCKER_NS, "configmaps", "-l", "app.kubernetes.io/component=learned")["items"]
        return [e for cm in items for e in json.loads(cm["data"]["learned.json"])["entries"]]

    def test_1_warn_learns_and_proposes_exactly_the_controllers(self):
        self.assertTrue(eventually(lambda: "warning" in self.alice_flags("b").stderr.lower(), 20), self.log())
        # Every write goes through in warn, with a warning.
        for out in (self.scale("scaler", 5), self.set_mode("busy"), self.alice_password(),
                    self.scale("batch", 3, manager="batch")):
            self.ok(out)
            self.assertIn("locked by Helm release", out.stderr)
        self.assertTrue(eventually(lambda: len({(e["writer"], e["path"]) for e in self.learned_entries()}) >= 5, 30),
                        (self.learned_entries(), self.log()))
        # Evidence a tenant writes in her own namespace is not evidence.
        forged = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{LEARNED_PREFIX}shop", "namespace": "tenant",
                               "labels": {"app.kubernetes.io/component": "learned", "helm-locker.io/learned-namespace": NS}},
                  "data": {"learned.json": json.dumps({"namespace": NS, "entries": [{
                      "writer": "alice", "operation": "UPDATE", "release": "shop/shop", "group": "apps",
                      "kind": "Deployment", "path": "/spec/template/spec/containers/[name=web]/image", "fromPod": True,
                      "decision": "warn", "count": 99, "objects": ["shop-web"], "distinctObjects": 1,
                      "firstSeen": 1, "lastSeen": 2, "serviceAccount": "tenant/default"}]})}}
        self.ok(self.k("--as=alice", "create", "-f", "-", input=json.dumps(forged)))
        learned = self.learn()
        proposed = {(p["rule"]["writers"]["serviceAccounts"][0], p["rule"]["objects"]["kind"],
                     tuple(p["rule"]["objects"]["names"]), tuple(p["rule"]["paths"])) for p in learned["proposed"]}
        self.assertEqual(proposed, {
            (f"{OPS}/scaler", "Deployment", (f"{RELEASE}-web",), ("/spec/replicas",)),
            (f"{OPS}/configurer", "ConfigMap", (f"{RELEASE}-settings",), ("/data/mode",)),
        }, learned)
        humans = json.dumps(learned["notProposed"])
        self.assertIn("alice", humans)
        self.assertIn("helm upgrade", humans)
        self.assertIn("flags", humans)
        self.assertIn(f"system:serviceaccount:{OPS}:batch", json.dumps(learned["flagged"]))
        # Nothing the locker wrote holds a Secret value, nor the Secret's key.
        self.assertNoSecretValue()
        type(self).proposal_ids = sorted(p["rule"]["id"] for p in learned["proposed"])
        type(self).proposals_before = learned["proposed"]

    def assertNoSecretValue(self):
        written = json.dumps(self.get("-n", LOCKER_NS, "configmaps")) + json.dumps(self.get("events", "-A"))
        for secret in (PASSWORD, NEW_PASSWORD):
            for text in (secret, base64.b64encode(secret.encode()).decode()):
                self.assertNotIn(text, written)
        self.assertNotIn("/data/password", json.dumps(self.get("-n", LOCKER_NS, "configmaps")))

    def test_2_accepted_rules_let_exactly_the_controllers_through_in_deny(self):
        ids = self.proposal_ids
        printed = self.plugin("learn", "accept", *ids, "-A", "--locker-namespace", LOCKER_NS)
        self.assertEqual(printed.returncode, 0, printed.stderr)
        self.assertIn("writers:", printed.stdout)
        self.assertEqual(self.get("-n", LOCKER_NS, "configmap", WRITERS).get("data") or {}, {},
                         "accept without --apply writes nothing")
        applied = self.plugin("learn", "accept", *ids, "-A", "--locker-namespace", LOCKER_NS, "--apply")
        self.assertEqual(applied.returncode, 0, applied.stderr)
        self.assertEqual(sorted(self.get("-n", LOCKER_NS, "configmap", WRITERS)["data"]), sorted(f"{i}.yaml" for i in ids))
        self.ok(self.k("-n", LOCKER_NS, "patch", "configmap", SWITCHES, "--type=merge", "-p", '{"data":{"mode":"deny"}}'))
        self.assertTrue(eventually(lambda: self.alice_flags("c").returncode != 0, 20), self.log())
        # In deny the reverter runs: the pod-less token's replicas (no rule gives them) go back
        # to the chart's, the configurer's mode (its rule's) stays.
        self.assertTrue(eventually(lambda: self.replicas() == 2, 30), self.log())
        self.assertEqual(self.mode(), "busy")
        # The controllers' writes go through, naming their rule, and stay.
        self.assertTrue(eventually(lambda: self.scale("scaler", 6).returncode == 0, 20), self.log())
        out = self.ok(self.set_mode("rush"))
        self.assertIn("writer rule", out.stderr)
        time.sleep(5)
        self.assertEqual((self.replicas(), self.mode()), (6, "rush"), self.log())
        # The plugin sees it as the reverter does: held by the scaler's rule, not drift.
        out = self.plugin("diff", RELEASE, "-n", NS, "--own-release", f"{LOCKER_NS}/{LOCKER}", "-o", "json")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        held = {(h["path"], h["rule"]) for d in json.loads(out.stdout)["differences"] for h in d["held"]}
        self.assertIn("/spec/replicas", {path for path, _ in held}, out.stdout)
        self.assertTrue({rule for _, rule in held} <= set(ids), held)
        # Everyone else, and the scaler elsewhere, are denied.
        for out in (self.alice_flags("d"), self.alice_password(), self.scale("batch", 4, manager="batch"),
                    self.as_account("scaler", "-n", NS, "patch", "deployment", f"{RELEASE}-web", "--type=merge",
                                    "-p", '{"spec":{"revisionHistoryLimit":9}}')):
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn("locked by Helm release", out.stderr)
        # A rules ConfigMap of the same name in a tenant's namespace gives nothing.
        tenant_rule = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": WRITERS, "namespace": NS},
                       "data": {"alice.yaml": "id: alice\nwriters: {users: [alice]}\nobjects: {kind: ConfigMap, names: [shop-settings]}\npaths: [/data]\nreason: mine\n"}}
        self.ok(self.k("--as=alice", "create", "-f", "-", input=json.dumps(tenant_rule)))
        time.sleep(2)
        self.assertNotEqual(self.alice_flags("e").returncode, 0)
        # A rule past its until stops matching: the same rule for alice, in the locker's own
        # ConfigMap, open for a few seconds.
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 8))
        rule = ("id: alice-flags\nwriters: {users: [alice]}\nobjects: {release: {namespace: shop, name: shop}, kind: ConfigMap, "
                f"names: [shop-settings]}}\npaths: [/data/flags]\nuntil: \"{until}\"\nreason: INC-1\n")
        self.ok(self.k("-n", LOCKER_NS, "patch", "configmap", WRITERS, "--type=merge",
                       "-p", json.dumps({"data": {"alice-flags.yaml": rule}})))
        self.assertTrue(eventually(lambda: self.alice_flags("f").returncode == 0, 8), self.log())
        time.sleep(max(0, 9 - (time.time() % 1)))
        self.assertTrue(eventually(lambda: self.alice_flags("g").returncode != 0, 10), self.log())
        # The admin's helm upgrade goes through after the controllers' writes, and sets the
        # chart's values (as Helm 3 would); the controllers may write again. Helm 4 applies
        # server-side: first the reverter hands what a rule gives back to Helm's entry.
        self.assertTrue(eventually(lambda: not self.owns("scaler", "deployment", f"{RELEASE}-web")
                                   and not self.owns("configurer", "configmap", f"{RELEASE}-settings"), 30), self.log())
        helm.Config(kubeconfig_path=self.plane.kubeconfig, namespace=NS).upgrade(self.chart, RELEASE, {"tag": "2"})
        self.assertEqual((self.replicas(), self.mode()), (2, "normal"))
        self.ok(self.scale("scaler", 7))
        self.ok(self.set_mode("calm"))
        self.assertGreaterEqual(self.locker.metric("helm_locker_writer_rule_uses_total") or 0, 4)
        self.assertNoSecretValue()

    def settled_learn(self):
        """`learn`'s answer once the locker has written what it learned (it flushes every 2 s, so
        test 2's last writes may still be in memory): two answers a flush apart that agree."""
        previous = self.learn()
        for _ in range(10):
            time.sleep(2.5)
            now = self.learn()
            if now == previous:
                return now
            previous = now
        self.fail("the learned evidence never settled")

    def test_3_proposals_are_the_same_after_the_leader_restarts(self):
        before = self.settled_learn()
        unlock(self.plane, self.locker, "learn-lock")
        type(self).start_locker()
        after = self.learn()
        self.assertEqual(after["proposed"], before["proposed"])
        self.assertEqual(after["notProposed"], before["notProposed"])


if __name__ == "__main__":
    unittest.main()
