"""Compared as the API server stores it, by asking it (issue 67), on a real control plane with
the locker under the chart's own ServiceAccount and RBAC (chart_rbac.py).

A chart installed with real Helm before the locker came has no author stamp: its objects are
held at what is live where they differ from the chart at first sight. The API server fills in
defaults the locker's own list lacks (a StatefulSet's volumeClaimTemplates item gets apiVersion,
kind, spec.volumeMode and status.phase; an env fieldRef gets apiVersion), so untouched objects
were held, an exempt user's later image change was never put back, and `kubectl locker diff`
reported drift on a fresh install. Now the reverter and the diff ask the API server (a dry-run
create of the chart's object under a generated name) and hold only where its answer differs from
live.

  1. Helm installs a Deployment (env from a fieldRef without apiVersion) and a StatefulSet (a
     volumeClaimTemplates item without apiVersion/kind/volumeMode). Before the locker starts,
     the Deployment's replicas are changed with kubectl (the control: a real out-of-band change).
  2. The locker starts (unknown author): only the Deployment is held, at /spec/replicas only;
     `helm_locker_held_objects` is 1; `kubectl locker diff` names /spec/replicas and nothing else.
  3. An exempt user changes both images: the reverter puts both back; replicas stays as it was.
  4. The admin's `helm upgrade` (which keeps the replicas) succeeds, and `kubectl locker diff`
     then finds no drift.

Runs on the newest Kubernetes only. From tests/e2e:
  KUBEBUILDER_ASSETS=/root/.cache/kube-testenv/unpacked/v1.36.2 \\
  HELM_LOCKER_BIN=<target>/debug/helm-locker .venv-e2e/bin/python -m unittest -v test_stored_form
"""

import os
import time
import unittest

from chart_rbac import bind, chart_rbac_env, locked
from harness import BIN, PlaneTest, ControlPlane, eventually, unregister_webhook, write_files

NS = "stored"
RELEASE = "st"
OPS = "ops"
HELD = "held at what is live"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: st\nversion: 0.1.0\n",
    "templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.replicas | default 1 }}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: {{ .Values.webImage | default "registry.example/web:1" }}
        env:
        - name: POD_NS
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
""",
    "templates/statefulset.yaml": """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-db
