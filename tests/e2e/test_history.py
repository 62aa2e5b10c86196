"""Clusters as they are: Helm keeps up to 10 revisions of each release (`--history-max`), all but
the newest `superseded`. On a real control plane, releases with their history:

- the locker lists and decodes only the revisions that decide what is locked (not
  `superseded`): counted by `helm_locker_release_secrets_decoded_total`, with the bytes of
  both lists and the locker's memory printed and held to a budget;
- a real release upgraded past its history stays locked at its newest revision through
  upgrades (the revision Helm supersedes leaves the watch) and a rollback;
- a synthetic release's newest revision locks its object;
- a watch expiry (410 Gone, here after kube-apiserver restarts) costs one list again with the
  start-up selector, in which only the Secrets whose resourceVersion changed are decoded; the
  index keeps answering meanwhile;
- a release upgraded while the locker is cut off from the API server (its watch broken, the
  API server up) is locked at its new revision once the connection is back: when the watch
  resumes from its resourceVersion, and when the API server restarted meanwhile, so that the
  resumed watch is answered 410 Gone and the change is found by a list again;
- a start that streams the stored releases (`--initial-list=stream`, sendInitialEvents, on a
  server with WatchList: 1.34 and later) indexes what a paged list does, at start-up and after a
  watch expiry, and `auto` streams there and lists before: the time to ready, the RSS and the
  peaks of each are printed (docs/performance.md's table), beside the time the API server takes
  to answer the same list alone (pages of 500, JSON, as kube's watcher asks; and from its watch
  cache, `resourceVersion=0`).

With E2E_HISTORY_BEFORE set to another helm-locker binary (a previous build), or to `label=binary`
pairs split by commas, the sixth test starts each too, listed, one at a time with the others, and
prints its figures beside them.

Size: E2E_HISTORY_RELEASES releases (default 200) of E2E_HISTORY_REVISIONS revisions each
(default 10), each revision of E2E_HISTORY_OBJECTS objects (default 1: a ~2 kB ConfigMap; each
further one a ~0.6 kB ConfigMap); at full size by hand (`E2E_HISTORY_RELEASES=10000`,
docs/performance.md).
"""

import http.client
import json
import os
import re
import ssl
import time
import unittest
import urllib.parse

from harness import CHART, DENIED, block_yaml, ControlPlane, CutProxy, Locker, eventually, register_webhook, release_secret, unregister_webhook

RELEASES = int(os.environ.get("E2E_HISTORY_RELEASES", "200"))
REVISIONS = int(os.environ.get("E2E_HISTORY_REVISIONS", "10"))
OBJECTS = int(os.environ.get("E2E_HISTORY_OBJECTS", "1"))
NAMESPACE = "fleet"
# Other builds to start beside this one, (binary, label): a binary ("previous"), or `label=binary`
# pairs split by commas.
BEFORE = [(entry.partition("=")[2], entry.partition("=")[0]) if "=" in entry else (entry, "previous")
          for entry in os.environ.get("E2E_HISTORY_BEFORE", "").split(",") if entry]


def config_map(name, revision):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", "namespace": NAMESPACE},
            "data": {"revision": str(revision), "padding": "x" * 2000}}


def manifest(name, revision):
    """What a revision renders: its ConfigMap, then OBJECTS - 1 smaller ones."""
    return [config_map(name, revision)] + [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-part-{i}", "namespace": NAMESPACE},
         "data": {"revision": str(revision), "part": f"{name}/{i}", "padding": "x" * 500}}
        for i in range(1, OBJECTS)]


