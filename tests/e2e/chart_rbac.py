"""A locker run as the chart runs it: with the chart's own ServiceAccount and RBAC (rendered from
charts/helm-locker with real Helm), not with the test's admin kubeconfig. The trust tests start
their lockers this way, so a defence that only holds with admin rights (or an attack that only
works with them) shows.

    env = chart_rbac_env(plane)                      # once per control plane
    locker = chart_locker(plane, env, "trust", "--exempt-user", "ops")
    locker = locked(plane, env, "trust", "--exempt-user", "ops")  # ready, leading, registered
    ...
    unlock(plane, locker, "trust")

The tenants and operators the tests play are bound with `bind`.
"""

import base64
import json
import os
import re
import time

import helm_python as helm

from harness import Locker, ROOT, eventually, locker_values, register_webhook, unregister_webhook

CHART = os.path.join(ROOT, "charts", "helm-locker")
# The chart's release name and namespace: its objects are then called helm-locker-... or
# helm-locker (the fullname drops the repeated name).
NS = RELEASE = SA = "helm-locker"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def rendered_rbac(values=None):
    """The chart's ServiceAccount and RBAC objects, as real Helm renders them."""
    chart = helm.Chart.load(CHART)
    try:
        out = chart.render(locker_values(values), name=RELEASE, namespace=NS)
    finally:
        chart.close()
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        for part in re.split(r"(?m)^---\s*$", text):
            obj = helm.values_from_yaml(part)
            if obj and obj.get("kind") in RBAC_KINDS:
                if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
                    obj["metadata"].setdefault("namespace", NS)
                docs.append(obj)
    return docs


def chart_rbac_env(plane, values=None):
    """Applies the chart's ServiceAccount and RBAC (with `values`; the reverter on by default)
    and returns an environment whose KUBECONFIG speaks as that ServiceAccount."""
    values = values or {"revert": {"enabled": True}}
    k = plane.kubectl
    if k("get", "namespace", NS).returncode != 0:
        out = k("create", "namespace", NS)
        assert out.returncode == 0, out.stderr
    items = {"apiVersion": "v1", "kind": "List", "items": rendered_rbac(values)}
    out = k("apply", "-f", "-", input=json.dumps(items))
    assert out.returncode == 0, out.stderr
    token = k("-n", NS, "create", "token", SA, "--duration", "2h")
    if token.returncode == 0:
        token = token.stdout.strip()
    else:  # no TokenRequest in this kubectl: a token Secret, filled in by the controller manager
        out = k("-n", NS, "apply", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": f"{SA}-token", "annotations": {"kubernetes.io/service-account.name": SA}}}))
        assert out.returncode == 0, out.stderr
        deadline, data = time.time() + 30, ""
        while not data and time.time() < deadline:
            data = k("-n", NS, "get", "secret", f"{SA}-token", "-o", "jsonpath={.data.token}").stdout
            time.sleep(0.3)
        assert data, "the token controller never filled the ServiceAccount's token"
        token = base64.b64decode(data).decode()
    server = k("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    path = os.path.join(plane.dir, "chart-service-account.kubeconfig")
    with open(path, "w") as f:
        json.dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "local", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": SA, "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "local", "user": SA}}],
        }, f)
    env = dict(os.environ, KUBECONFIG=path)
    # The account is what it should be: it reads Secrets everywhere, and holds none of the
    # verbs that lift RBAC's own limits (the chart grants no `bind`, `escalate` or
    # `impersonate`: an RBAC object it writes can grant only what it holds).
    def can(*args):
        return plane.run(["kubectl", "auth", "can-i", *args], env=env).stdout.strip()
    assert can("list", "secrets", "-A") == "yes"
    for verb, resource in (("bind", "clusterroles"), ("escalate", "clusterroles"), ("impersonate", "users")):
        assert can(verb, resource) == "no", f"the chart's account may {verb} {resource}"
    return env


def chart_locker(plane, env, name, *flags):
    """A locker with the chart's account (`env` from chart_rbac_env) and the flags the chart's
    Deployment gives it where RBAC names things: its Lease and author key in its own namespace,
    its own ServiceAccount exempt."""
    return Locker(plane, name,
                  "--lease-namespace", NS, "--lease-name", "helm-locker",
                  "--author-key-secret", f"{RELEASE}-author-key",
                  "--exempt-service-account", f"{NS}/{SA}", *flags, env=env)


def locked(plane, env, name, *flags, webhook=None, leader_within=30):
    """A `chart_locker` started and ready, the leader (its reverter runs), and registered as the
    validating webhook `webhook` (`name` when not given)."""
    locker = chart_locker(plane, env, name, *flags)
    locker.wait_ready()
    assert eventually(lambda: locker.metric("helm_locker_leader") == 1, leader_within), \
        locker.log_text()[-3000:]
    register_webhook(plane, locker, webhook or name)
    return locker


def unlock(plane, locker, webhook):
    """Undoes `locked`: the webhook unregistered first (no write is refused by a locker that is
    gone), then the locker stopped."""
    unregister_webhook(plane, webhook)
    locker.stop()


def bind(plane, user, role, namespace=None, name=None):
    """Binds `user` to the ClusterRole `role`: cluster-wide without `namespace`, else in it (a
    RoleBinding). `role` as `Role/x` binds the namespace's Role x instead. The binding is called
    `name` (`<user>-<role>` when not given)."""
    kind, _, role_name = role.rpartition("/")
    name = name or f"{user}-{role_name}"
    ref = f"--role={role_name}" if kind == "Role" else f"--clusterrole={role_name}"
    args = (("-n", namespace, "create", "rolebinding") if namespace else ("create", "clusterrolebinding"))
    out = plane.kubectl(*args, name, ref, f"--user={user}")
    assert out.returncode == 0, out.stderr