spec:
  serviceName: {{ .Release.Name }}-db
  replicas: 1
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: registry.example/db:1
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
""",
}


class StoredForm(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.locker = None
        try:
            k = cls.plane.kubectl
            assert k("create", "namespace", NS).returncode == 0
            bind(cls.plane, OPS, "cluster-admin", name="ops-admin")
            cls.chart = write_files("stored-chart-", CHART)
        except BaseException:
            cls.plane.down()
            raise

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "stored")
        if cls.locker:
            cls.locker.stop()
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-4000:]

    def held_lines(self):
        return [line for line in self.locker.log_text().splitlines() if HELD in line]

    def diff(self):
        return self.plane.run([BIN, "kubectl", "diff", "-n", NS])

    def reader_env(self):
        """The plane's environment as `reader`, who may read the release and its objects in NS
        and create nothing."""
        self.ok(self.k("-n", NS, "create", "role", "reader", "--verb=get,list,watch",
                       "--resource=secrets,deployments,statefulsets"))
        self.ok(self.k("-n", NS, "create", "rolebinding", "reader", "--role=reader", "--user=reader"))
        with open(self.plane.kubeconfig) as f:
            lines = f.read().splitlines()
        users = lines.index("users:")
        at = next(i for i in range(users, len(lines)) if lines[i].strip() == "user:")
        lines.insert(at + 1, "    as: reader")
        path = os.path.join(self.plane.dir, "kubeconfig-reader")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return dict(self.plane.env, KUBECONFIG=path)

    def image(self, kind, name):
        return self.get("-n", NS, kind, name)["spec"]["template"]["spec"]["containers"][0]["image"]

    def test_untouched_objects_are_not_held_and_drift_is_put_back(self):
        started = time.time()
        helm = self.plane.helm(NS)
        helm.install(self.chart, RELEASE, {})
        db = self.get("-n", NS, "statefulset", f"{RELEASE}-db")
        claim = db["spec"]["volumeClaimTemplates"][0]
        # What the API server filled in, and the chart does not say.
        self.assertEqual((claim.get("apiVersion"), claim.get("kind"), claim["spec"].get("volumeMode")),
                         ("v1", "PersistentVolumeClaim", "Filesystem"), claim)
        env = self.get("-n", NS, "deployment", f"{RELEASE}-web")["spec"]["template"]["spec"]["containers"][0]["env"]
        self.assertEqual(env[0]["valueFrom"]["fieldRef"].get("apiVersion"), "v1", env)
        # The control: a real change made before the locker came.
        self.ok(self.k("-n", NS, "scale", "deployment", f"{RELEASE}-web", "--replicas=2"))

        # The locker starts afterwards: the release has no author stamp.
        env = chart_rbac_env(self.plane)
        type(self).locker = self.locker = locked(self.plane, env, "stored", "--exempt-user", OPS)
        self.assertTrue(eventually(lambda: self.locker.metric("helm_locker_unknown_author_releases") == 1, 30),
                        self.log())
        # Only the Deployment is held, at its replicas only.
        self.assertTrue(eventually(lambda: self.held_lines(), 30), self.log())
        time.sleep(2)
        held = self.held_lines()
        self.assertEqual(self.locker.metric("helm_locker_held_objects"), 1, "\n".join(held) + self.log())
        self.assertEqual(len(held), 1, "\n".join(held))
        self.assertIn(f"{RELEASE}-web", held[0])
        self.assertIn("paths=/spec/replicas ", held[0] + " ")
        self.assertNotIn(f"{RELEASE}-db", "\n".join(held))

        # kubectl locker diff names the replicas and nothing the API server filled in.
        out = self.diff()
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("/spec/replicas: chart 1, live 2", out.stdout)
        for path in ("volumeClaimTemplates", "/env", "fieldRef", f"StatefulSet {NS}/{RELEASE}-db"):
            self.assertNotIn(path, out.stdout)
        self.assertNotIn("compared without the API server", out.stdout)
        # Credentials that may read but not create: compared locally, and said so.
        out = self.plane.run([BIN, "kubectl", "diff", "-n", NS], env=self.reader_env())
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn(f"StatefulSet {NS}/{RELEASE}-db (release {NS}/{RELEASE}), compared without the API server",
                      out.stdout)
        self.assertIn("/spec/volumeClaimTemplates", out.stdout)

        # An exempt user changes both images: both are put back, the held replicas stays.
        for kind, name, container in (("deployment", f"{RELEASE}-web", "web"),
                                      ("statefulset", f"{RELEASE}-db", "db")):
            self.ok(self.k(f"--as={OPS}", "-n", NS, "set", "image", f"{kind}/{name}", f"{container}=evil:6"))
        self.assertTrue(eventually(
            lambda: (self.image("deployment", f"{RELEASE}-web"), self.image("statefulset", f"{RELEASE}-db"))
            == ("registry.example/web:1", "registry.example/db:1"), 30), self.log())
        self.assertEqual(self.get("-n", NS, "deployment", f"{RELEASE}-web")["spec"]["replicas"], 2)

        # The admin's helm upgrade succeeds (Helm 4 applies server-side: it takes the replicas
        # kubectl set as they are, or conflicts with kubectl's scale).
        helm.upgrade(self.chart, RELEASE, {"webImage": "registry.example/web:2", "replicas": 2})
        self.assertTrue(eventually(lambda: self.image("deployment", f"{RELEASE}-web") == "registry.example/web:2", 10))
        # A known author now; nothing differs but what the API server fills in: no drift.
        out = self.diff()
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr + self.log())
        print(f"\n  {time.time() - started:.1f}s")


if __name__ == "__main__":
    unittest.main()