def first_writes(locker, releases):
    """The latency (ms) of the first write to one locked ConfigMap of each of `releases`, sent
    to the locker straight (no API server in between) on one HTTPS connection: an UPDATE that
    adds a label (allowed: the chart's content is read and compared) and, to another release's
    ConfigMap, one that changes the chart's data (denied, after the fresh read of the release a
    denial waits for). Returns (allowed, denied), each sorted."""
    context = ssl.create_default_context(cafile=os.path.join(locker.certs, "ca.crt"))
    context.check_hostname = False
    connection = http.client.HTTPSConnection("127.0.0.1", locker.port, context=context, timeout=30)
    allowed, denied = [], []
    try:
        for i, release in enumerate(releases):
            name = f"app{release:05d}"
            old = {**config_map(name, REVISIONS), "metadata": {
                "name": f"{name}-config", "namespace": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": NAMESPACE}}}
            new = json.loads(json.dumps(old))
            deny = i % 2 == 1
            if deny:
                new["data"]["revision"] = "changed"
            else:
                new["metadata"]["labels"]["team"] = "payments"
            review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": f"first-{i}", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "name": f"{name}-config", "namespace": NAMESPACE, "operation": "UPDATE",
                "userInfo": {"username": "admin"}, "object": new, "oldObject": old}}).encode()
            started = time.perf_counter()
            connection.request("POST", "/validate", body=review, headers={"Content-Type": "application/json"})
            answer = json.loads(connection.getresponse().read())
            took = (time.perf_counter() - started) * 1000
            assert answer["response"]["allowed"] is not deny, (name, answer["response"])
            (denied if deny else allowed).append(took)
    finally:
        connection.close()
    return sorted(allowed), sorted(denied)


