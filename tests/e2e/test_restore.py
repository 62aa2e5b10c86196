"""Restores: a locked object that went missing, created again by someone other than Helm, on a
real control plane.

- On a release Helm 4 applies server-side, with no reverter, `kubectl create` of the chart's own
  content is denied. The API server makes the creator (`kubectl-create`) own every field it sets, and the
  next `helm upgrade` that changes one fails with a conflict: shown here by an exempt user, whose
  create goes through and whose restore breaks that upgrade. A server-side apply under Helm's
  own field manager is allowed, and the next upgrade succeeds. With the reverter running, the
  restore is allowed: the reverter hands the restorer's share of Helm's fields back to Helm.
- On a client-side (Helm 3 style) release there is no conflict to fear: a restore is compared
  with the chart, also through another version of the kind (an RBAC v1beta1 Role restored as
  v1, on 1.36 too where the manifest still says v1beta1 and the API server no longer serves it;
  until 1.22 an Ingress through `extensions`), and an Endpoints object by its sets of addresses
  and ports in any order (kube-apiserver 1.20 stores subsets as sent, it does not repack them).
- A restore is compared as the API server stores it: an Endpoints port's `protocol: TCP` filled in
  inside the atomic `subsets`, and `hostIPC: false`, an env var's `value: ""`, a probe's
  `initialDelaySeconds: 0` the API server leaves out, are the chart's values; another value is
  not. The same comparison decides what is held for a release of an unknown author: right after
  its install nothing is, drift of a container's memory limit is put back, and the next
  `helm upgrade` succeeds.
"""

import contextlib
import copy
import os
import json
import time
import unittest

from harness import (CHART, DENIED, ControlPlane, Locker, eventually, register_author_webhook, register_webhook,
                     release_secret, unregister_webhook)

ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "Role",
        "metadata": {"name": "reader", "namespace": "legacy"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}
ENDPOINTS = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "external", "namespace": "legacy"},
             "subsets": [{"addresses": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.1"}],
                          "ports": [{"name": "b", "port": 90, "protocol": "TCP"},
                                    {"name": "a", "port": 80, "protocol": "TCP"}]}]}
INGRESS = {"apiVersion": "networking.k8s.io/v1beta1", "kind": "Ingress",
           "metadata": {"name": "web", "namespace": "legacy"},
           "spec": {"ingressClassName": "nginx",
                    "rules": [{"host": "shop.example.com", "http": {"paths": [
                        {"path": "/", "pathType": "Prefix",
                         "backend": {"serviceName": "web", "servicePort": 80}}]}}]}}
# From 1.22 an Ingress is served as networking.k8s.io/v1 alone (its backend in another shape).
INGRESS_V1 = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
              "metadata": {"name": "web", "namespace": "legacy"},
              "spec": {"ingressClassName": "nginx",
                       "rules": [{"host": "shop.example.com", "http": {"paths": [
                           {"path": "/", "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}

# A chart's zero values the API server leaves out, and a port without its protocol.
AGENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "agent", "namespace": "zeros"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "agent"}},
                  "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                      "hostIPC": False, "hostNetwork": True,
                      "containers": [{"name": "agent", "image": "busybox:1.36", "args": ["sleep", "86400"],
                                      "env": [{"name": "HOST_IP", "value": "0.0.0.0"}, {"name": "EMPTY", "value": ""}],
                                      "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}],
                                      "livenessProbe": {"httpGet": {"path": "/", "port": 9100, "scheme": "HTTP"},
                                                        "initialDelaySeconds": 0, "periodSeconds": 10},
                                      "securityContext": {"readOnlyRootFilesystem": True,
                                                          "allowPrivilegeEscalation": False},
                                      "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m"}}}]}}}}
BARE_ENDPOINTS = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "bare", "namespace": "zeros"},
                  "subsets": [{"addresses": [{"ip": "10.0.0.5"}], "ports": [{"name": "http", "port": 80}]}]}
