"""The Helm chart (charts/helm-locker), the webhook configurations (webhook-config/) and the
Dockerfile, checked offline with real Helm (the Go SDK through helm-python-sdk): lint, render
for each certificate mode, and what a user relies on in the rendered objects.

No cluster needed; run through scripts/e2e.sh (or .venv-e2e/bin/python -m unittest
tests/e2e/test_chart.py from the repository root).
"""

import base64
import os
import re
import shutil
import subprocess
import unittest

import helm_python as helm

from harness import locker_values

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "charts", "helm-locker")
BIN = os.environ.get("HELM_LOCKER_BIN", os.path.join(ROOT, "target", "debug", "helm-locker"))
CA_B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()

MODES = {
    "selfManaged": {},
    "given": {"certificates": {"mode": "given", "given": {"secretName": "hl-tls", "caBundle": CA_B64}}},
    "certManager": {"certificates": {"mode": "certManager"}},
}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "*"}


def merged(*parts):
    out = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = value
    return out


def yaml_documents(text):
    """The objects of a multi-document YAML text (comments and empty documents dropped)."""
    docs = []
    for part in re.split(r"(?m)^---\s*$", text):
        obj = helm.values_from_yaml(part)
        if obj:
            docs.append(obj)
    return docs


def render(values=None, namespace="helm-locker", name="helm-locker", image=True):
    """(raw manifests by template path, list of rendered objects); with the image the chart
    requires unless `image` is false."""
    chart = helm.Chart.load(CHART)
    try:
        out = chart.render(locker_values(values) if image else values, name=name, namespace=namespace)
    finally:
        chart.close()
    docs = []
    for path, text in sorted(out.items()):
        if not path.endswith("NOTES.txt"):
            docs.extend(yaml_documents(text))
    return out, docs


def of_kind(docs, kind, author=False):
    """The rendered objects of `kind`; the author webhook's configuration only when `author`."""
    return [d for d in docs if d.get("kind") == kind
            and author == d["metadata"]["name"].endswith("-author")]


