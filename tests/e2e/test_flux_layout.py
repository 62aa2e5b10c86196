"""Issue 61, item 1: Flux's layout, on a real control plane, with the locker run as the chart runs
it (its ServiceAccount and the chart's rendered RBAC: tests/e2e/chart_rbac.py).

A HelmRelease in `flux-system` with `spec.targetNamespace: apps` and no `storageNamespace` keeps
its release Secrets in `flux-system` while the release (and every object it renders) is in
`apps`; helm-controller installs it as `<targetNamespace>-<name>`. The Helm SDK the suite drives
cannot store a release outside its namespace, so the layout is built as Flux leaves it: the
release installed into `apps` by real Helm, then its Secret written into `flux-system` by
helm-controller's ServiceAccount (which the author webhook stamps), and removed from `apps`.

1. The release is locked where its objects are (the denial names the release and where it is
   stored), its drift is reverted, and Flux's upgrade (a pending revision written by
   helm-controller, then its writes) goes through and is locked at the new revision after; a
   pending revision written there by a tenant who may not write in `apps` opens nothing.
2. A tenant who may write Secrets in `flux-system` (and nothing in `apps`) writes a release of
   `apps` there claiming an object of `apps`: it locks nothing and the reverter writes nothing
   of it; the same Secret written by helm-controller (the control) does lock.
3. Flux's own writes outside a Helm action, as helm-controller's source makes them
   (internal/action/diff.go): drift detection's server-side apply of the whole chart with
   `dryRun`, on a release the Helm CLI installed (Helm's entry is another manager's), is allowed
   (stored, the same apply would make helm-controller a co-owner: denied, the control); drift
   correction's RFC 6902 patch back to the chart's value and its CREATE of a deleted object are
   allowed, a patch to another value is not; with `--revert=false` the CREATE of a server-side
   release's object is denied (its creator would co-own the chart's fields and the next upgrade
   would conflict). Remediation: a rollback (`pending-rollback`) opens the release and a stale
   pending revision that Flux marks `failed` locks it again.
4. Hand-over: Flux installing `apps-cli2` (pending-install, helm-controller's) takes over the
   objects the Helm CLI's deployed `cli2` holds, its author being able to uninstall `cli2`; alice,
   who may write in `apps` but not in `team`, cannot take over an object of `team/ops` (the
   control: denied as before).

    HELM_LOCKER_BIN=target/debug/helm-locker .venv-e2e/bin/python -m unittest -v test_flux_layout
"""

import base64
import gzip
import json
import os
import tempfile
import time
import unittest

from chart_rbac import chart_locker, chart_rbac_env
from harness import PlaneTest, ControlPlane, eventually, register_webhook, unregister_webhook

FLUX = "system:serviceaccount:flux-system:helm-controller"
# Writes drift by hand; exempt at admission (--exempt-user ops).
OPS = "ops"
RELEASE = "apps-podinfo"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: podinfo\nversion: 0.1.0\n",
    "templates/settings.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  {{- with .Values.namespace }}
  namespace: {{ . }}
  {{- end }}
data:
  colour: {{ .Values.colour | default "blue" | quote }}