AGENT_TEMPLATE = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Release.Name }}-agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      hostIPC: false
      hostNetwork: true
      containers:
      - name: agent
        image: busybox:1.36
        args: [sleep, "86400"]
        env:
        - name: EMPTY
          value: ""
        ports:
        - {name: metrics, containerPort: 9100, protocol: TCP}
        livenessProbe:
          httpGet:
            httpHeaders:
            path: /
            port: 9100
          initialDelaySeconds: 0
        securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}
        resources:
          limits: {memory: {{ .Values.memory }}}
"""


def as_helm_wrote_it(obj, release="legacy"):
    """The object as Helm writes it: its manifest plus the release annotations and label."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = {"meta.helm.sh/release-name": release,
                                      "meta.helm.sh/release-namespace": obj["metadata"]["namespace"]}
    obj["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    return obj


def restorable(live):
    """What a backup tool keeps of a live object: no uid, version, timestamps or managedFields."""
    obj = copy.deepcopy(live)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation"):
        obj["metadata"].pop(key, None)
    obj.pop("status", None)
    return obj


class Restore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin",
                 "--user=ops").returncode == 0
        # No reverter: a deleted object stays missing until someone creates it.
        cls.locker = Locker(cls.plane, "restore", "--lease-name", "restore", "--exempt-user", "ops",
                            "--revert=false").wait_ready()
        register_webhook(cls.plane, cls.locker, "restore")

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "restore")
        cls.locker.stop()
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def ok(self, out):
        self.assertEqual(out.returncode, 0, out.stderr)
        return out

    def create(self, obj, *args):
        return self.k("create", *args, "-f", "-", input=json.dumps(obj))

    def test_a_server_side_release_is_restored_only_under_helms_field_manager(self):
        release = self.plane.helm("rs")
        release.install(CHART, "rs", {"greeting": "hello"}, create_namespace=True)
        self.assertTrue(eventually(lambda: self.k("-n", "rs", "scale", "--dry-run=server", "deploy", "rs-web",
                                                  "--replicas=7").returncode != 0, 15, 0.2), "never locked")
        live = json.loads(self.ok(self.k("-n", "rs", "get", "configmap", "rs-config", "-o", "json",
                                         "--show-managed-fields")).stdout)
        helm_manager = next(e["manager"] for e in live["metadata"]["managedFields"] if e["operation"] == "Apply")
        backup = restorable(live)
        self.ok(self.k("--as=ops", "-n", "rs", "delete", "configmap", "rs-config"))

        # kubectl create of the very content Helm wrote: kubectl-create would co-own it.
        out = self.create(backup)
        self.assertNotEqual(out.returncode, 0, "kubectl create of a server-side release's object was allowed")
        self.assertIn(DENIED, out.stderr)
        self.assertIn('creating it as field manager "kubectl-create"', out.stderr)
        self.assertIn("/data/greeting", out.stderr)

        # Under Helm's own field manager, as a server-side apply: allowed, and Helm's next
        # upgrade changes the restored field without a conflict.
        self.ok(self.k("apply", "--server-side", f"--field-manager={helm_manager}", "-f", "-",
                       input=json.dumps(backup)))
        release.upgrade(CHART, "rs", {"greeting": "bonjour"})
        self.assertEqual(self.k("-n", "rs", "get", "configmap", "rs-config", "-o",
                                "jsonpath={.data.greeting}").stdout, "bonjour")

        # Why the denial: an exempt user's kubectl create goes through, and the next upgrade
        # that changes the field fails with the API server's conflict.
        self.ok(self.k("--as=ops", "-n", "rs", "delete", "configmap", "rs-config"))
        again = restorable(self.plane.get_json("configmap", "-n", "rs", "rs-config") or live)
        again["data"]["greeting"] = "bonjour"
        self.ok(self.create(again, "--as=ops"))
        with self.assertRaises(Exception) as failed:
            release.upgrade(CHART, "rs", {"greeting": "hola"})
        self.assertIn('conflict with "kubectl-create"', str(failed.exception))

    @contextlib.contextmanager
    def reverting(self):
        """A locker with the reverter (recreation off: a deleted object stays missing) in place
        of the class's."""
        locker = Locker(self.plane, "restore-revert", "--lease-name", "restore-revert",
                        "--exempt-user", "ops", "--recreate=false").wait_ready()
        unregister_webhook(self.plane, "restore")
        register_webhook(self.plane, locker, "restore-revert")
        try:
            yield locker
        finally:
            unregister_webhook(self.plane, "restore-revert")
            locker.stop()
            register_webhook(self.plane, self.locker, "restore")

    def test_a_restore_of_what_helm_wrote_is_allowed_when_the_reverter_hands_it_back(self):
        """With the reverter running, `kubectl apply` of the object as Helm wrote it is allowed:
        the reverter hands the fields the restorer co-owns back to Helm's field manager (the
        API server keeps managedFields as a patch writes them), so Helm's next upgrade that
        changes them succeeds."""
        with self.reverting() as reverting:
            release = self.plane.helm("rr")
            release.install(CHART, "rr", {"greeting": "hello"}, create_namespace=True)
            self.assertTrue(eventually(lambda: self.k("-n", "rr", "scale", "--dry-run=server", "deploy", "rr-web",
                                                      "--replicas=7").returncode != 0, 15, 0.2), "never locked")
            live = json.loads(self.ok(self.k("-n", "rr", "get", "configmap", "rr-config", "-o", "json",
                                             "--show-managed-fields")).stdout)
            helm_manager = next(e["manager"] for e in live["metadata"]["managedFields"] if e["operation"] == "Apply")
            backup = restorable(live)
            self.ok(self.k("--as=ops", "-n", "rr", "delete", "configmap", "rr-config"))

            # Another value than the chart's: still denied.
            other = copy.deepcopy(backup)
            other["data"]["greeting"] = "hola"
            out = self.k("apply", "-f", "-", input=json.dumps(other))
            self.assertNotEqual(out.returncode, 0, "a restore with another value was allowed")
            self.assertIn("/data/greeting", out.stderr)

            # The chart's own content, Helm's annotations and labels kept: allowed.
            self.ok(self.k("apply", "-f", "-", input=json.dumps(backup)))

            def owners_of_greeting():
                obj = json.loads(self.k("-n", "rr", "get", "configmap", "rr-config", "-o", "json",
                                        "--show-managed-fields").stdout or "{}")
                return sorted(e["manager"] for e in obj.get("metadata", {}).get("managedFields", [])
                              if "f:greeting" in e.get("fieldsV1", {}).get("f:data", {}))

            self.assertTrue(eventually(lambda: owners_of_greeting() == [helm_manager], 30, 0.5),
                            f"the restorer still co-owns /data/greeting: {owners_of_greeting()} "
                            + self.k("-n", "rr", "get", "configmap", "rr-config", "-o", "json",
                                     "--show-managed-fields").stdout
                            + "".join(l for l in reverting.log_text().splitlines(True) if "rr-config" in l))
            # What was only the restorer's stays its own.
            restored = self.plane.get_json("configmap", "-n", "rr", "rr-config", "--show-managed-fields")
            client_side = [e for e in restored["metadata"]["managedFields"]
                           if e["manager"] == "kubectl-client-side-apply"]
            self.assertTrue(client_side and "f:kubectl.kubernetes.io/last-applied-configuration"
                            in client_side[0]["fieldsV1"]["f:metadata"]["f:annotations"], restored)
            self.assertIn("handed back", self.k("-n", "rr", "get", "events", "-o", "json").stdout)

            release.upgrade(CHART, "rr", {"greeting": "bonjour"})
            self.assertEqual(self.k("-n", "rr", "get", "configmap", "rr-config", "-o",
                                    "jsonpath={.data.greeting}").stdout, "bonjour")

    def test_a_server_side_releases_endpoints_in_another_order_are_handed_back_to_helm(self):
        """Endpoints hold sets that kube-apiserver stores in the order sent. On a release Helm
        applies server-side, a write of the chart's addresses in another order is allowed while
        the reverter runs: the writer's manager takes `subsets` (an atomic list) from Helm, the
        reverter hands it back, and Helm's next upgrade that changes the addresses succeeds."""
        chart = os.path.join(os.path.dirname(CHART), "external")
        with self.reverting():
            release = self.plane.helm("ext")
            release.install(chart, "ext", {}, create_namespace=True)
            stored = self.plane.get_json("endpoints", "-n", "ext", "ext-backend", "--show-managed-fields")
            helm_manager = next(e["manager"] for e in stored["metadata"]["managedFields"]
                                if e["operation"] == "Apply")
            self.assertEqual([a["ip"] for a in stored["subsets"][0]["addresses"]], ["10.0.0.9", "10.0.0.1"],
                             "the API server reordered the chart's addresses")
            self.assertTrue(eventually(lambda: self.k("-n", "ext", "label", "--dry-run=server", "--overwrite",
                                                      "endpoints", "ext-backend", "app.kubernetes.io/name=me"
                                                      ).returncode != 0, 15, 0.2), "never locked")
            swapped = restorable(stored)
            swapped["subsets"][0]["addresses"].reverse()
            swapped["subsets"][0]["ports"].reverse()
            more = copy.deepcopy(swapped)
            more["subsets"][0]["addresses"].append({"ip": "10.0.0.7"})
            out = self.k("replace", "-f", "-", input=json.dumps(more))
            self.assertNotEqual(out.returncode, 0, "another address was allowed")
            self.assertIn("/subsets", out.stderr)
            self.ok(self.k("replace", "-f", "-", input=json.dumps(swapped)))

            def subsets_owners():
                obj = self.plane.get_json("endpoints", "-n", "ext", "ext-backend", "--show-managed-fields") or {}
                return sorted(e["manager"] for e in obj.get("metadata", {}).get("managedFields", [])
                              if "f:subsets" in e.get("fieldsV1", {}))

            self.assertTrue(eventually(lambda: subsets_owners() == [helm_manager], 30, 0.5),
                            f"subsets owned by {subsets_owners()}")
            release.upgrade(chart, "ext", {"addresses": ["10.0.0.2", "10.0.0.9"]})
            now = self.plane.get_json("endpoints", "-n", "ext", "ext-backend")
            self.assertEqual([a["ip"] for a in now["subsets"][0]["addresses"]], ["10.0.0.2", "10.0.0.9"])

    def test_a_client_side_release_is_restored_by_content_across_versions_and_orders(self):
        self.ok(self.k("create", "namespace", "legacy"))
        # Endpoints of an external service come with their Service (no selector): without it the
        # controller manager's endpoints controller deletes them as left over whenever it
        # (re)starts, which raced this test on a loaded machine.
        self.ok(self.k("-n", "legacy", "create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "external", "namespace": "legacy"},
            "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 90}]}})))
        # Until 1.22 the chart's Role and Ingress are written in the versions its manifest
        # names. From 1.22 neither is served: the manifest keeps the Role as v1beta1 (a release
        # made before the cluster's upgrade, until `helm mapkubeapis` rewrites it) and the Role
        # lives as v1; the Ingress is networking.k8s.io/v1 in both.
        legacy_apis = self.plane.serves("rbac.authorization.k8s.io/v1beta1")
        ingress = INGRESS if legacy_apis else INGRESS_V1
        for obj in (ROLE, ENDPOINTS, ingress):
            written = as_helm_wrote_it(obj)
            if not legacy_apis and obj is ROLE:
                written["apiVersion"] = "rbac.authorization.k8s.io/v1"
            self.ok(self.create(written))
        self.ok(self.create(release_secret("legacy", "legacy", [ROLE, ENDPOINTS, ingress])))
        self.assertTrue(eventually(lambda: self.k("-n", "legacy", "label", "--dry-run=server", "--overwrite",
                                                  "endpoints", "external", "app.kubernetes.io/managed-by=me"
                                                  ).returncode != 0, 15, 0.2), "never locked")
        stored = self.plane.get_json("endpoints", "-n", "legacy", "external")
        self.assertEqual([a["ip"] for a in stored["subsets"][0]["addresses"]], ["10.0.0.9", "10.0.0.1"],
                         "the API server reordered the addresses")

        def gone(kind, name):
            self.ok(self.k("--as=ops", "-n", "legacy", "delete", kind, name))

        # A Role the chart writes as rbac v1beta1, restored as v1: same rules, allowed.
        gone("role", "reader")
        as_v1 = as_helm_wrote_it(ROLE)
        as_v1["apiVersion"] = "rbac.authorization.k8s.io/v1"
        wider = copy.deepcopy(as_v1)
        wider["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
        out = self.create(wider)
        self.assertNotEqual(out.returncode, 0, "a wider Role was restored")
        self.assertIn(DENIED, out.stderr)
        self.assertIn("/rules", out.stderr)
        self.ok(self.create(as_v1))

        # Endpoints hold sets: another address is denied; the same addresses and ports in
        # another order are allowed, and stored in that order (Helm 3's next upgrade replaces
        # them, it never conflicts).
        gone("endpoints", "external")
        more = restorable(stored)
        more["subsets"][0]["addresses"].append({"ip": "10.0.0.7"})
        out = self.create(more)
        self.assertNotEqual(out.returncode, 0, "Endpoints with another address were restored")
        self.assertIn("/subsets", out.stderr)
        swapped = restorable(stored)
        swapped["subsets"][0]["addresses"].reverse()
        swapped["subsets"][0]["ports"].reverse()
        self.ok(self.create(swapped))
        restored = self.plane.get_json("endpoints", "-n", "legacy", "external")
        self.assertEqual([a["ip"] for a in restored["subsets"][0]["addresses"]], ["10.0.0.1", "10.0.0.9"])

        # The Ingress through `extensions/v1beta1` until 1.22 (same paths), through its one
        # version from 1.22: allowed; another class: denied.
        gone("ingress", "web")
        restored = as_helm_wrote_it(ingress)
        if legacy_apis:
            restored["apiVersion"] = "extensions/v1beta1"
        other_class = copy.deepcopy(restored)
        other_class["spec"]["ingressClassName"] = "other"
        out = self.create(other_class)
        self.assertNotEqual(out.returncode, 0, "an Ingress of another class was restored")
        self.assertIn("/spec/ingressClassName", out.stderr)
        self.ok(self.create(restored))

    def test_b_a_restore_as_the_api_server_stores_it_is_the_charts(self):
        """The chart's objects carry what the API server does not store as written: a port
        without its protocol, `hostIPC: false`, an env var's `value: ""`, a probe's
        `initialDelaySeconds: 0`. Restored from what the API server stored (a backup tool's
        copy), or from the manifest's text with Helm's annotations: allowed. Another value:
        denied."""
        self.ok(self.k("create", "namespace", "zeros"))
        self.ok(self.k("-n", "zeros", "create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "bare", "namespace": "zeros"},
            "spec": {"ports": [{"name": "http", "port": 80}]}})))
        for obj in (AGENT, BARE_ENDPOINTS):
            self.ok(self.create(as_helm_wrote_it(obj, "zeros")))
        secret = release_secret("zeros", "zeros", [AGENT, BARE_ENDPOINTS])
        self.ok(self.create(secret))
        self.assertTrue(eventually(lambda: self.k("-n", "zeros", "label", "--dry-run=server", "--overwrite",
                                                  "endpoints", "bare", "app.kubernetes.io/managed-by=me"
                                                  ).returncode != 0, 15, 0.2), "never locked")
        # Control: what the API server stored is not what the chart says.
        endpoints = self.plane.get_json("endpoints", "-n", "zeros", "bare")
        self.assertEqual(endpoints["subsets"][0]["ports"], [{"name": "http", "port": 80, "protocol": "TCP"}])
        agent = self.plane.get_json("deploy", "-n", "zeros", "agent")
        pod = agent["spec"]["template"]["spec"]
        self.assertNotIn("hostIPC", pod)
        self.assertEqual(pod["containers"][0]["env"][1], {"name": "EMPTY"})
        self.assertNotIn("initialDelaySeconds", pod["containers"][0]["livenessProbe"])

        def gone(kind, name):
            self.ok(self.k("--as=ops", "-n", "zeros", "delete", kind, name))

        # The Endpoints as a backup tool stored them: allowed; with another protocol: denied.
        gone("endpoints", "bare")
        udp = restorable(endpoints)
        udp["subsets"][0]["ports"][0]["protocol"] = "UDP"
        out = self.create(udp)
        self.assertNotEqual(out.returncode, 0, "Endpoints with another protocol were restored")
        self.assertIn("/subsets", out.stderr)
        self.ok(self.create(restorable(endpoints)))

        # The Deployment from the manifest's text (`helm get manifest`, Helm's annotations
        # kept): allowed; with another memory limit or `hostIPC: true`: denied.
        gone("deploy", "agent")
        text = json.dumps(as_helm_wrote_it(AGENT, "zeros"))
        self.assertIn('"value": ""', text)
        for pointer, value in (("/resources/limits/memory", "1Gi"), ("/env/1/value", "set")):
            other = as_helm_wrote_it(AGENT, "zeros")
            container = other["spec"]["template"]["spec"]["containers"][0]
            field = pointer.split("/")[1:]
            target = container
            for key in field[:-1]:
                target = target[int(key)] if key.isdigit() else target[key]
            target[field[-1]] = value
            out = self.k("apply", "-f", "-", input=json.dumps(other))
            self.assertNotEqual(out.returncode, 0, f"a restore with {pointer} {value} was allowed")
            self.assertIn(f"/spec/template/spec/containers/0{pointer}", out.stderr)
        other = as_helm_wrote_it(AGENT, "zeros")
        other["spec"]["template"]["spec"]["hostIPC"] = True
        out = self.k("apply", "-f", "-", input=json.dumps(other))
        self.assertNotEqual(out.returncode, 0, "a restore with hostIPC: true was allowed")
        self.assertIn("/spec/template/spec/hostIPC", out.stderr)
        self.ok(self.k("apply", "-f", "-", input=text))
        # And from what the API server stored.
        gone("deploy", "agent")
        self.ok(self.create(restorable(agent)))

    def test_b_an_unknown_authors_release_is_held_only_where_it_really_differs(self):
        """A release installed while the locker runs, with no author stamp (no author webhook
        here): its DaemonSet, live as the API server stored it, agrees with its revision, so
        nothing is held; drift of a container's memory limit is put back, and the next
        `helm upgrade` succeeds."""
        chart = os.path.join(self.plane.dir, "zeros-chart")
        os.makedirs(os.path.join(chart, "templates"), exist_ok=True)
        with open(os.path.join(chart, "Chart.yaml"), "w") as f:
            f.write("apiVersion: v2\nname: zeros\nversion: 1.0.0\n")
        with open(os.path.join(chart, "values.yaml"), "w") as f:
            f.write("memory: 64Mi\n")
        with open(os.path.join(chart, "templates", "agent.yaml"), "w") as f:
            f.write(AGENT_TEMPLATE)
        with self.reverting() as reverting:
            # No author webhook: the install gets no stamp.
            for locker in (self.locker, reverting):
                locker.unregister_author_webhook()
            self.addCleanup(lambda: (register_author_webhook(self.plane, self.locker),
                                     setattr(self.locker, "stamping", True)))
            time.sleep(2)
            release = self.plane.helm("unknown")
            release.install(chart, "un", {}, create_namespace=True)
            secret = self.plane.get_json("secret", "-n", "unknown", "sh.helm.release.v1.un.v1")
            self.assertNotIn("helm-locker.io/author-proof", secret["metadata"].get("annotations") or {})
            self.assertTrue(eventually(lambda: self.k("-n", "unknown", "label", "--dry-run=server", "--overwrite",
                                                      "daemonset", "un-agent", "app.kubernetes.io/managed-by=me"
                                                      ).returncode != 0, 15, 0.2), "never locked")

            def memory():
                live = self.plane.get_json("daemonset", "-n", "unknown", "un-agent")
                return live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]

            self.ok(self.k("--as=ops", "-n", "unknown", "patch", "daemonset", "un-agent", "--type=json", "-p",
                           json.dumps([{"op": "replace", "value": "1Gi",
                                        "path": "/spec/template/spec/containers/0/resources/limits/memory"}])))
            self.assertTrue(eventually(lambda: memory() == "64Mi", 30, 0.5),
                            f"the memory limit was never put back\n{reverting.log_text()[-3000:]}")
            held = [line for line in reverting.log_text().splitlines()
                    if "un-agent" in line and "held at what is live" in line]
            self.assertEqual(held, [])
            release.upgrade(chart, "un", {"memory": "96Mi"})
            self.assertEqual(memory(), "96Mi")


if __name__ == "__main__":
    unittest.main()