def list_alone(plane, **params):
    """The API server answering the locker's start-up list alone: the release Secrets of every
    namespace not superseded, in pages of 500 as kube's watcher asks, JSON, each page read whole
    and thrown away. Seconds, pages and bytes."""
    config = json.loads(plane.kubectl("config", "view", "--raw", "-o", "json").stdout)
    server = urllib.parse.urlparse(config["clusters"][0]["cluster"]["server"])
    token = config["users"][0]["user"]["token"]
    connection = http.client.HTTPSConnection(server.hostname, server.port, timeout=600,
                                             context=ssl._create_unverified_context())
    query = {"labelSelector": "owner=helm,status!=superseded", "fieldSelector": "type=helm.sh/release.v1",
             "limit": "500", **params}
    started, pages, size, next_page = time.monotonic(), 0, 0, None
    while True:
        connection.request("GET", "/api/v1/secrets?" + urllib.parse.urlencode(
            dict(query, **({"continue": next_page} if next_page else {}))),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, body[:500]
        pages, size = pages + 1, size + len(body)
        # The list's metadata comes before its items.
        found = re.search(rb'"continue":"([^"]+)"', body[:4096])
        if not found:
            break
        next_page = found.group(1).decode()
    connection.close()
    return time.monotonic() - started, pages, size


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def rss_mib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return None


def cpu_seconds(pid):
    """The CPU time (user and system) the process has spent so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        # The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def control_plane_cpu_seconds(plane):
    """The CPU time etcd and kube-apiserver of `plane` (its directory in their command lines)
    have spent so far, in seconds: what the API server's side of a list costs the same cores."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if os.path.basename(argv[0]) in (b"etcd", b"kube-apiserver") and plane.dir.encode() in b" ".join(argv):
                total += cpu_seconds(pid)
        except OSError:
            pass  # gone meanwhile
    return total


def reset_peak(pid):
    """Starts the process's peak RSS (VmHWM) again from its current RSS."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class History(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plane = ControlPlane()
        k = cls.plane.kubectl
        assert k("create", "namespace", NAMESPACE).returncode == 0
        # Each release: revisions 1-9 superseded, 10 deployed; every 20th has a failed 11th.
        batch = []
        for r in range(RELEASES):
            name = f"app{r:05d}"
            for rev in range(1, REVISIONS + 1):
                status = "deployed" if rev == REVISIONS else "superseded"
                batch.append(release_secret(name, NAMESPACE, manifest(name, rev), status=status, revision=rev,
                                            render=block_yaml))
            if r % 20 == 0:
                batch.append(release_secret(name, NAMESPACE, manifest(name, REVISIONS + 1), status="failed", render=block_yaml,
                                            revision=REVISIONS + 1))
            if len(batch) >= 500:
                cls.create(batch)
                batch = []
        if batch:
            cls.create(batch)
        cls.failed = (RELEASES + 19) // 20

    @classmethod
    def create(cls, items):
        out = cls.plane.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        assert out.returncode == 0, out.stderr[-2000:]

    @classmethod
    def tearDownClass(cls):
        cls.plane.down()

    def k(self, *args, input=None):
        return self.plane.kubectl(*args, input=input)

    def list_bytes(self, selector):
        out = self.k("get", "secrets", "-n", NAMESPACE, "-l", selector, "--field-selector",
                     "type=helm.sh/release.v1", "-o", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return len(out.stdout.encode()), len(json.loads(out.stdout)["items"])

    def test_1_only_the_revisions_that_matter_are_listed_and_decoded(self):
        all_bytes, all_items = self.list_bytes("owner=helm")
        watched_bytes, watched_items = self.list_bytes("owner=helm,status!=superseded")
        self.assertEqual(all_items, RELEASES * REVISIONS + self.failed)
        self.assertEqual(watched_items, RELEASES + self.failed)
        # The same locker watching a namespace with no release: the memory a release adds is the
        # difference, on this machine and build (a debug build's resting RSS alone moves by tens
        # of MiB between machines).
        assert self.k("create", "namespace", "empty").returncode == 0
        empty = Locker(self.plane, "empty", "--lease-name", "empty", "--revert=false", "--namespace", "empty")
        empty.wait_ready(timeout=120)
        try:
            baseline = rss_mib(empty.process.pid)
        finally:
            empty.stop()
        started = time.time()
        locker = Locker(self.plane, "history", "--lease-name", "history", "--revert=false").wait_ready(timeout=300)
        ready = time.time() - started
        try:
            self.assertTrue(eventually(lambda: locker.metric("helm_locker_releases_indexed") == RELEASES, 30, 0.5),
                            locker.metric("helm_locker_releases_indexed"))
            decoded = locker.metric("helm_locker_release_secrets_decoded_total")
            rss = rss_mib(locker.process.pid)
            print(f"\nhistory: {RELEASES} releases x {REVISIONS} revisions (+{self.failed} failed): "
                  f"ready in {ready:.1f} s, {decoded:.0f} Secrets decoded, listed {watched_bytes / 2**20:.1f} MiB "
                  f"of {all_bytes / 2**20:.1f} MiB ({watched_bytes / all_bytes:.2f}), RSS {rss:.0f} MiB "
                  f"({baseline:.0f} MiB with no release)")
            # Budget: only the newest and failed revisions (and the harness's author probe
            # Secret), a tenth of the bytes (of 10 revisions), and 20 MiB + 50 kB a release over
            # the empty locker.
            self.assertLessEqual(decoded, RELEASES + self.failed + 2)
            self.assertLess(watched_bytes, 1.5 / REVISIONS * all_bytes)
            self.assertLess(rss - baseline, 20 + 0.05 * RELEASES, "memory over budget")
            # The newest revision locks its object.
            self.create_owned_config_map("app00001")
            register_webhook(self.plane, locker, "history")
            try:
                out = self.k("-n", NAMESPACE, "patch", "configmap", "app00001-config", "-p",
                             '{"data":{"revision":"3"}}')
                self.assertNotEqual(out.returncode, 0, "a change of a release with history was allowed")
                self.assertIn(DENIED, out.stderr)
                self.assertIn(f"revision {REVISIONS}, deployed", out.stderr)
            finally:
                unregister_webhook(self.plane, "history")
        finally:
            locker.stop()

    def test_2_a_release_upgraded_past_its_history_stays_locked_at_its_newest_revision(self):
        locker = Locker(self.plane, "upgrades", "--lease-name", "upgrades", "--revert=false").wait_ready(timeout=300)
        register_webhook(self.plane, locker, "upgrades")
        try:
            release = self.plane.helm("shop")
            release.install(CHART, "shop", {"greeting": "v1"}, create_namespace=True)
            for n in range(2, 13):
                release.upgrade(CHART, "shop", {"greeting": f"v{n}"}, max_history=10)

            def denied_at(revision):
                out = self.k("-n", "shop", "patch", "configmap", "shop-config", "-p", '{"data":{"greeting":"x"}}')
                return out.returncode != 0 and f"revision {revision}, deployed" in out.stderr

            self.assertTrue(eventually(lambda: denied_at(12), 20, 0.3), "not locked at revision 12")
            history = self.k("get", "secrets", "-n", "shop", "-l", "owner=helm,name=shop", "-o",
                             "jsonpath={.items[*].metadata.labels.status}").stdout.split()
            self.assertEqual(len(history), 10, history)
            release.rollback("shop", version=11)
            self.assertTrue(eventually(lambda: denied_at(13), 20, 0.3), "not locked at the rollback's revision")
            self.assertEqual(self.plane.get_json("configmap", "-n", "shop", "shop-config")["data"]["greeting"], "v11")
            # A locker started now lists the same: locked at 13.
            unregister_webhook(self.plane, "upgrades")
            locker.stop()
            locker = Locker(self.plane, "upgrades-2", "--lease-name", "upgrades", "--revert=false").wait_ready(timeout=300)
            register_webhook(self.plane, locker, "upgrades")
            self.assertTrue(eventually(lambda: denied_at(13), 20, 0.3), "a fresh locker does not lock revision 13")
            release.upgrade(CHART, "shop", {"greeting": "v14"}, max_history=10)
            self.assertTrue(eventually(lambda: denied_at(14), 20, 0.3), "not locked at revision 14")
        finally:
            unregister_webhook(self.plane, "upgrades")
            locker.stop()

    def test_3_a_watch_expiry_lists_again_and_decodes_only_what_changed(self):
        locker = Locker(self.plane, "relist", "--lease-name", "relist", "--revert=false").wait_ready(timeout=300)
        try:
            # test_2 may have left its release: every release of the namespace, and that one.
            self.assertTrue(eventually(lambda: locker.metric("helm_locker_releases_indexed") >= RELEASES, 30, 0.5))
            indexed = locker.metric("helm_locker_releases_indexed")
            decoded = locker.metric("helm_locker_release_secrets_decoded_total")
            unchanged = locker.metric("helm_locker_release_secrets_unchanged_total")
            lists = locker.metric("helm_locker_release_secret_lists_total")
            # The peak of the list again, apart from start-up's: the old index stays alive while
            # the new list arrives (docs/performance.md, the chart's memory limit).
            rss_before = rss_mib(locker.process.pid)
            reset_peak(locker.process.pid)
            # A write after the last event the locker saw: the restarted API server's watch cache
            # begins after the locker's resourceVersion, so resuming the watch is answered 410 Gone.
            self.ok(self.k("create", "configmap", "-n", "default", "relist-marker"))
            self.plane.stop_apiserver()
            try:
                self.assertTrue(locker.ready(), "not ready while the API server is away")
            finally:
                self.plane.start_apiserver()
            back = time.time()
            # Each release driver's watch lists again and counts one list: the ConfigMap
            # driver's (empty here) may finish first, so wait for the Secrets' list to be
            # through, every Secret kept or decoded.
            def secrets_listed_again():
                again = locker.metric("helm_locker_release_secrets_decoded_total") - decoded
                kept = locker.metric("helm_locker_release_secrets_unchanged_total") - unchanged
                return (locker.metric("helm_locker_release_secret_lists_total") > lists
                        and kept + again >= indexed + self.failed)

            relisted = eventually(secrets_listed_again, 300, 0.2)
            took = time.time() - back
            again = locker.metric("helm_locker_release_secrets_decoded_total") - decoded
            kept = locker.metric("helm_locker_release_secrets_unchanged_total") - unchanged
            self.assertTrue(relisted, f"no list again after the restart: kept {kept}, decoded {again}, "
                                      f"{indexed + self.failed} expected")
            self.assertTrue(eventually(lambda: locker.metric("helm_locker_releases_indexed") == indexed, 30, 0.5))
            watched_bytes, _ = self.list_bytes("owner=helm,status!=superseded")
            peak = rss_mib(locker.process.pid, "VmHWM")
            print(f"\nwatch expiry: listed again {watched_bytes / 2**20:.1f} MiB, kept {kept:.0f} Secrets unchanged "
                  f"and decoded {again:.0f}, done {took:.1f} s after the API server was back (the watcher's backoff "
                  f"included); RSS {rss_before:.0f} MiB before, peak {peak:.0f} MiB during the list again")
            # The list again is the start-up list (the newest and failed revisions, never the
            # superseded history), and none of it changed: each Secret is kept, not decoded
            # (the harness's author probe may be).
            self.assertLessEqual(again, 3)
            self.assertTrue(locker.ready())
            self.create_owned_config_map("app00002")
            register_webhook(self.plane, locker, "relist")
            try:
                denied = eventually(lambda: "revision 10, deployed" in self.k(
                    "-n", NAMESPACE, "patch", "configmap", "app00002-config", "--dry-run=server", "-p",
                    '{"data":{"revision":"3"}}').stderr, 20, 0.3)
                self.assertTrue(denied, "not locked after the list again")
            finally:
                unregister_webhook(self.plane, "relist")
        finally:
            self.k("delete", "configmap", "-n", "default", "relist-marker", "--ignore-not-found")
            locker.stop()

    def test_4_a_release_upgraded_while_the_locker_is_cut_off_is_locked_at_its_new_revision(self):
        took, decoded, relisted = self.upgrade_while_cut_off("app00004", "cutoff", restart_apiserver=False)
        # The API server's watch cache still held the locker's resourceVersion, so the watch
        # resumes with the events it missed.
        print(f"\ncut off: locked at revision {REVISIONS + 1} {took:.1f} s after the connection was back, "
              f"{decoded:.0f} Secrets decoded, {relisted:.0f} lists again (the watcher's backoff included)")

    def test_5_a_release_upgraded_while_the_locker_is_cut_off_and_its_watch_expires_is_listed_again(self):
        took, decoded, relisted = self.upgrade_while_cut_off("app00005", "expired", restart_apiserver=True)
        print(f"\ncut off, watch expired: locked at revision {REVISIONS + 1} {took:.1f} s after the connection was "
              f"back, {relisted:.0f} lists again, {decoded:.0f} Secrets decoded (the watcher's backoff included)")
        self.assertGreaterEqual(relisted, 1, "the change was not found by a list again")

    def test_6_a_streamed_start_indexes_what_a_list_does(self):
        # `auto` streams where the server's version has WatchList on by default (1.34), and
        # lists if the server then refuses the stream (kube-testenv's etcd 3.4.23 lacks the
        # progress requests 1.36's streamed watch needs); before 1.34 it lists without asking.
        auto = Locker(self.plane, "initial-auto", "--lease-name", "initial-auto", "--revert=false",
                      "--namespace", "default").wait_ready(timeout=120)
        try:
            log = auto.log_text()
        finally:
            auto.stop()
        refused = "the API server refuses a streamed list" in log
        streams = "streamed=true" in log
        if self.plane.minor is not None and self.plane.minor >= 34:
            self.assertTrue(streams or (refused and "streamed=false" in log), log[-3000:])
        else:
            self.assertFalse(refused or streams, log[-3000:])
            self.assertIn("streamed=false", log)
        print(f"\ninitial list: auto on kube-apiserver {self.plane.version}: "
              f"{'streamed' if streams else 'listed'}{' (the stream refused)' if refused else ''}")
        # The API server alone, twice each (the first warms what it reads from).
        for params, what in (({}, "consistent"), ({"resourceVersion": "0"}, "from its cache")):
            for _ in range(2):
                spent = control_plane_cpu_seconds(self.plane)
                took, pages, size = list_alone(self.plane, **params)
                spent = control_plane_cpu_seconds(self.plane) - spent
            print(f"\nthe API server's list alone, {what}: {took:.1f} s ({spent:.1f} s of etcd's and kube-apiserver's "
                  f"CPU), {pages} pages, {size / 2**20:.0f} MiB",
                  flush=True)
        # (name, list mode, binary): this build in each mode, and the previous build listed.
        runs = [(mode, mode, None) for mode in (["list", "stream"] if streams else ["list"])]
        runs += [(label, "list", binary) for binary, label in BEFORE]
        lockers, figures = {}, {}
        # Every release is in one namespace: past the default --max-namespace-objects (20,000), the
        # bound is raised to hold them all, as a cluster of that size would set it.
        bound = ["--max-namespace-objects", str(RELEASES * (OBJECTS + 1))] if RELEASES * (OBJECTS + 1) > 20000 else []
        # The first writes go to releases spread over the whole list, 100 allowed and 100 denied.
        sample = sorted({r * RELEASES // 200 for r in range(200)})
        try:
            # One at a time, so that each start has the machine to itself.
            for run, mode, binary in runs:
                started, spent = time.time(), control_plane_cpu_seconds(self.plane)
                locker = Locker(self.plane, f"initial-{run}", "--lease-name", f"initial-{run}", "--revert=false",
                                f"--initial-list={mode}", *bound, binary=binary).wait_ready(timeout=600)
                ready = time.time() - started
                lockers[run] = locker
                self.assertTrue(eventually(lambda: locker.metric("helm_locker_releases_indexed") >= RELEASES, 30, 0.5))
                figures[run] = {"ready": ready, "cpu": cpu_seconds(locker.process.pid),
                                "plane_cpu": control_plane_cpu_seconds(self.plane) - spent,
                                "rss": rss_mib(locker.process.pid),
                                "start_peak": rss_mib(locker.process.pid, "VmHWM"),
                                "indexed": locker.metric("helm_locker_releases_indexed"),
                                "objects": locker.metric("helm_locker_objects_indexed")}
                self.assertIn(f"streamed={'true' if mode == 'stream' else 'false'}", locker.log_text())
                allowed, denied = first_writes(locker, sample)
                figures[run]["first_writes"] = allowed, denied
                f = figures[run]
                print(f"\ninitial list, {run}: ready in {f['ready']:.1f} s ({f['cpu']:.1f} s of its CPU, {f['plane_cpu']:.1f} s of the API server's), RSS {f['rss']:.0f} MiB, "
                      f"start-up peak {f['start_peak']:.0f} MiB; first write to a locked object: allowed p50 "
                      f"{percentile(allowed, 0.5):.1f} ms, p99 {percentile(allowed, 0.99):.1f} ms; denied p50 "
                      f"{percentile(denied, 0.5):.1f} ms, p99 {percentile(denied, 0.99):.1f} ms", flush=True)
            counts = {mode: (f["indexed"], f["objects"]) for mode, f in figures.items()}
            self.assertEqual(len(set(counts.values())), 1, f"the modes index differently: {counts}")
            # A watch expiry: each lists again in its mode (kube-apiserver restarts after a write).
            before = {}
            for mode, locker in lockers.items():
                time.sleep(5)  # the index at rest, its freed memory returned
                figures[mode]["rest"] = rss_mib(locker.process.pid)
                reset_peak(locker.process.pid)
                before[mode] = (locker.metric("helm_locker_release_secret_lists_total"),
                                locker.metric("helm_locker_release_secrets_unchanged_total"),
                                locker.metric("helm_locker_release_secrets_decoded_total"))
            self.ok(self.k("create", "configmap", "-n", "default", "initial-marker"))
            self.plane.stop_apiserver()
            self.plane.start_apiserver()
            for mode, locker in lockers.items():
                lists, unchanged, decoded = before[mode]
                expected = figures[mode]["indexed"] + self.failed

                def listed_again():
                    # A locker busy listing may not answer /metrics within its timeout: not yet.
                    now = (locker.metric("helm_locker_release_secret_lists_total"),
                           locker.metric("helm_locker_release_secrets_unchanged_total"),
                           locker.metric("helm_locker_release_secrets_decoded_total"))
                    if None in now:
                        return False
                    return now[0] > lists and (now[1] - unchanged) + (now[2] - decoded) >= expected

                self.assertTrue(eventually(listed_again, 300, 0.2), f"{mode}: no list again after the restart")
                figures[mode]["relist_peak"] = rss_mib(locker.process.pid, "VmHWM")
                self.assertTrue(locker.ready())
                self.assertEqual(locker.metric("helm_locker_releases_indexed"), figures[mode]["indexed"])
            print(f"\ninitial list, {RELEASES} releases x {REVISIONS} revisions (+{self.failed} failed), "
                  f"kube-apiserver {self.plane.version}:")
            for mode, f in figures.items():
                print(f"  {mode:8}: ready in {f['ready']:.1f} s, RSS {f['rss']:.0f} MiB when ready, "
                      f"start-up peak {f['start_peak']:.0f} MiB ({f['start_peak'] / f['rest']:.2f}x rest), "
                      f"{f['rest']:.0f} MiB at rest, peak of the list again {f['relist_peak']:.0f} MiB "
                      f"({f['relist_peak'] / f['rest']:.2f}x rest)")
        finally:
            self.k("delete", "configmap", "-n", "default", "initial-marker", "--ignore-not-found")
            for locker in lockers.values():
                locker.stop()

    def upgrade_while_cut_off(self, release, name, restart_apiserver):
        """A locker behind a CutProxy; while it is cut off, `release` is upgraded to revision 11
        (and with `restart_apiserver`, kube-apiserver restarts, so the resumed watch is answered
        410 Gone). Checks the lock follows revision 11 once the connection is back, decoding only
        what changed; returns the seconds that took, the Secrets decoded and the lists again."""
        proxy = CutProxy(self.plane)
        locker = Locker(self.plane, name, "--lease-name", name, "--revert=false",
                        env=proxy.env).wait_ready(timeout=300)
        try:
            self.assertTrue(eventually(lambda: locker.metric("helm_locker_releases_indexed") >= RELEASES, 30, 0.5))
            self.create_owned_config_map(release)
            register_webhook(self.plane, locker, name)

            def denied_at(revision):
                return f"revision {revision}, deployed" in self.k(
                    "-n", NAMESPACE, "patch", "configmap", f"{release}-config", "--dry-run=server", "-p",
                    '{"data":{"revision":"3"}}').stderr

            self.assertTrue(eventually(lambda: denied_at(REVISIONS), 20, 0.3), "not locked before the cut")
            decoded = locker.metric("helm_locker_release_secrets_decoded_total")
            lists = locker.metric("helm_locker_release_secret_lists_total")
            proxy.cut()
            # Helm upgrades the release while the locker cannot hear of it: revision 11 deployed,
            # revision 10 superseded (written straight to the API server, not through the proxy).
            self.ok(self.k("create", "-f", "-", input=json.dumps(
                release_secret(release, NAMESPACE, [config_map(release, REVISIONS + 1)], revision=REVISIONS + 1))))
            self.ok(self.k("replace", "-f", "-", input=json.dumps(
                release_secret(release, NAMESPACE, [config_map(release, REVISIONS)], status="superseded",
                               revision=REVISIONS))))
            if restart_apiserver:
                # Its new watch cache begins after the upgrade: only a list again can tell the
                # locker what changed.
                self.plane.stop_apiserver()
                self.plane.start_apiserver()
            else:
                time.sleep(2)
            # Cut off, the locker keeps answering from what it knew.
            self.assertTrue(denied_at(REVISIONS), "the index stopped answering while cut off")
            self.assertTrue(locker.ready(), "not ready while cut off from the API server")
            proxy.restore()
            back = time.time()
            self.assertTrue(eventually(lambda: denied_at(REVISIONS + 1), 300, 0.5),
                            "not locked at the revision written while cut off")
            took = time.time() - back
            again = locker.metric("helm_locker_release_secrets_decoded_total") - decoded
            relisted = locker.metric("helm_locker_release_secret_lists_total") - lists
            # Only what changed is decoded, not the namespace's releases again.
            self.assertLessEqual(again, 5)
            return took, again, relisted
        finally:
            unregister_webhook(self.plane, name)
            locker.stop()
            proxy.close()

    def create_owned_config_map(self, release):
        """The ConfigMap the release's newest revision renders, created as Helm would (annotated)."""
        self.ok(self.k("create", "-f", "-", input=json.dumps(
            {**config_map(release, REVISIONS),
             "metadata": {"name": f"{release}-config", "namespace": NAMESPACE,
                          "annotations": {"meta.helm.sh/release-name": release,
                                          "meta.helm.sh/release-namespace": NAMESPACE}}})))

    def ok(self, out):
        self.assertEqual(out.returncode, 0, out.stderr)
        return out


if __name__ == "__main__":
    unittest.main()
