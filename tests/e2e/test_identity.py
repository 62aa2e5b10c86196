"""Which object, which release (issue 15), on the real control plane: writes that reach a locked
object through another door than its own.

Chart charts/identity, installed by real Helm (Helm 4's Go SDK), one strict locker (no
reverter). For every door, the write that must be denied is, and leaves the object unchanged;
the legitimate writes through the same door still go through:

  1. another group or version serving the kind (discovered from the API server: on 1.20 the
     Ingress under networking.k8s.io/v1, v1beta1 and extensions/v1beta1, the HPA under
     autoscaling/v1, v2beta1, v2beta2; from 1.22 the Ingress has networking.k8s.io/v1 alone,
     and from 1.26 the HPA autoscaling/v1 and v2): the same change through each is denied, a
     free label through each is allowed;
  2. a cluster-scoped custom resource whose chart gives it a namespace (Helm ignores it);
  3. a custom resource's scale subresource, which writes its CRD's specReplicasPath (.spec.size);
  4. an eviction of the chart's bare Pod (it deletes the Pod), and namespaces/finalize on the
     chart's Namespace (it keeps the metadata it is sent);
  5. the HPA controller scaling the chart's Deployment through scale: never blocked;
  6. a pending `helm install --take-ownership` of an object no deployed release owns goes
     through; once deployed, that release locks it; two releases claiming one object show up
     in helm_locker_claim_conflicts;
  7. helm upgrade after all of it (from 1.22 the chart must leave the Deployment's replicas
     to the HPA, or the upgrade conflicts with the HPA controller's write through scale),
     then uninstall: the garbage collector removes the Deployment's dependents.
And who tried (issue 18): each denial is a Warning Event on the object naming the user; a
retry loop is one Event, a dry run none.
Run through scripts/e2e.sh, or alone:
  HELM_LOCKER_BIN="$(scripts/target-dir.sh)/debug/helm-locker" \
      .venv-e2e/bin/python -m unittest discover -s tests/e2e -p test_identity.py -v
(from the repository's root; scripts/target-dir.sh prints where cargo builds, CARGO_TARGET_DIR
included).
"""

import json
import os
import time
import unittest

from harness import DENIED, HERE, ControlPlane, Locker, eventually, register_webhook, release_secret, unregister_webhook

CHART = os.path.join(HERE, "charts", "identity")
NS = "identity"
NAME = "id"
VALUES = {"host": "shop.example.com", "replicas": 1, "minReplicas": 2, "size": 3}


def without_volatile(obj):
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata", {})
    for key in ("resourceVersion", "managedFields", "generation"):
        meta.pop(key, None)
    # autoscaling/v1 shows an HPA's status conditions and metrics as annotations, which the
    # HPA controller rewrites whenever they change (a read seconds later may differ).
    annotations = meta.get("annotations") or {}
    for key in [k for k in annotations if k.startswith("autoscaling.alpha.kubernetes.io/")]:
        del annotations[key]
    obj.pop("status", None)
    return obj