""",
}


def encode(release):
    payload = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return base64.b64encode(payload).decode()


def decode(secret):
    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))


def release_secret(namespace, body):
    name, revision, status = body["name"], body["version"], body["info"]["status"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": f"sh.helm.release.v1.{name}.v{revision}", "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": status,
                                    "version": str(revision)}},
            "data": {"release": encode(body)}}


class FluxLayout(PlaneTest):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        for ns in ("apps", "flux-system", "team"):
            assert k("create", "namespace", ns).returncode == 0
        grants = [
            ("create", "clusterrolebinding", "flux-helm-controller", "--clusterrole=cluster-admin",
             "--serviceaccount=flux-system:helm-controller"),
            ("create", "clusterrolebinding", "ops-admin", "--clusterrole=cluster-admin", f"--user={OPS}"),
            ("-n", "apps", "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice"),
            # The tenant: Secrets in the storage namespace, nothing in apps.
            ("-n", "flux-system", "create", "rolebinding", "mallory-edit", "--clusterrole=edit",
             "--user=mallory"),
        ]
        for args in grants:
            out = k(*args)
            assert out.returncode == 0, out.stderr
        cls.chart = tempfile.mkdtemp(prefix="flux-chart-")
        for path, text in CHART.items():
            os.makedirs(os.path.dirname(os.path.join(cls.chart, path)), exist_ok=True)
            with open(os.path.join(cls.chart, path), "w") as f:
                f.write(text)
        cls.env = chart_rbac_env(cls.plane)
        cls.locker = chart_locker(cls.plane, cls.env, "flux", "--exempt-user", OPS)
        cls.locker.wait_ready()
        assert eventually(lambda: cls.locker.metric("helm_locker_leader") == 1, 30), "never became leader"
        register_webhook(cls.plane, cls.locker, "flux")
        assert eventually(lambda: cls.can_i_as("mallory", "create", "secrets", "-n", "flux-system") == "yes", 20)
        assert eventually(lambda: cls.can_i_as("alice", "patch", "configmaps", "-n", "apps") == "yes", 20)

    @classmethod
    def tearDownClass(cls):
        unregister_webhook(cls.plane, "flux")
        cls.locker.stop()
        cls.plane.down()

    def log(self):
        return self.locker.log_text()[-4000:]

    def colour(self, name=f"{RELEASE}-settings"):
        return (self.get("-n", "apps", "configmap", name) or {}).get("data", {}).get("colour")

    def patch_colour(self, user, colour, name=f"{RELEASE}-settings", dry_run=False):
        return self.k(f"--as={user}", "-n", "apps", "patch", "configmap", name, "--type=merge",
                      "-p", json.dumps({"data": {"colour": colour}}), *(["--dry-run=server"] if dry_run else []))

    def denied(self, user, name=f"{RELEASE}-settings", expect=""):
        """The webhook's denial of `user`'s patch, once it comes (a server-side dry run, which
        admission sees and nothing stores), or None."""
        return eventually(lambda: (lambda out: out if out.returncode != 0 and expect in out.stderr else None)(
            self.patch_colour(user, "red", name, dry_run=True)), 20)

    def write(self, user, namespace, body, replace=False):
        verb = "replace" if replace else "create"
        return self.ok(self.k(f"--as={user}", "-n", namespace, verb, "-f", "-",
                              input=json.dumps(release_secret(namespace, body))))

    def test_1_a_release_stored_in_flux_system_locks_and_reverts_its_objects_in_apps(self):
        helm = self.plane.helm("apps")
        helm.install(self.chart, RELEASE, {})
        secret = self.get("-n", "apps", "secret", f"sh.helm.release.v1.{RELEASE}.v1")
        body = decode(secret)
        self.assertEqual(body["namespace"], "apps")
        # As Flux leaves it: the release's Secret in flux-system, written by helm-controller.
        self.write(FLUX, "flux-system", body)
        self.ok(self.k("-n", "apps", "delete", "secret", f"sh.helm.release.v1.{RELEASE}.v1"))
        stored = self.get("-n", "flux-system", "secret", f"sh.helm.release.v1.{RELEASE}.v1")
        self.assertEqual(stored["metadata"]["annotations"]["helm-locker.io/author"].count("helm-controller"), 1)

        # alice may patch ConfigMaps in apps (the control): the lock is what denies her.
        self.assertTrue(self.denied("alice"), self.log())
        denied = self.patch_colour("alice", "red")
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn(f"locked by Helm release apps/{RELEASE} (stored in flux-system)", denied.stderr)
        self.assertEqual(self.colour(), "blue")

        # Drift that got past the webhook (an exempt user) is reverted.
        self.ok(self.patch_colour(OPS, "green"))
        self.assertTrue(eventually(lambda: self.colour() == "blue", 30), self.log())

        # Flux's upgrade: helm-controller writes a pending revision, then the objects, then
        # marks it deployed and the previous one superseded (Helm's order of writes).
        upgraded = json.loads(json.dumps(body))
        upgraded["version"] = 2
        upgraded["info"]["status"] = "pending-upgrade"
        upgraded["manifest"] = body["manifest"].replace('"blue"', '"purple"')
        self.assertIn('"purple"', upgraded["manifest"])
        self.write(FLUX, "flux-system", upgraded)
        written = eventually(lambda: (lambda out: out if out.returncode == 0 else None)(
            self.patch_colour(FLUX, "purple")), 20)
        self.assertTrue(written, self.log())
        upgraded["info"]["status"] = "deployed"
        self.write(FLUX, "flux-system", upgraded, replace=True)
        body["info"]["status"] = "superseded"
        self.write(FLUX, "flux-system", body, replace=True)
        # Locked at the new revision: alice is denied, drift goes back to purple.
        self.assertTrue(self.denied("alice", expect="revision 2"), self.log())
        self.assertNotEqual(self.patch_colour("alice", "red").returncode, 0)
        self.ok(self.patch_colour(OPS, "green"))
        self.assertTrue(eventually(lambda: self.colour() == "purple", 30), self.log())

        # mallory may write Secrets in flux-system, not in apps: her pending revision 3 (which
        # opened the release when helm-controller wrote one) opens nothing, neither in the
        # index nor in the fresh read before a denial.
        pending = json.loads(json.dumps(upgraded))
        pending["version"] = 3
        pending["info"]["status"] = "pending-upgrade"
        before = self.locker.metric("helm_locker_foreign_release_secrets_total") or 0
        self.write("mallory", "flux-system", pending)
        self.assertTrue(eventually(
            lambda: (self.locker.metric("helm_locker_foreign_release_secrets_total") or 0) > before, 20), self.log())
        time.sleep(1)
        denied = self.patch_colour("alice", "red")
        self.assertNotEqual(denied.returncode, 0, self.log())
        self.assertIn("revision 2, deployed", denied.stderr)
        self.assertEqual(self.colour(), "purple")

    def test_2_a_tenants_secret_in_flux_system_locks_and_writes_nothing(self):
        # An object of apps that carries the annotations of a release `apps-shared` (real
        # Helm's, its release Secret then removed), its live colour blue, the release's black:
        # what a release of that name stored anywhere would lock and put back.
        self.plane.helm("apps").install(self.chart, "apps-shared", {"colour": "black"})
        secret = "sh.helm.release.v1.apps-shared.v1"
        claim = decode(self.get("-n", "apps", "secret", secret))
        self.ok(self.k("-n", "apps", "delete", "secret", secret))
        shared = "apps-shared-settings"
        self.ok(self.patch_colour(OPS, "blue", shared))
        self.assertEqual(self.can_i_as("mallory", "create", "secrets", "-n", "apps"), "no")
        self.assertEqual(self.can_i_as("mallory", "patch", "configmaps", "-n", "apps"), "no")

        # Control: the same claim written by helm-controller, who may create Secrets in apps,
        # locks the object (and the reverter follows it).
        self.write(FLUX, "flux-system", claim)
        denied = self.denied("alice", shared)
        self.assertTrue(denied, self.log())
        self.assertIn("apps/apps-shared (stored in flux-system)", denied.stderr)
        self.ok(self.patch_colour(OPS, "green", shared))
        self.assertTrue(eventually(lambda: self.colour(shared) == "black", 30), self.log())
        self.ok(self.k("-n", "flux-system", "delete", "secret", "sh.helm.release.v1.apps-shared.v1"))
        self.ok(self.patch_colour(OPS, "blue", shared))
        self.assertTrue(eventually(lambda: self.patch_colour("alice", "blue", shared, dry_run=True).returncode == 0, 20),
                        self.log())

        # mallory writes the same claim: her Secret is refused, reported on it, and counted.
        before = self.locker.metric("helm_locker_foreign_release_secrets_total") or 0
        self.write("mallory", "flux-system", claim)
        self.assertTrue(eventually(
            lambda: (self.locker.metric("helm_locker_foreign_release_secrets_total") or 0) > before, 20), self.log())
        notes = eventually(lambda: self.event_notes("flux-system", "sh.helm.release.v1.apps-shared.v1", "ForeignRelease"), 30)
        self.assertTrue(notes, self.log())
        self.assertIn("may not create Secrets in \\\"apps\\\"", json.dumps(notes))
        # It locks nothing: alice's write goes through; and writes nothing: the reverter does
        # not put mallory's colour there.
        self.ok(self.patch_colour("alice", "red", shared))
        time.sleep(5)
        self.assertEqual(self.colour(shared), "red", self.log())


    def chart_object(self, release):
        """The release's ConfigMap as Flux's drift detection applies it: the chart's object with
        Helm's metadata set (setHelmMetadata)."""
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{release}-settings", "namespace": "apps",
                             "labels": {"app.kubernetes.io/managed-by": "Helm"},
                             "annotations": {"meta.helm.sh/release-name": release,
                                             "meta.helm.sh/release-namespace": "apps"}},
                "data": {"colour": "blue"}}

    def flux_apply(self, obj, dry_run=True):
        return self.k(f"--as={FLUX}", "apply", "--server-side", "--field-manager=helm-controller",
                      "--force-conflicts", *(["--dry-run=server"] if dry_run else []), "-f", "-",
                      input=json.dumps(obj))

    def flux_patch(self, name, colour):
        return self.k(f"--as={FLUX}", "-n", "apps", "patch", "configmap", name, "--type=json",
                      "--field-manager=helm-controller",
                      "-p", json.dumps([{"op": "replace", "path": "/data/colour", "value": colour}]))

    def test_3_fluxs_drift_detection_and_correction_and_remediation(self):
        # A release the Helm CLI installed (Helm's Apply entry is the SDK's manager).
        self.plane.helm("apps").install(self.chart, "cli", {})
        name, obj = "cli-settings", self.chart_object("cli")
        self.assertTrue(self.denied("alice", name), self.log())
        # Drift detection's dry run: allowed, with and without drift; the same apply stored
        # (the control) is denied as a co-owner of Helm's fields.
        out = self.flux_apply(obj)
        self.assertEqual(out.returncode, 0, out.stderr + self.log())
        stored = self.flux_apply(obj, dry_run=False)
        self.assertNotEqual(stored.returncode, 0, "\n".join(
            line for line in self.locker.log_text().splitlines() if "cli-settings" in line or "apps/cli" in line))
        self.assertIn("co-owner", stored.stderr)
        # With drift (the reverter puts it back within a second or so: whichever comes first).
        self.ok(self.patch_colour(OPS, "green", name))
        out = self.flux_apply(obj)
        self.assertEqual(out.returncode, 0, out.stderr + self.log())
        # Drift correction: a JSON patch back to the chart's value goes through; to another
        # value it is denied.
        self.ok(self.flux_patch(name, "blue"))
        self.assertEqual(self.colour(name), "blue")
        other = self.flux_patch(name, "yellow")
        self.assertNotEqual(other.returncode, 0)
        self.assertIn("/data/colour", other.stderr)
        # Its CREATE of a deleted object: allowed (the reverter hands the fields back to Helm).
        self.ok(self.k(f"--as={OPS}", "-n", "apps", "delete", "configmap", name))
        self.ok(self.k(f"--as={FLUX}", "create", "--field-manager=helm-controller", "-f", "-", input=json.dumps(obj)))

        # Remediation of the Flux-stored release: a rollback opens it while pending, and a stale
        # pending revision Flux marks failed locks it again (at the failed revision).
        flux = decode(self.get("-n", "flux-system", "secret", f"sh.helm.release.v1.{RELEASE}.v2"))
        rollback = json.loads(json.dumps(flux))
        rollback["version"] = 4
        rollback["info"]["status"] = "pending-rollback"
        self.write(FLUX, "flux-system", rollback)
        self.assertTrue(eventually(lambda: self.flux_patch(f"{RELEASE}-settings", "teal").returncode == 0, 20),
                        self.log())
        rollback["info"]["status"] = "failed"
        self.write(FLUX, "flux-system", rollback, replace=True)
        self.assertTrue(self.denied("alice", expect="revision 4, failed"), self.log())
        self.ok(self.flux_patch(f"{RELEASE}-settings", "purple"))

    def test_4_without_the_reverter_fluxs_create_of_a_server_side_releases_object_is_denied(self):
        locker = chart_locker(self.plane, self.env, "flux-norevert", "--exempt-user", OPS, "--revert=false")
        self.addCleanup(locker.stop)
        locker.wait_ready()
        register_webhook(self.plane, locker, "flux-norevert")
        self.addCleanup(unregister_webhook, self.plane, "flux-norevert")
        self.plane.helm("apps").install(self.chart, "norevert", {})
        name, obj = "norevert-settings", self.chart_object("norevert")
        self.assertTrue(self.denied("alice", name), locker.log_text()[-3000:])
        self.ok(self.k(f"--as={OPS}", "-n", "apps", "delete", "configmap", name))
        out = self.k(f"--as={FLUX}", "create", "--field-manager=helm-controller", "-f", "-", input=json.dumps(obj))
        self.assertNotEqual(out.returncode, 0, locker.log_text()[-3000:])
        self.assertIn("helm-controller", out.stderr)
        # The drift detection's dry run is still allowed there.
        out = self.flux_apply(obj)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_5_a_release_at_work_takes_objects_over_when_its_author_could_uninstall_the_holder(self):
        helm = self.plane.helm("apps")
        helm.install(self.chart, "cli2", {})
        name = "cli2-settings"
        self.assertTrue(self.denied("alice", name), self.log())
        # Flux installs the same chart as apps-cli2, taking ownership: its pending revision,
        # then its apply of the objects with its own annotations.
        body = decode(self.get("-n", "apps", "secret", "sh.helm.release.v1.cli2.v1"))
        taking = json.loads(json.dumps(body))
        taking.update(name="apps-cli2", version=1)
        taking["info"]["status"] = "pending-install"
        self.write(FLUX, "flux-system", taking)
        obj = self.chart_object("cli2")
        obj["metadata"]["annotations"]["meta.helm.sh/release-name"] = "apps-cli2"
        out = eventually(lambda: (lambda o: o if o.returncode == 0 else None)(self.flux_apply(obj, dry_run=False)), 20)
        self.assertTrue(out, self.log())
        self.assertIn("hand-over allowed", self.log())
        taking["info"]["status"] = "deployed"
        self.write(FLUX, "flux-system", taking, replace=True)
        denied = self.denied("alice", name, expect="apps/apps-cli2 (stored in flux-system)")
        self.assertTrue(denied, self.log())

        # The control: team/ops renders an object in apps; alice (edit in apps, nothing in
        # team) writes a pending install of her own release rendering it, and takes it over:
        # denied, she could not uninstall team/ops.
        self.plane.helm("team").install(self.chart, "ops", {"namespace": "apps"})
        held = "ops-settings"
        self.assertTrue(self.denied("alice", held, expect="team/ops"), self.log())
        self.assertEqual(self.can_i_as("alice", "delete", "secrets", "-n", "team"), "no")
        mine = decode(self.get("-n", "team", "secret", "sh.helm.release.v1.ops.v1"))
        mine.update(name="alice-take", namespace="apps", version=1)
        mine["info"]["status"] = "pending-install"
        self.write("alice", "apps", mine)
        time.sleep(2)
        grab = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": held, "namespace": "apps",
                             "annotations": {"meta.helm.sh/release-name": "alice-take",
                                             "meta.helm.sh/release-namespace": "apps"}}}
        out = self.k("--as=alice", "apply", "--server-side", "--field-manager=helm",
                     "--force-conflicts", "-f", "-", input=json.dumps(grab))
        self.assertNotEqual(out.returncode, 0, self.log())
        self.assertIn("team/ops", out.stderr)
        self.assertEqual(self.get("-n", "apps", "configmap", held)["metadata"]["annotations"]
                         ["meta.helm.sh/release-name"], "ops")


if __name__ == "__main__":
    unittest.main()