def one(docs, kind):
    found = of_kind(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def env_of(deployment):
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def shipped(name):
    with open(os.path.join(ROOT, "webhook-config", name)) as f:
        return helm.values_from_yaml(f.read())


def bound_to_locker(docs):
    """The roles bound to the locker's own ServiceAccount (the chart also ships roles for people
    to bind, such as <release>-unlock)."""
    bound = set()
    for binding in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding"):
        if any(s.get("kind") == "ServiceAccount" for s in binding.get("subjects", [])):
            ref = binding["roleRef"]
            bound.add((ref["kind"], ref["name"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None))
    return bound


# Every install keeps the key of the author stamp (docs/security.md): create a Secret in its own
# namespace (RBAC cannot name what is being created), then only read it (`get`, no write verb).
AUTHOR_KEY = {("Role", "helm-locker", "", "secrets", "create", ())}
# Asking the API server a question (a SubjectAccessReview) grants nothing: whether the author of a
# release stored in another namespace may create Secrets there, whether a taker may uninstall.
ASKING = {("ClusterRole", None, "authorization.k8s.io", "subjectaccessreviews", "create", ())}
# Learning (learn.enabled, on by default) writes what it learned into ConfigMaps of its own
# namespace, one per namespace written to: their names are not known at install, so neither
# create nor update can be limited by resourceNames (docs/security.md, the grants).
LEARNED = {("Role", "helm-locker", "", "configmaps", verb, ()) for verb in ("create", "update")}


def write_grants(docs):
    """Every (kind, namespace, apiGroup, resource, verb, resourceNames) a write verb is granted on
    to the locker's ServiceAccount."""
    grants = set()
    bound = bound_to_locker(docs)
    for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
        namespace = role["metadata"].get("namespace") if role["kind"] == "Role" else None
        if (role["kind"], role["metadata"]["name"], namespace) not in bound:
            continue
        for rule in role.get("rules", []):
            for verb in set(rule.get("verbs", [])) & WRITE_VERBS:
                for group in rule.get("apiGroups", [None]):
                    for resource in rule.get("resources", rule.get("nonResourceURLs", [])):
                        grants.add((role["kind"], role["metadata"].get("namespace"), group, resource, verb,
                                    tuple(rule.get("resourceNames", []))))
    return grants


class ChartLintAndRender(unittest.TestCase):
    def test_lint_is_clean_for_default_values_and_each_certificate_mode(self):
        for mode, values in MODES.items():
            for extra in ({}, {"revert": {"enabled": False}}, {"mode": "repair"}):
                with self.subTest(mode=mode, extra=extra):
                    report = helm.lint(CHART, locker_values(merged(values, extra)), strict=True, namespace="helm-locker")
                    problems = [m for m in report["messages"] if m["severity"] >= 2]
                    self.assertEqual(problems, [])
                    self.assertEqual(report["errors"], [])

    def test_the_deployment_is_hardened_spread_and_probed(self):
        for mode, values in MODES.items():
            with self.subTest(mode=mode):
                _, docs = render(values)
                deployment = one(docs, "Deployment")
                spec = deployment["spec"]["template"]["spec"]
                self.assertEqual(deployment["spec"]["replicas"], 2)
                self.assertIs(spec["securityContext"]["runAsNonRoot"], True)
                self.assertNotEqual(spec["securityContext"]["runAsUser"], 0)
                self.assertEqual(spec["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
                container = spec["containers"][0]
                security = container["securityContext"]
                self.assertIs(security["readOnlyRootFilesystem"], True)
                self.assertIs(security["allowPrivilegeEscalation"], False)
                self.assertEqual(security["capabilities"]["drop"], ["ALL"])
                # The image's ENTRYPOINT is `helm-locker serve`: args would be appended to it.
                self.assertNotIn("args", container)
                self.assertNotIn("command", container)
                self.assertEqual(container["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "admin"})
                self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "admin"})
                ports = {p["name"]: p["containerPort"] for p in container["ports"]}
                self.assertEqual(ports, {"https": 8443, "admin": 8080})
                self.assertIn("memory", container["resources"]["limits"])
                self.assertIn("cpu", container["resources"]["requests"])
                keys = {c["topologyKey"] for c in spec["topologySpreadConstraints"]}
                self.assertEqual(keys, {"kubernetes.io/hostname", "topology.kubernetes.io/zone"})
                self.assertIn("podAntiAffinity", spec["affinity"])
                pdb = one(docs, "PodDisruptionBudget")
                self.assertEqual(pdb["spec"]["minAvailable"], 1)
                self.assertEqual(pdb["spec"]["selector"]["matchLabels"],
                                 deployment["spec"]["selector"]["matchLabels"])
                service = one(docs, "Service")
                https = [p for p in service["spec"]["ports"] if p["name"] == "https"][0]
                self.assertEqual((https["port"], https["targetPort"]), (443, "https"))
                # A certificate mounted from a Secret or written by the server: the only writable
                # path is the emptyDir of the self-managed mode.
                mounts = {m["name"]: m for m in container["volumeMounts"]}
                self.assertEqual(mounts["certs"]["readOnly"], mode != "selfManaged")
        _, single = render({"replicaCount": 1})
        self.assertEqual(of_kind(single, "PodDisruptionBudget"), [], "a PDB of 1 with 1 replica blocks drains")

    def test_the_lockers_own_service_account_is_exempt(self):
        _, docs = render(namespace="ops", name="guard")
        env = env_of(one(docs, "Deployment"))
        sa = one(docs, "ServiceAccount")["metadata"]["name"]
        self.assertEqual(sa, "guard-helm-locker")
        self.assertIn(f"ops/{sa}", env["HELM_LOCKER_EXEMPT_SERVICE_ACCOUNTS"].split(","))
        _, docs = render({"exempt": {"serviceAccounts": ["flux-system/helm-controller"]}})
        env = env_of(one(docs, "Deployment"))
        self.assertEqual(env["HELM_LOCKER_EXEMPT_SERVICE_ACCOUNTS"],
                         "helm-locker/helm-locker,flux-system/helm-controller")

    def test_no_render_makes_a_key_or_certificate_so_upgrades_do_not_drift(self):
        for mode, values in MODES.items():
            with self.subTest(mode=mode):
                first, _ = render(values)
                second, _ = render(values)
                self.assertEqual(first, second, "two renders differ: something is generated per render")
                text = "\n".join(first.values())
                self.assertNotIn("PRIVATE KEY", text)
                # The only certificate material is the CA the user gave (in each of the
                # validating configuration's two webhooks and the author webhook).
                self.assertEqual(text.count("caBundle:"), 3 if mode == "given" else 0)
        for name in os.listdir(os.path.join(CHART, "templates")):
            with open(os.path.join(CHART, "templates", name)) as f:
                source = f.read()
            for function in ("genCA", "genPrivateKey", "genSelfSignedCert", "genSignedCert", "randAlphaNum", "uuidv4"):
                self.assertNotIn(function, source, name)

    def test_without_the_reverter_rbac_grants_no_write_on_other_objects(self):
        events = {("ClusterRole", None, group, "events", verb, ())
                  for group in ("", "events.k8s.io") for verb in ("create", "patch")}
        for mode in ("given", "certManager"):
            with self.subTest(mode=mode):
                _, docs = render(merged(MODES[mode], {"revert": {"enabled": False}, "events": {"enabled": False},
                                                      "learn": {"enabled": False}}))
                self.assertEqual(write_grants(docs), AUTHOR_KEY | ASKING)
                # Learning adds exactly that: creating and updating ConfigMaps of its namespace.
                _, docs = render(merged(MODES[mode], {"revert": {"enabled": False}, "events": {"enabled": False}}))
                self.assertEqual(write_grants(docs), LEARNED | AUTHOR_KEY | ASKING)
                self.assertEqual(env_of(one(docs, "Deployment"))["HELM_LOCKER_EVENTS"], "false")
                # Recording denials as Events adds exactly that: creating and patching Events.
                _, docs = render(merged(MODES[mode], {"revert": {"enabled": False}, "learn": {"enabled": False}}))
                self.assertEqual(write_grants(docs), events | AUTHOR_KEY | ASKING)
        _, docs = render({"revert": {"enabled": False}, "events": {"enabled": False}, "learn": {"enabled": False}})
        # Self-managed certificate: create a Secret in its own namespace (RBAC cannot name what
        # is being created), update only that Secret, patch only its own webhook configurations.
        self.assertEqual(write_grants(docs), AUTHOR_KEY | ASKING | {
            ("Role", "helm-locker", "", "secrets", "update", ("helm-locker-tls",)),
            ("ClusterRole", None, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch",
             ("helm-locker", "helm-locker-author")),
            ("ClusterRole", None, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch",
             ("helm-locker", "helm-locker-author")),
        })
        readers = [r for r in of_kind(docs, "ClusterRole") if r["metadata"]["name"] == "helm-locker"][0]
        self.assertIn({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
                      readers["rules"])
        self.assertEqual([r for r in of_kind(docs, "Role") if "lease" in r["metadata"]["name"]], [])

    def test_the_reverter_gets_patch_and_create_but_never_delete_or_update(self):
        _, docs = render(MODES["given"])
        grants = write_grants(docs)
        self.assertIn(("ClusterRole", None, "*", "*", "patch", ()), grants)
        self.assertIn(("ClusterRole", None, "*", "*", "create", ()), grants)
        self.assertIn(("ClusterRole", None, "helm.cattle.io", "helmreleases/status", "update", ()), grants)
        self.assertIn(("Role", "helm-locker", "coordination.k8s.io", "leases", "update", ("helm-locker",)), grants)
        # Before each write: may the revision's author make it?
        self.assertIn(("ClusterRole", None, "authorization.k8s.io", "subjectaccessreviews", "create", ()), grants)
        self.assertFalse({g for g in grants if g[4] in ("delete", "deletecollection", "escalate", "bind",
                                                        "impersonate", "*")})
        self.assertFalse({g for g in grants if g[4] == "update" and g[3] == "*"})
        bindings = of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding")
        roles = {(r["kind"], r["metadata"]["name"]) for r in of_kind(docs, "ClusterRole") + of_kind(docs, "Role")}
        for binding in bindings:
            self.assertIn((binding["roleRef"]["kind"], binding["roleRef"]["name"]), roles)
            self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "helm-locker",
                                                    "namespace": "helm-locker"}])
        env = env_of(one(docs, "Deployment"))
        self.assertEqual(env["HELM_LOCKER_REVERT"], "true")
        self.assertEqual(env["HELM_LOCKER_LEASE_NAMESPACE"], {"fieldRef": {"fieldPath": "metadata.namespace"}})
        self.assertEqual(env["HELM_LOCKER_IDENTITY"], {"fieldRef": {"fieldPath": "metadata.name"}})

    def test_release_drivers_decide_what_is_read_and_stamped(self):
        """releaseDrivers: the ConfigMap driver's watch, its RBAC (get/list/watch on configmaps,
        cluster-wide or per chosen namespace) and its author stamp come and go together."""
        reader = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
        secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
        for drivers, want in ((None, True), (["secret", "configmap"], True), (["secret"], False)):
            with self.subTest(drivers=drivers):
                values = {"revert": {"enabled": False}}
                if drivers:
                    values["releaseDrivers"] = drivers
                _, docs = render(values)
                cluster = [r for r in of_kind(docs, "ClusterRole") if r["metadata"]["name"] == "helm-locker"][0]
                self.assertEqual(reader in cluster["rules"], want)
                self.assertIn(secrets, cluster["rules"])
                self.assertEqual(env_of(one(docs, "Deployment"))["HELM_LOCKER_RELEASE_DRIVERS"],
                                 ",".join(drivers or ["secret", "configmap"]))
                author = of_kind(docs, "MutatingWebhookConfiguration", author=True)[0]
                self.assertEqual(author["webhooks"][0]["rules"][0]["resources"],
                                 ["secrets", "configmaps"] if want else ["secrets"])
                _, docs = render(dict(values, namespaces=["shop"]), namespace="ops")
                role = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "helm-locker-releases"][0]
                self.assertEqual(reader in role["rules"], want)
                self.assertIn(secrets, role["rules"])
        # Only the ConfigMap driver: no Secret is read for releases.
        _, docs = render({"revert": {"enabled": False}, "releaseDrivers": ["configmap"]})
        cluster = [r for r in of_kind(docs, "ClusterRole") if r["metadata"]["name"] == "helm-locker"][0]
        self.assertNotIn(secrets, cluster["rules"])
        self.assertIn(reader, cluster["rules"])

    def test_chosen_namespaces_read_secrets_there_only(self):
        _, docs = render({"namespaces": ["shop", "web"], "revert": {"enabled": False}}, namespace="ops")
        cluster = [r for r in of_kind(docs, "ClusterRole") if r["metadata"]["name"] == "helm-locker"][0]
        self.assertNotIn("secrets", [res for rule in cluster["rules"] for res in rule.get("resources", [])])
        self.assertIn({"nonResourceURLs": ["/openapi/v2"], "verbs": ["get"]}, cluster["rules"])
        self.assertIn({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                       "verbs": ["list"]}, cluster["rules"])
        readers = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "helm-locker-releases"]
        self.assertEqual(sorted(r["metadata"]["namespace"] for r in readers), ["shop", "web"])
        self.assertEqual(env_of(one(docs, "Deployment"))["HELM_LOCKER_NAMESPACES"], "shop,web")

    def test_the_charts_webhooks_equal_webhook_config(self):
        fields = ["name", "admissionReviewVersions", "sideEffects", "failurePolicy", "timeoutSeconds",
                  "matchPolicy", "reinvocationPolicy", "namespaceSelector", "objectSelector", "rules"]
        for kind, file in (("ValidatingWebhookConfiguration", "validating.yaml"),
                           ("MutatingWebhookConfiguration", "mutating.yaml")):
            with self.subTest(kind=kind):
                want = shipped(file)
                _, docs = render({"mode": "repair"})
                got = one(docs, kind)
                self.assertEqual(got["metadata"]["name"], want["metadata"]["name"])
                self.assertEqual(len(got["webhooks"]), len(want["webhooks"]))
                for g, w in zip(got["webhooks"], want["webhooks"]):
                    for field in fields:
                        self.assertEqual(g.get(field), w.get(field), field)
                    self.assertEqual(g["clientConfig"], w["clientConfig"])
        # The author webhook: webhook-config/author.yaml, in every mode.
        want = shipped("author.yaml")
        for values in ({}, {"mode": "repair"}, {"revert": {"enabled": False}}):
            _, docs = render(values)
            got = of_kind(docs, "MutatingWebhookConfiguration", author=True)
            self.assertEqual(len(got), 1, values)
            self.assertEqual(got[0]["metadata"]["name"], want["metadata"]["name"])
            for field in fields:
                self.assertEqual(got[0]["webhooks"][0].get(field), want["webhooks"][0].get(field), field)
            self.assertEqual(got[0]["webhooks"][0]["clientConfig"], want["webhooks"][0]["clientConfig"])
        # Deny mode: no mutating webhook in the write path; another namespace stays excluded.
        _, docs = render(namespace="ops")
        self.assertEqual(of_kind(docs, "MutatingWebhookConfiguration"), [])
        selector = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["namespaceSelector"]
        self.assertEqual(selector["matchExpressions"][0]["values"], ["kube-system", "kube-node-lease", "ops"])
        # Custom resource groups are opt-in, as an extra rule.
        _, docs = render({"webhook": {"extraApiGroups": ["monitoring.coreos.com"]}})
        rules = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["rules"]
        self.assertEqual(rules[-1]["apiGroups"], ["monitoring.coreos.com"])
        self.assertEqual(rules[-1]["resources"], ["*", "*/scale"])

    def test_webhook_config_never_intercepts_what_must_not_wait_on_the_locker(self):
        for file in ("validating.yaml", "mutating.yaml"):
            for position, webhook in enumerate(shipped(file)["webhooks"]):
                status = webhook["name"].startswith("validate-status.")
                self.assertEqual(webhook["sideEffects"], "None")
                self.assertEqual(webhook["admissionReviewVersions"], ["v1"])
                self.assertLessEqual(webhook["timeoutSeconds"], 10)
                self.assertIn(webhook["failurePolicy"], ("Ignore", "Fail"))
                excluded = webhook["namespaceSelector"]["matchExpressions"][0]
                self.assertEqual((excluded["key"], excluded["operator"]), ("kubernetes.io/metadata.name", "NotIn"))
                self.assertTrue({"kube-system", "helm-locker"} <= set(excluded["values"]))
                intercepted = set()
                for rule in webhook["rules"]:
                    if status:
                        # Status writes are updates; only Helm's objects are sent, never pods'.
                        self.assertEqual(rule["operations"], ["UPDATE"])
                        self.assertTrue(all(r.endswith("/status") for r in rule["resources"]))
                        self.assertNotIn("pods/status", rule["resources"])
                        self.assertEqual(webhook["objectSelector"],
                                         {"matchLabels": {"app.kubernetes.io/managed-by": "Helm"}})
                    else:
                        self.assertEqual(sorted(rule["operations"]), ["CREATE", "DELETE", "UPDATE"])
                    for group in rule["apiGroups"]:
                        self.assertNotEqual(group, "*", "a wildcard group would include leases and reviews")
                        intercepted.update((group, r) for r in rule["resources"])
                for never in [("", "events"), ("events.k8s.io", "*"), ("coordination.k8s.io", "*"),
                              ("authentication.k8s.io", "*"), ("authorization.k8s.io", "*"), ("", "*")]:
                    self.assertNotIn(never, intercepted)
                if status:
                    self.assertIn(("apps", "*/status"), intercepted)
                    self.assertIn(("", "services/status"), intercepted)
                    continue
                for needed in [("apps", "*"), ("apps", "*/scale"), ("", "replicationcontrollers/scale"),
                               ("", "configmaps"), ("", "secrets"), ("", "services"), ("batch", "*"),
                               ("networking.k8s.io", "*"), ("rbac.authorization.k8s.io", "*")]:
                    self.assertIn(needed, intercepted)

    def test_certificate_modes_wire_the_certificate_to_the_server_and_the_webhooks(self):
        _, docs = render(MODES["given"])
        deployment = one(docs, "Deployment")
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(volumes["certs"]["secret"]["secretName"], "hl-tls")
        env = env_of(deployment)
        self.assertEqual((env["HELM_LOCKER_TLS_CERT"], env["HELM_LOCKER_TLS_KEY"]), ("/certs/tls.crt", "/certs/tls.key"))
        self.assertEqual(one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"], CA_B64)

        _, docs = render(MODES["certManager"])
        certificate = one(docs, "Certificate")
        self.assertIn("helm-locker.helm-locker.svc", certificate["spec"]["dnsNames"])
        volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(volumes["certs"]["secret"]["secretName"], certificate["spec"]["secretName"])
        webhook = one(docs, "ValidatingWebhookConfiguration")
        self.assertEqual(webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                         f"helm-locker/{certificate['metadata']['name']}")
        self.assertEqual(one(docs, "Issuer")["spec"], {"selfSigned": {}})
        _, docs = render(merged(MODES["certManager"],
                                {"certificates": {"certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "ca"}}}}))
        self.assertEqual(of_kind(docs, "Issuer"), [])
        self.assertEqual(one(docs, "Certificate")["spec"]["issuerRef"], {"kind": "ClusterIssuer", "name": "ca"})

        _, docs = render()
        deployment = one(docs, "Deployment")
        env = env_of(deployment)
        self.assertEqual(env["HELM_LOCKER_SELF_MANAGED_SECRET"], "helm-locker-tls")
        self.assertEqual(env["HELM_LOCKER_SELF_MANAGED_SERVICE"], one(docs, "Service")["metadata"]["name"])
        self.assertEqual(env["HELM_LOCKER_WEBHOOK_CONFIGURATIONS"],
                         ",".join([one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"],
                                   of_kind(docs, "MutatingWebhookConfiguration", author=True)[0]["metadata"]["name"]]))
        self.assertNotIn("caBundle", of_kind(docs, "MutatingWebhookConfiguration", author=True)[0]["webhooks"][0]["clientConfig"])
        self.assertEqual(env["HELM_LOCKER_SELF_SIGNED_DIR"], "/certs")
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        self.assertIn("emptyDir", volumes["certs"])
        self.assertNotIn("caBundle", one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"])

    def test_the_default_values_render_nothing_until_an_image_is_named(self):
        # No image is published: an install of the defaults would register webhooks whose pods
        # never start (under failurePolicy Fail, every intercepted write refused).
        for values in (None, {}, {"image": {"repository": ""}}, {"image": {"tag": "0.1.0"}}):
            with self.subTest(values=values):
                with self.assertRaisesRegex(helm.HelmRenderError,
                                            "image.repository is required: no image of helm-locker is published"):
                    render(values, image=False)
        _, docs = render({"image": {"repository": "registry.example/helm-locker"}}, image=False)
        container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["image"], "registry.example/helm-locker:0.1.0")

    def test_bad_values_are_refused_with_a_clear_message(self):
        with self.assertRaisesRegex(helm.HelmValuesError, "certificates/mode"):
            render({"certificates": {"mode": "selfSigned"}})
        with self.assertRaisesRegex(helm.HelmValuesError, "mode"):
            render({"mode": "block"})
        with self.assertRaisesRegex(helm.HelmRenderError, "secretName is required in mode given"):
            render({"certificates": {"mode": "given", "given": {"caBundle": CA_B64}}})
        with self.assertRaisesRegex(helm.HelmRenderError, "caBundle is required in mode given"):
            render({"certificates": {"mode": "given", "given": {"secretName": "x"}}})

    def test_every_setting_the_chart_passes_is_a_flag_of_the_server(self):
        help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, check=True).stdout
        passed = set()
        for values in (MODES["selfManaged"], MODES["given"],
                       {"config": {"mode": "warn"}, "namespaces": ["a"], "excludeNamespaces": ["b"],
                        "releaseSelector": "x=y", "registrationNamespace": "r",
                        "exempt": {"users": ["u"], "groups": ["g"]}}):
            passed |= set(env_of(one(render(values)[1], "Deployment")))
        known = {name for name in passed if f"[env: {name}=" in help_text}
        self.assertEqual(passed - known, set(), "the chart passes settings the server does not know")
        self.assertTrue({"HELM_LOCKER_REVERT", "HELM_LOCKER_REGISTRATION_NAMESPACE", "HELM_LOCKER_LEASE_NAMESPACE",
                         "HELM_LOCKER_LEASE_NAME", "HELM_LOCKER_IDENTITY"} <= passed)


class Dockerfile(unittest.TestCase):
    """Docker cannot build here (no daemon, no base images): check what a build would need."""

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "Dockerfile")) as f:
            text = re.sub(r"\\\n", " ", f.read())
        cls.instructions = []
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                word, _, rest = line.partition(" ")
                cls.instructions.append((word.upper(), rest.strip()))
        with open(os.path.join(ROOT, ".dockerignore")) as f:
            cls.ignored = [l.strip().rstrip("/") for l in f if l.strip() and not l.startswith("#")]

    def stages(self):
        stages = []
        for word, rest in self.instructions:
            if word == "FROM":
                stages.append([(word, rest)])
            elif stages:
                stages[-1].append((word, rest))
        return stages

    def test_every_copied_source_exists_and_is_not_docker_ignored(self):
        copied = []
        for word, rest in self.instructions:
            if word == "COPY" and "--from=" not in rest:
                copied.extend(rest.split()[:-1])
        self.assertIn("Cargo.lock", copied)
        for source in copied:
            self.assertTrue(os.path.exists(os.path.join(ROOT, source)), source)
            self.assertFalse(any(source == i or source.startswith(i + "/") for i in self.ignored), source)
        # Everything the build reads at compile time is copied: include_str! targets, members.
        for crate in ("src", "core/src", "certs-gen/src"):
            for dirpath, _, files in os.walk(os.path.join(ROOT, crate)):
                for name in (n for n in files if n.endswith(".rs")):
                    with open(os.path.join(dirpath, name)) as f:
                        for target in re.findall(r'include_(?:str|bytes)!\("([^"]+)"\)', f.read()):
                            path = os.path.relpath(os.path.normpath(os.path.join(dirpath, target)), ROOT)
                            self.assertTrue(any(path == c or path.startswith(c.rstrip("/") + "/") for c in copied), path)
        self.assertIn("certs-gen/Cargo.toml", copied)
        self.assertIn("core/Cargo.toml", copied)

    def test_the_runtime_is_non_root_and_runs_the_binary_built(self):
        stages = self.stages()
        self.assertGreaterEqual(len(stages), 2, "multi-stage")
        runtime = stages[-1]
        self.assertRegex(runtime[0][1], r"distroless|scratch")
        users = [rest for word, rest in runtime if word == "USER"]
        self.assertTrue(users and users[-1].split(":")[0] not in ("0", "root"), users)
        entrypoint = [rest for word, rest in runtime if word == "ENTRYPOINT"][-1]
        binary = re.findall(r'"([^"]+)"', entrypoint)
        self.assertEqual(binary[1:], ["serve"])
        copies = {rest.split()[-1]: rest.split()[-2] for word, rest in runtime if word == "COPY" and "--from=" in rest}
        self.assertIn(binary[0], copies)
        self.assertEqual(copies[binary[0]], binary[0])
        # Copied from the `binaries` stage: the builder's by default (ARG BINARIES=builder), a
        # local image with the same files when scripts/image.sh builds without a registry.
        self.assertTrue(all(w != "COPY" or "--from=" not in r or "--from=binaries " in r for w, r in runtime))
        self.assertIn(("ARG", "BINARIES=builder"), self.instructions)
        self.assertIn(("FROM", "${BINARIES} AS binaries"), self.instructions)
        builds = [rest for stage in stages[:-1] for word, rest in stage if word == "RUN" and "cargo build" in rest]
        self.assertTrue(any("--bin helm-locker" in b and "--profile image" in b and "--locked" in b
                            and f"target/x86_64-unknown-linux-gnu/image/helm-locker" in b
                            and os.path.dirname(binary[0]) in b for b in builds), builds)

    @unittest.skipUnless(shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0,
                         "no Docker daemon")
    def test_the_image_builds(self):
        out = subprocess.run(["docker", "build", "-t", "helm-locker:test", ROOT], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