class Identity(unittest.TestCase):
    plane = None

    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        cls.locker = Locker(cls.plane, "identity", "--revert=false", "--lease-name", "identity").wait_ready()
        register_webhook(cls.plane, cls.locker, "identity")
        cls.helm = cls.plane.helm(NS)
        cls.helm.install(CHART, NAME, VALUES, create_namespace=True)
        # Locked once the locker has indexed the deployed release.
        locked = eventually(lambda: DENIED in cls.plane.kubectl(
            "label", "deployment", f"{NAME}-web", "-n", NS, "--overwrite", "--dry-run=server", "app=x").stderr, 20)
        assert locked, "the locker never locked the release"

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "identity")
        cls.locker.stop()
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def get(self, resource, name, namespace=NS):
        out = self.k("get", resource, name, *(("-n", namespace) if namespace else ()), "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def replicasets(self):
        out = self.k("get", "replicasets", "-n", NS, "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)["items"]

    def served(self, kind):
        """Every (group, version, plural) the API server serves `kind` under, from discovery."""
        found = []
        groups = json.loads(self.k("get", "--raw", "/apis").stdout)["groups"]
        paths = ["/api/v1"] + [f"/apis/{v['groupVersion']}" for g in groups for v in g["versions"]]
        for path in paths:
            resources = json.loads(self.k("get", "--raw", path).stdout)
            group, _, version = resources["groupVersion"].rpartition("/")
            for r in resources["resources"]:
                if r["kind"] == kind and "/" not in r["name"]:
                    found.append((group, version, r["name"]))
        return found

    def assert_denied(self, out, *fragments):
        self.assertIn(DENIED, out.stderr, out.stdout)
        for fragment in fragments:
            self.assertIn(fragment, out.stderr)

    # -- 1

    def test_1_the_same_change_through_every_served_version_is_denied(self):
        cases = [
            ("Ingress", f"{NAME}-web", [("replace", "/spec/rules/0/host", "evil.example.com")]),
            ("Ingress", f"{NAME}-web", [("replace", "/metadata/labels/app", "other")]),
            ("HorizontalPodAutoscaler", f"{NAME}-web", [("replace", "/spec/maxReplicas", 50)]),
            ("HorizontalPodAutoscaler", f"{NAME}-web",
             [("replace", "/metadata/labels/app.kubernetes.io~1managed-by", "kubectl")]),
        ]
        seen = {}
        for kind, name, ops in cases:
            versions = self.served(kind)
            seen[kind] = versions
            for group, version, plural in versions:
                resource = f"{plural}.{version}.{group}" if group else f"{plural}.{version}"
                with self.subTest(kind=kind, via=f"{group}/{version}", ops=ops):
                    before = without_volatile(self.get(resource, name))
                    patch = [{"op": op, "path": path, "value": value} for op, path, value in ops]
                    out = self.k("patch", resource, name, "-n", NS, "--type=json", "-p", json.dumps(patch))
                    self.assert_denied(out, f"{kind} {NS}/{name}")
                    self.assertEqual(without_volatile(self.get(resource, name)), before)
                    # A label the chart does not set is free through the same door.
                    out = self.k("label", resource, name, "-n", NS, "--overwrite",
                                 f"seen-via={(group or 'core').replace('.', '-')}-{version}")
                    self.assertEqual(out.returncode, 0, out.stderr)
        # The doors this cluster has: the HPA always has more than one (autoscaling/v1 beside
        # v2 or v2beta2), or the test proves nothing; the Ingress has three until 1.22 removed
        # networking.k8s.io/v1beta1 and extensions/v1beta1, then its own alone.
        self.assertGreaterEqual(len(seen["HorizontalPodAutoscaler"]), 2, seen)
        if self.plane.serves("networking.k8s.io/v1beta1"):
            self.assertGreaterEqual(len(seen["Ingress"]), 2, seen)
        else:
            self.assertEqual(seen["Ingress"], [("networking.k8s.io", "v1", "ingresses")], seen)

    # -- 2

    def test_2_a_cluster_scoped_custom_resource_is_locked_whatever_namespace_the_chart_gives(self):
        zone = self.get("zones.identity.example.com", f"{NAME}-eu", namespace=None)
        self.assertNotIn("namespace", zone["metadata"])
        out = self.k("patch", "zones.identity.example.com", f"{NAME}-eu", "--type=merge",
                     "-p", '{"spec":{"region":"us-east"}}')
        self.assert_denied(out, f"Zone {NAME}-eu", "/spec/region")
        out = self.k("delete", "zones.identity.example.com", f"{NAME}-eu", "--wait=false")
        self.assert_denied(out, "deleting it is not allowed")
        self.assertEqual(self.get("zones.identity.example.com", f"{NAME}-eu", namespace=None)["spec"]["region"],
                         "eu-west")

    # -- 3

    def test_3_a_custom_resources_scale_writes_its_spec_replicas_path(self):
        # The locker lists CRDs when the API server's schema changes (a few seconds after
        # install): until then it compares /spec/replicas, which this chart does not set.
        def denied():
            out = self.k("scale", "caches.identity.example.com", f"{NAME}-cache", "-n", NS,
                         "--replicas=5", "--dry-run=server")
            return DENIED in out.stderr and out.stderr
        message = eventually(denied, 30, 0.5)
        self.assertTrue(message, "a scale of the custom resource was never denied")
        self.assertIn("/spec/size is 3 in the chart, this request sets 5", message)
        out = self.k("scale", "caches.identity.example.com", f"{NAME}-cache", "-n", NS, "--replicas=5")
        self.assert_denied(out)
        self.assertEqual(self.get("caches.identity.example.com", f"{NAME}-cache")["spec"]["size"], 3)
        # The chart's own value through scale is no change.
        out = self.k("scale", "caches.identity.example.com", f"{NAME}-cache", "-n", NS, "--replicas=3")
        self.assertEqual(out.returncode, 0, out.stderr)

    # -- 4

    def test_4_evicting_the_charts_pod_is_a_delete(self):
        # policy/v1 where served (an Eviction in v1 is taken from 1.22; v1beta1 is gone from 1.25).
        policy = "policy/v1" if self.plane.serves("policy/v1") else "policy/v1beta1"
        eviction = {"apiVersion": policy, "kind": "Eviction",
                    "metadata": {"name": f"{NAME}-once", "namespace": NS}}
        path = os.path.join(self.plane.dir, "eviction.json")
        with open(path, "w") as f:
            json.dump(eviction, f)
        out = self.k("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{NAME}-once/eviction", "-f", path)
        self.assertIn("evicting it deletes it", out.stderr)
        pod = self.get("pod", f"{NAME}-once")
        self.assertNotIn("deletionTimestamp", pod["metadata"])
        # A Pod no release owns is evicted as before.
        out = self.k("run", "stray", "-n", NS, "--image=busybox:1.36", "--restart=Never")
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(path, "w") as f:
            json.dump(dict(eviction, metadata={"name": "stray", "namespace": NS}), f)
        out = self.k("create", "--raw", f"/api/v1/namespaces/{NS}/pods/stray/eviction", "-f", path)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_4b_finalize_of_the_charts_namespace_is_compared_like_a_write(self):
        zone = self.get("namespace", f"{NAME}-zone", namespace=None)
        path = os.path.join(self.plane.dir, "finalize.json")

        def finalize(labels):
            body = json.loads(json.dumps(zone))
            body["metadata"]["labels"] = dict(body["metadata"]["labels"], **labels)
            with open(path, "w") as f:
                json.dump(body, f)
            return self.k("replace", "--raw", f"/api/v1/namespaces/{NAME}-zone/finalize", "-f", path)

        out = finalize({"team": "mallory"})
        self.assert_denied(out, f"Namespace {NAME}-zone", "/metadata/labels/team")
        self.assertEqual(self.get("namespace", f"{NAME}-zone", namespace=None)["metadata"]["labels"]["team"],
                         "platform")
        out = finalize({"seen-via": "finalize"})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(self.get("namespace", f"{NAME}-zone", namespace=None)["metadata"]["labels"]["seen-via"],
                         "finalize")

    # -- 5

    def test_5_the_hpa_controller_scales_the_deployment_through_scale(self):
        # replicas 1 in the chart, minReplicas 2: the HPA controller (exempt, as every
        # kube-system controller) raises it through deployments/scale, metrics or not.
        scaled = eventually(lambda: self.get("deployment", f"{NAME}-web")["spec"]["replicas"] == 2, 60, 1)
        self.assertTrue(scaled, "the HPA controller never scaled the Deployment to its minReplicas")
        out = self.k("scale", "deployment", f"{NAME}-web", "-n", NS, "--replicas=4")
        self.assert_denied(out, "/spec/replicas")

    # -- 6

    def pending_release(self, name, objects, status="pending-install", as_user=None):
        secret = release_secret(name, NS, objects, status=status)
        out = self.k(*([f"--as={as_user}"] if as_user else []), "apply", "-f", "-", input=json.dumps(secret))
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_6_take_ownership_of_an_unowned_object_goes_through_and_conflicts_are_counted(self):
        out = self.k("create", "configmap", "orphan", "-n", NS, "--from-literal=greeting=hello")
        self.assertEqual(out.returncode, 0, out.stderr)
        orphan = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan"},
                  "data": {"greeting": "adopted"}}
        # The adopter also renders the chart's Ingress: two claims on one object.
        ingress = self.get("ingress", f"{NAME}-web")
        claimed_ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                           "metadata": {"name": f"{NAME}-web"}, "spec": ingress["spec"]}
        # Its author, bob, may write Secrets here but not delete them: he could not uninstall
        # the deployed release, so his release takes nothing over from it (an author who could
        # is a hand-over: test_flux_layout).
        self.k("-n", NS, "create", "role", "bob-secrets", "--verb=get,create,patch,update",
               "--resource=secrets")
        self.k("-n", NS, "create", "rolebinding", "bob-secrets", "--role=bob-secrets", "--user=bob")
        self.assertTrue(eventually(lambda: self.k("auth", "can-i", "--as=bob", "-n", NS, "create", "secrets")
                                   .stdout.strip() == "yes", 20))
        conflicts = self.locker.metric("helm_locker_claim_conflicts") or 0
        self.pending_release("adopter", [orphan, claimed_ingress], as_user="bob")
        counted = eventually(lambda: (self.locker.metric("helm_locker_claim_conflicts") or 0) > conflicts, 15)
        self.assertTrue(counted, "two releases claiming the Ingress were never counted")
        # What Helm does with --take-ownership: apply with its own release annotations.
        adopted = dict(orphan, metadata={"name": "orphan", "namespace": NS,
                                         "labels": {"app.kubernetes.io/managed-by": "Helm"},
                                         "annotations": {"meta.helm.sh/release-name": "adopter",
                                                         "meta.helm.sh/release-namespace": NS}})
        out = self.k("apply", "--server-side", "--force-conflicts", "--field-manager=python", "-f", "-",
                     input=json.dumps(adopted))
        self.assertEqual(out.returncode, 0, out.stderr)
        # The pending adopter does not open the Ingress the deployed release holds.
        out = self.k("annotate", "ingress", f"{NAME}-web", "-n", NS, "--overwrite",
                     "meta.helm.sh/release-name=adopter")
        self.assert_denied(out, f"Helm release {NS}/{NAME}")
        # Deployed, the adopter locks what it adopted.
        self.pending_release("adopter", [orphan], status="deployed", as_user="bob")
        locked = eventually(lambda: DENIED in self.k(
            "patch", "configmap", "orphan", "-n", NS, "--type=merge", "-p", '{"data":{"greeting":"x"}}').stderr, 15)
        self.assertTrue(locked, "the adopter's ConfigMap was never locked")
        self.k("delete", "secret", "sh.helm.release.v1.adopter.v1", "-n", NS)
        self.k("delete", "configmap", "orphan", "-n", NS)

    def test_6b_a_denial_is_an_event_on_the_object_and_a_retry_loop_is_one(self):
        target = f"{NAME}-cache"

        def events():
            out = self.k("get", "events", "-n", NS, "--field-selector",
                         f"reason=LockedFieldChangeDenied,involvedObject.name={target}", "-o", "json")
            self.assertEqual(out.returncode, 0, out.stderr)
            return [e for e in json.loads(out.stdout)["items"] if e["message"].startswith("mallory: ")]

        mallory = ("--as", "mallory", "--as-group", "system:masters")
        out = self.k("patch", "caches.identity.example.com", target, "-n", NS, "--type=merge",
                     "-p", '{"spec":{"engine":"memcached"}}', "--dry-run=server", *mallory)
        self.assert_denied(out)
        time.sleep(2)
        self.assertEqual(events(), [], "a dry run was recorded")
        for _ in range(5):
            out = self.k("patch", "caches.identity.example.com", target, "-n", NS, "--type=merge",
                         "-p", '{"spec":{"engine":"memcached"}}', *mallory)
            self.assert_denied(out)
        recorded = eventually(events, 15, 0.5)
        self.assertEqual(len(recorded), 1, recorded)
        event = recorded[0]
        self.assertEqual(event["type"], "Warning")
        self.assertEqual(event["involvedObject"]["kind"], "Cache")
        self.assertIn("mallory: Cache identity/id-cache is locked by Helm release identity/id", event["message"])
        self.assertIn("/spec/engine", event["message"])
        self.assertGreater(self.locker.metric("helm_locker_denials_total") or 0, 0)

    # -- 7

    def test_7_helm_upgrade_then_uninstall_and_the_garbage_collector_cleans_up(self):
        values = dict(VALUES, size=4, host="www.example.com")
        if self.plane.minor >= 22:
            # From 1.22 the API server records the HPA controller's write through `scale` in
            # managedFields (kube-controller-manager, subresource scale, owns .spec.replicas):
            # Helm's server-side upgrade of a chart that still sets replicas conflicts with it,
            # before any webhook is asked. The chart leaves replicas to the HPA then, as a chart
            # with an HPA should; on 1.20 Helm keeps owning them and the upgrade goes through.
            with self.assertRaises(Exception) as failed:
                self.helm.upgrade(CHART, NAME, values)
            self.assertIn('conflict with "kube-controller-manager" with subresource "scale"', str(failed.exception))
            self.assertIn(".spec.replicas", str(failed.exception))
            values["replicas"] = None
        self.helm.upgrade(CHART, NAME, values)
        self.assertEqual(self.get("caches.identity.example.com", f"{NAME}-cache")["spec"]["size"], 4)
        self.assertEqual(self.get("ingress", f"{NAME}-web")["spec"]["rules"][0]["host"], "www.example.com")
        self.assertTrue(eventually(lambda: self.replicasets(), 30, 0.5),
                        "the Deployment never got a ReplicaSet")
        self.helm.uninstall(NAME)
        gone = eventually(lambda: not self.replicasets(), 60, 0.5)
        self.assertTrue(gone, "the garbage collector never deleted the Deployment's ReplicaSets")
        out = self.k("get", "zones.identity.example.com", f"{NAME}-eu")
        self.assertIn("NotFound", out.stderr)


if __name__ == "__main__":
    unittest.main()
