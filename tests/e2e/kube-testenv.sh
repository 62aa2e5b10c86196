#!/usr/bin/env bash
# kube-testenv.sh: a real Kubernetes control plane on loopback, for tests.
# (helm-locker's copy of the shared tool, so the end-to-end suite runs outside this workplace.)
#
#   kube-testenv.sh build            build kube-apiserver + kube-controller-manager (cached)
#   kube-testenv.sh up DIR           start etcd, kube-apiserver and kube-controller-manager;
#                                    writes DIR/kubeconfig (admin) and DIR/env (exports)
#   kube-testenv.sh down DIR         stop what `up DIR` started
#   kube-testenv.sh build-node       also build kubelet, kube-scheduler, kube-proxy (cached)
#   kube-testenv.sh node-check | node-up DIR | node-import DIR ARCHIVE | node-down DIR
#                                    the same control plane plus one node that runs pods (below)
#   kube-testenv.sh unpack SRC       unpack a directory of xz-compressed binaries (`NAME.xz`, as
#                                    ../shared/kube/v1.36.2 holds them) into the cache; prints the
#                                    directory to give as KUBEBUILDER_ASSETS
#   kube-testenv.sh version          the kube-apiserver `up` starts (`Kubernetes v1.20.15`)
#
# Binaries of another Kubernetes version: set KUBEBUILDER_ASSETS (controller-runtime's envtest
# convention, what `setup-envtest use -p path` prints) or KUBE_TESTENV_BIN_DIR to a directory holding
# kube-apiserver and kube-controller-manager (and kubelet, kube-scheduler, kube-proxy for a node;
# kubectl, when there, is the one `up` and the tests use). Nothing is built then.
#
# Everything comes from Debian's archive by package name: etcd-server and golang-go
# as binaries, and the source package `kubernetes` (1.20.x, vendored Go modules), from
# which kube-apiserver and kube-controller-manager are compiled in GOPATH mode.
# With `up`, no pods run (no kubelet, no scheduler); every API object and every controller that
# writes to them (deployment, replicaset, garbage collector, namespace, ...) is real. With
# `node-up`, pods run too (see "One node" below).
#
# Users (static tokens, see DIR/tokens.csv):
#   admin  / admintoken  group system:masters
#   alice  / alicetoken  group devs   (no RBAC grants; bind roles as a test needs)
#   system:kube-controller-manager / kcmtoken  (the controller manager's own identity)
set -euo pipefail

CACHE="${KUBE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-testenv}"
BIN="${KUBE_TESTENV_BIN_DIR:-${KUBEBUILDER_ASSETS:-$CACHE/bin}}"
# A directory of binaries given by the user is used as it is, never built into.
GIVEN_BIN=${KUBE_TESTENV_BIN_DIR:-${KUBEBUILDER_ASSETS:-}}
# The kubectl of the same version, when the directory has one (kubectl supports one minor version
# of skew either way).
if [[ -n $GIVEN_BIN && -x $GIVEN_BIN/kubectl ]]; then
  PATH="$GIVEN_BIN:$PATH"
fi

log() { printf 'kube-testenv: %s\n' "$*" >&2; }

need_pkgs() {
  local missing=()
  command -v go >/dev/null || missing+=(golang-go)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v kubectl >/dev/null || missing+=(kubernetes-client)
  command -v openssl >/dev/null || missing+=(openssl)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# The vendored modern-go/reflect2 v1.0.1 crashes under Go >= 1.18 (Debian's Go is 1.19) the
# first time json-iterator walks a map, e.g. when a custom resource is stored. Upstream fixed it
# in v1.0.2: reflect.mapiterinit now fills a caller-allocated iterator of the runtime's size.
patch_reflect2() {
  python3 - "$1" <<'PY'
import pathlib, re, sys
d = pathlib.Path(sys.argv[1])
link = d / "unsafe_link.go"
s = link.read_text()
s = s.replace("func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter",
              "func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)")
s = re.sub(r"type hiter struct \{.*?\n\}", """type hiter struct {
	key         unsafe.Pointer
	value       unsafe.Pointer
	t           unsafe.Pointer
	h           unsafe.Pointer
	buckets     unsafe.Pointer
	bptr        unsafe.Pointer
	overflow    *[]unsafe.Pointer
	oldoverflow *[]unsafe.Pointer
	startBucket uintptr
	offset      uint8
	wrapped     bool
	B           uint8
	i           uint8
	bucket      uintptr
	checkBucket uintptr
}""", s, flags=re.S)
link.write_text(s)
m = d / "unsafe_map.go"
s = m.read_text()
old = """	return &UnsafeMapIterator{
		hiter:      mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj)),"""
assert old in s, "reflect2 layout changed"
s = s.replace(old, """	var it hiter
	mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
	return &UnsafeMapIterator{
		hiter:      &it,""")
m.write_text(s)
PY
}

# build [COMMAND...]: compile those of the given commands not yet cached (default: the control plane).
build() {
  need_pkgs
  local want=("$@") missing=() cmd
  ((${#want[@]})) || want=(kube-apiserver kube-controller-manager)
  for cmd in "${want[@]}"; do [[ -x "$BIN/$cmd" ]] || missing+=("$cmd"); done
  if ((${#missing[@]} == 0)); then
    log "binaries in $BIN: $(version)"; return
  fi
  if [[ -n $GIVEN_BIN ]]; then
    log "$GIVEN_BIN lacks ${missing[*]} (KUBEBUILDER_ASSETS or KUBE_TESTENV_BIN_DIR)"; exit 1
  fi
  local work="$CACHE/src"
  rm -rf "$work"; mkdir -p "$work/parts" "$work/lists" "$BIN"
  # A private deb-src list: the system's apt configuration is left as it is.
  cat >"$work/parts/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  local o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists")
  log "fetching Debian source package 'kubernetes'"
  apt-get "${o[@]}" update -qq 2>/dev/null
  (cd "$work" && apt-get "${o[@]}" source --download-only kubernetes >/dev/null 2>&1)
  local tarball; tarball=$(ls "$work"/kubernetes_*.orig.tar.gz | head -n1)
  mkdir -p "$work/gopath/src/k8s.io/kubernetes"
  tar xzf "$tarball" -C "$work/gopath/src/k8s.io/kubernetes" --strip-components=1
  export GOPATH="$work/gopath" GOCACHE="$CACHE/gocache" GO111MODULE=off
  cd "$work/gopath/src/k8s.io/kubernetes"
  patch_reflect2 vendor/github.com/modern-go/reflect2
  # The OpenAPI definitions are generated at build time upstream (Makefile.generated_files).
  log "generating OpenAPI definitions"
  go build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  local dirs
  dirs=$(grep -Rl --include='*.go' '^// *+k8s:openapi-gen=' pkg cmd plugin vendor/k8s.io 2>/dev/null \
    | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' -e '_test.go$' \
    | xargs -n1 dirname | LC_ALL=C sort -u | sed 's#^#k8s.io/kubernetes/#' | paste -sd,)
  "$work/openapi-gen" -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$work/violations.report" >/dev/null 2>&1
  for cmd in "${missing[@]}"; do
    log "compiling $cmd (several minutes on two cores)"
    go build -o "$BIN/$cmd" "./cmd/$cmd"
  done
  rm -rf "$work"
  log "built into $BIN"
}

# The server version of the binaries in use, as `kubectl version` prints it.
version() { "$BIN/kube-apiserver" --version 2>/dev/null || echo "no kube-apiserver in $BIN"; }

# `--port=0` (no insecure port) where the binary still has the flag: 1.23 removed it from the
# controller manager and the scheduler, which serve only securely since.
insecure_port_off() {
  # The help text is read whole first: `grep -q` stopping early would fail the pipe (SIGPIPE,
  # pipefail), and a second control plane's controller manager would then die on port 10252.
  local help
  help=$("$BIN/$1" --help 2>&1 || true)
  if [[ $help == *"--port int"* ]]; then echo --port=0; fi
}

# Unpacks SRC/NAME.xz (after checking SRC/SHA256SUMS when there) into the cache; prints the
# directory.
unpack() {
  local src="${1:?usage: kube-testenv.sh unpack SRC}" dest f name
  src=$(cd "$src" && pwd)
  dest="$CACHE/unpacked/$(basename "$src")"
  if [[ ! -f $dest/.complete ]]; then
    command -v xz >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xz-utils >/dev/null; }
    [[ ! -f $src/SHA256SUMS ]] || (cd "$src" && sha256sum --quiet -c SHA256SUMS) >&2
    rm -rf "$dest"; mkdir -p "$dest"
    for f in "$src"/*.xz; do
      name=$(basename "$f" .xz)
      xz -dc "$f" >"$dest/$name.tmp" && chmod +x "$dest/$name.tmp" && mv "$dest/$name.tmp" "$dest/$name"
    done
    touch "$dest/.complete"
    log "unpacked $src into $dest"
  fi
  echo "$dest"
}

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# A port picked by free_port is free only until another process takes it, so a server that cannot
# bind is started again on new ports (up to five times). Sets ETCD_PORT; the process is running
# and answers /health when it returns.
start_etcd() {
  local dir=$1 peer_port
  for _ in 1 2 3 4 5; do
    ETCD_PORT=$(free_port); peer_port=$(free_port)
    rm -rf "$dir/etcd"
    etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$peer_port" \
      >>"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    for _ in $(seq 1 100); do
      curl -sf --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && return 0
      kill -0 "$(cat "$dir/etcd.pid")" 2>/dev/null || break
      sleep 0.2
    done
    kill "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    wait "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    log "etcd did not start on port $ETCD_PORT; trying another (see $dir/etcd.log)"
  done
  log "etcd did not start; see $dir/etcd.log"; exit 1
}

# Starts kube-apiserver on a free port (new ports while it cannot bind) and waits for /readyz.
# Sets API_PORT.
start_apiserver() {
  local dir=$1 host=$2 authz=$3; shift 3
  local kc="$dir/kubeconfig"
  for _ in 1 2 3 4 5; do
    API_PORT=$(free_port)
    "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" --cert-dir "$dir/pki" \
      --secure-port "$API_PORT" --bind-address "$host" --advertise-address "$host" \
      --authorization-mode "$authz" --token-auth-file "$dir/tokens.csv" \
      --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
      --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.0.0.0/24 \
      "$@" >>"$dir/apiserver.log" 2>&1 &
    echo $! >"$dir/apiserver.pid"
    kubectl config --kubeconfig="$kc" set-cluster local --server="https://$host:$API_PORT" \
      --insecure-skip-tls-verify=true >/dev/null
    kubectl config --kubeconfig="$kc" set-credentials admin --token=admintoken >/dev/null
    kubectl config --kubeconfig="$kc" set-context local --cluster=local --user=admin >/dev/null
    kubectl config --kubeconfig="$kc" use-context local >/dev/null
    for _ in $(seq 1 60); do
      kubectl --kubeconfig="$kc" --request-timeout=2s get --raw /readyz >/dev/null 2>&1 && return 0
      kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null || break
      sleep 1
    done
    kill "$(cat "$dir/apiserver.pid")" 2>/dev/null || true
    wait "$(cat "$dir/apiserver.pid")" 2>/dev/null || true
    log "kube-apiserver did not become ready on port $API_PORT; trying another (see $dir/apiserver.log)"
  done
  log "apiserver not ready; see $dir/apiserver.log"; exit 1
}

up() {
  local dir="${1:?usage: kube-testenv.sh up DIR}"
  # node-up: the API server listens on the node's bridge address (pods reach it there and through
  # the `kubernetes` Service), mounts service account tokens into pods, authorizes the kubelet.
  local host=127.0.0.1 node_flags=(--endpoint-reconciler-type none --disable-admission-plugins ServiceAccount)
  local authz=RBAC
  if [[ -n ${UP_NODE_ADDR:-} ]]; then
    host=$UP_NODE_ADDR authz=Node,RBAC
    node_flags=(--endpoint-reconciler-type lease --kubelet-preferred-address-types InternalIP)
  fi
  build
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  printf 'admintoken,admin,admin,system:masters\nalicetoken,alice,alice,devs\nkcmtoken,system:kube-controller-manager,kcm\n' \
    >"$dir/tokens.csv"
  [[ -z ${UP_NODE_ADDR:-} ]] || printf '%s\n' "kubelettoken,system:node:$UP_NODE_NAME,kubelet,system:nodes" \
    schedulertoken,system:kube-scheduler,scheduler proxytoken,system:kube-proxy,proxy >>"$dir/tokens.csv"
  start_etcd "$dir"
  start_apiserver "$dir" "$host" "$authz" "${node_flags[@]}"
  local kc="$dir/kubeconfig" api_port=$API_PORT
  # The controller manager runs as itself, each controller under its own service account,
  # as kubeadm sets it up: their writes reach webhooks as system:serviceaccount:kube-system:*.
  local kcm_kc="$dir/controller-manager.kubeconfig"
  kubectl config --kubeconfig="$kcm_kc" set-cluster local --server="https://$host:$api_port" \
    --insecure-skip-tls-verify=true >/dev/null
  kubectl config --kubeconfig="$kcm_kc" set-credentials kcm --token=kcmtoken >/dev/null
  kubectl config --kubeconfig="$kcm_kc" set-context local --cluster=local --user=kcm >/dev/null
  kubectl config --kubeconfig="$kcm_kc" use-context local >/dev/null
  "$BIN/kube-controller-manager" --kubeconfig "$kcm_kc" --leader-elect=false $(insecure_port_off kube-controller-manager) \
    --bind-address 127.0.0.1 --secure-port 0 --controllers '*' --use-service-account-credentials=true \
    --service-account-private-key-file "$dir/sa.key" --root-ca-file "$dir/pki/apiserver.crt" \
    >"$dir/controller-manager.log" 2>&1 &
  echo $! >"$dir/controller-manager.pid"
  printf 'export KUBECONFIG=%s\nexport KUBE_TESTENV_API=https://%s:%s\n' "$kc" "$host" "$api_port" >"$dir/env"
  # Up means as a cluster is when people use it: the controller manager has filled the
  # aggregated roles (`edit`, `view`, `admin` start with no rules), or a binding to `edit`
  # made by a test grants nothing for a while.
  local i
  for i in $(seq 1 300); do
    [[ -n $(kubectl --kubeconfig="$kc" get clusterrole edit -o jsonpath='{.rules[0].verbs}' 2>/dev/null) ]] && break
    sleep 0.2
  done
  [[ -n $(kubectl --kubeconfig="$kc" get clusterrole edit -o jsonpath='{.rules[0].verbs}' 2>/dev/null) ]] \
    || { log "the controller manager never filled the aggregated roles; see $dir/controller-manager.log"; exit 1; }
  log "up: KUBECONFIG=$kc"
}

# Each process is gone before the next is stopped: kube-apiserver 1.36 shutting down waits for
# etcd (its endpoint reconciler), and with etcd stopped at once it waited forever, one left
# running after every control plane. Its graceful shutdown keeps nothing a test needs, so it
# gets SIGKILL; the others SIGTERM, then SIGKILL after 20 s. Gone means exited: a zombie (the
# process is orphaned, its reaper may take a while) counts as gone.
down() {
  local dir="${1:?usage: kube-testenv.sh down DIR}" pid i state
  for p in controller-manager apiserver etcd; do
    [[ -f "$dir/$p.pid" ]] || continue
    pid=$(cat "$dir/$p.pid")
    if [[ $p == apiserver ]]; then kill -9 "$pid" 2>/dev/null || true; else kill "$pid" 2>/dev/null || true; fi
    for i in $(seq 1 200); do
      state=$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f2) || true
      [[ -n $state && $state != Z ]] || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$p.pid"
  done
}

# ---------------------------------------------------------------------------------------------
# One node beside the control plane: kubelet, kube-scheduler, kube-proxy (the `build-node`
# binaries), containerd and runc, pods on a bridge of this machine. From Debian's archive:
# containerd, runc, containernetworking-plugins, iptables, conntrack, buildah (images), gcc (pause).
#
#   kube-testenv.sh node-check         exit 0 if this machine can run the node, else print why (exit 3)
#   kube-testenv.sh node-up DIR        `up DIR` with the API server on the node's address, plus the node
#   kube-testenv.sh node-import DIR TAR   import an image archive (docker-archive) into the node
#   kube-testenv.sh node-down DIR      stop all of it and undo what node-up changed on this machine
#
# Networking stays on this machine: a bridge (kte0, $NODE_ADDR/16) that node-up creates, the pods'
# network namespaces on it (CNI bridge + host-local), the API server and the kubelet listening on
# $NODE_ADDR only, a route for the Service range (10.0.0.0/24) onto the bridge and nowhere else.
# IP forwarding is left off and nothing is masqueraded, so no pod packet leaves the bridge.
# No image is pulled: the sandbox image is a pause binary compiled here (gcc -static) and put in a
# `FROM scratch` image with buildah, cached in $CACHE/pause.tar.
NODE_ADDR=${KUBE_TESTENV_NODE_IP:-10.244.0.1}
NODE_NAME=node-1
NODE_BRIDGE=kte0
NODE_POD_CIDR=${NODE_ADDR%.*.*}.0.0/16
SERVICE_CIDR=10.0.0.0/24
PAUSE_IMAGE=localhost/kube-testenv/pause:1
# Host settings the kubelet (its kernel tunables) and kube-proxy (route_localnet) change: node-down
# puts them back.
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables)

need_node_pkgs() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  command -v ip >/dev/null || missing+=(iproute2)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# What a node needs of the machine; the first thing missing is printed, with its error.
node_check() {
  local why="" out
  # The packages first (as root): a missing one is something to install, not a reason to skip.
  [[ $(id -u) != 0 ]] || need_node_pkgs
  if [[ $(id -u) != 0 ]]; then why="not root (a kubelet and containerd need root)"
  elif ! grep -qw overlay /proc/filesystems; then why="no overlay filesystem in /proc/filesystems"
  elif [[ ! -f /sys/fs/cgroup/cgroup.controllers ]] && ! { [[ -d /sys/fs/cgroup/memory ]] && [[ -d /sys/fs/cgroup/cpu ]] && [[ -d /sys/fs/cgroup/pids ]]; }; then
    why="cgroup v1 controllers memory, cpu, pids are not all mounted under /sys/fs/cgroup"
  elif ! out=$(ip link add kte-probe type bridge 2>&1); then why="cannot create a bridge: $out"
  elif ! { ip link del kte-probe; out=$(ip netns add kte-probe 2>&1); }; then why="cannot create a network namespace: $out"
  elif ! { ip netns del kte-probe; out=$(iptables -t nat -S 2>&1); }; then why="iptables (nat) does not work: $out"
  fi
  if [[ -n $why ]]; then echo "this machine cannot run a node: $why"; return 3; fi
}

# CAP_SYS_RESOURCE (bit 24) in this process's effective set.
capsh_has_sys_resource() {
  local eff; eff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
  (( (16#$eff >> 24) & 1 ))
}

build_pause() {
  [[ -s "$CACHE/pause.tar" ]] && return
  local work; work=$(mktemp -d)
  # What the Kubernetes pause container does: hold the pod's namespaces, reap, exit on a signal.
  cat >"$work/pause.c" <<'EOF'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit); signal(SIGTERM, quit); signal(SIGCHLD, reap);
  for (;;) pause();
}
EOF
  gcc -Os -static -o "$work/pause" "$work/pause.c" && strip "$work/pause"
  local ctr; ctr=$(buildah from scratch)
  buildah copy "$ctr" "$work/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
  buildah commit -q "$ctr" "$PAUSE_IMAGE" >/dev/null
  buildah rm "$ctr" >/dev/null
  rm -f "$CACHE/pause.tar"
  buildah push -q "$PAUSE_IMAGE" "docker-archive:$CACHE/pause.tar:$PAUSE_IMAGE" >/dev/null
  buildah rmi "$PAUSE_IMAGE" >/dev/null
  rm -rf "$work"
}

kubeconfig_for() { # FILE SERVER TOKEN
  kubectl config --kubeconfig="$1" set-cluster local --server="$2" --certificate-authority="$DIR_PKI/apiserver.crt" >/dev/null
  kubectl config --kubeconfig="$1" set-credentials u --token="$3" >/dev/null
  kubectl config --kubeconfig="$1" set-context local --cluster=local --user=u >/dev/null
  kubectl config --kubeconfig="$1" use-context local >/dev/null
}

node_up() {
  local dir="${1:?usage: kube-testenv.sh node-up DIR}"
  node_check >&2 || exit 3
  need_node_pkgs
  build kube-apiserver kube-controller-manager kubelet kube-scheduler kube-proxy
  build_pause
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    log "$NODE_BRIDGE exists: another node is up, or one was not taken down (kube-testenv.sh node-down ITS_DIR)"
    exit 1
  fi
  local s; for s in "${NODE_SYSCTLS[@]}"; do printf '%s=%s\n' "$s" "$(sysctl -n "$s")"; done >"$dir/sysctls.saved"
  ip netns list | awk '{print $1}' | sort >"$dir/netns.before"
  iptables-save | grep -c 'KUBE-' >"$dir/iptables.before" || true
  # The kubelet writes container logs to /var/log/pods (fixed in 1.20) and links /var/log/containers.
  ls /var/log/pods /var/log/containers 2>/dev/null | sort >"$dir/logs.before" || true
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_ADDR/16" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  ip route add "$SERVICE_CIDR" dev "$NODE_BRIDGE"
  UP_NODE_ADDR=$NODE_ADDR UP_NODE_NAME=$NODE_NAME up "$dir"
  local api; api=$(sed -n 's/^export KUBE_TESTENV_API=//p' "$dir/env")
  DIR_PKI=$dir/pki

  # containerd: its own root, state and socket in DIR; the CRI plugin's CNI config too.
  mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  # Without CAP_SYS_RESOURCE (a sandbox may withhold it) no process may lower its oom_score_adj,
  # and runc fails every sandbox (-998) with "can't get final child's PID from pipe: EOF".
  # Restricted, containers get at least containerd's own score instead.
  restrict_oom_score_adj = $(capsh_has_sys_resource && echo false || echo true)
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  cat >"$dir/cni/net.d/10-kube-testenv.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "kube-testenv", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
            "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_ADDR"}]],
            "routes": [{"dst": "0.0.0.0/0", "gw": "$NODE_ADDR"}]}}]}
EOF
  containerd --config "$dir/containerd/config.toml" >"$dir/containerd.log" 2>&1 &
  echo $! >"$dir/containerd.pid"
  local sock="$dir/containerd/containerd.sock"
  for _ in $(seq 1 50); do ctr --address "$sock" version >/dev/null 2>&1 && break; sleep 0.2; done
  node_import "$dir" "$CACHE/pause.tar"

  kubeconfig_for "$dir/scheduler.kubeconfig" "$api" schedulertoken
  "$BIN/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" --leader-elect=false $(insecure_port_off kube-scheduler) \
    --secure-port=0 >"$dir/scheduler.log" 2>&1 &
  echo $! >"$dir/scheduler.pid"

  local kubelet_port; kubelet_port=$(free_port)
  kubeconfig_for "$dir/kubelet.kubeconfig" "$api" kubelettoken
  mkdir -p "$dir/kubelet"
  # The disk of a CI machine is often mostly full: eviction and image GC thresholds that would
  # evict the test's pods or delete its imported images are turned down.
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_ADDR
port: $kubelet_port
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 30
EOF
  # Flags and settings by kubelet version: 1.27 dropped --container-runtime (remote is the only
  # one), 1.35 --pod-infra-container-image (containerd's sandbox image, set above, is used); since
  # 1.31 a kubelet on cgroup v1 needs failCgroupV1: false, and since 1.35 refuses to start without.
  local kubelet_help version_flags=()
  kubelet_help=$("$BIN/kubelet" --help 2>&1 || true)
  [[ $kubelet_help != *"--container-runtime string"* ]] || version_flags+=(--container-runtime remote)
  [[ $kubelet_help != *"--pod-infra-container-image"* ]] || version_flags+=(--pod-infra-container-image "$PAUSE_IMAGE")
  if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]] && [[ $("$BIN/kubelet" --version) =~ v1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 31)); then
    echo "failCgroupV1: false" >>"$dir/kubelet.yaml"
  fi
  "$BIN/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$NODE_NAME" \
    --node-ip "$NODE_ADDR" --container-runtime-endpoint "unix://$sock" "${version_flags[@]}" \
    --volume-plugin-dir "$dir/kubelet/volume-plugins" \
    >"$dir/kubelet.log" 2>&1 &
  echo $! >"$dir/kubelet.pid"

  kubeconfig_for "$dir/proxy.kubeconfig" "$api" proxytoken
  # Conntrack limits and timeouts are left as the machine has them.
  "$BIN/kube-proxy" --kubeconfig "$dir/proxy.kubeconfig" --hostname-override "$NODE_NAME" \
    --proxy-mode iptables --cluster-cidr "$NODE_POD_CIDR" --bind-address "$NODE_ADDR" \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
    --healthz-bind-address "127.0.0.1:$(free_port)" --metrics-bind-address "127.0.0.1:$(free_port)" \
    >"$dir/proxy.log" 2>&1 &
  echo $! >"$dir/proxy.pid"

  local kc="$dir/kubeconfig"
  for _ in $(seq 1 120); do
    [[ $(kubectl --kubeconfig "$kc" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] && break
    sleep 1
  done
  if [[ $(kubectl --kubeconfig "$kc" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) != True ]]; then
    log "node $NODE_NAME not Ready; see $dir/kubelet.log, $dir/containerd.log"; exit 1
  fi
  printf 'export KUBE_TESTENV_NODE=%s\nexport KUBE_TESTENV_CONTAINERD=%s\n' "$NODE_NAME" "$sock" >>"$dir/env"
  log "node $NODE_NAME Ready (pods on $NODE_BRIDGE, $NODE_POD_CIDR)"
}

node_import() {
  local dir="${1:?}" tar="${2:?usage: kube-testenv.sh node-import DIR ARCHIVE}"
  ctr --address "$dir/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null
}

# The kubelet's and kube-proxy's iptables chains (KUBE-*) and the jumps to them, when there were
# none before node-up.
iptables_cleanup() {
  local t rule chain
  for t in nat filter mangle; do
    iptables-save -t "$t" | grep -E '^-A (PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) .*-j KUBE-' | while read -r rule; do
      eval "iptables -t $t -D ${rule#-A }" 2>/dev/null || true
    done || true
    for chain in $(iptables-save -t "$t" | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p'); do iptables -t "$t" -F "$chain"; done
    for chain in $(iptables-save -t "$t" | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p'); do iptables -t "$t" -X "$chain" 2>/dev/null || true; done
  done
}

stop_pid() { # DIR NAME [SIGNAL]
  [[ -f "$1/$2.pid" ]] || return 0
  local pid; pid=$(cat "$1/$2.pid")
  kill "-${3:-TERM}" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1/$2.pid"
}

node_down() {
  local dir="${1:?usage: kube-testenv.sh node-down DIR}"
  dir=$(cd "$dir" && pwd)
  local kc="$dir/kubeconfig" sock="$dir/containerd/containerd.sock"
  # Pods first, while the kubelet runs: it stops them and their networks are torn down (CNI DEL).
  if [[ -f "$dir/kubelet.pid" ]]; then
    kubectl --kubeconfig "$kc" delete deploy,rs,sts,ds,job --all -A --wait=false >/dev/null 2>&1 || true
    kubectl --kubeconfig "$kc" delete pods --all -A --grace-period=2 --timeout=60s >/dev/null 2>&1 || true
  fi
  stop_pid "$dir" kubelet
  stop_pid "$dir" scheduler
  stop_pid "$dir" proxy
  [[ -x "$BIN/kube-proxy" ]] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  [[ $(cat "$dir/iptables.before" 2>/dev/null) == 0 ]] && iptables_cleanup
  # What the kubelet left running: the shims of our containerd (found by its socket), then containerd.
  if [[ -S $sock ]]; then
    local t
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
    done
  fi
  stop_pid "$dir" containerd
  local p
  for p in $(pgrep -f containerd-shim || true); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$sock" && kill -KILL "$p" 2>/dev/null || true
  done
  for p in controller-manager apiserver etcd; do stop_pid "$dir" "$p"; done
  # Mounts under DIR (containerd's rootfs, the kubelet's volumes and its own bind mount), deepest first.
  awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  # The images and containers' layers (the logs stay).
  rm -rf "$dir/containerd/root" "$dir/containerd/state"
  if [[ -f "$dir/netns.before" ]]; then
    ip netns list | awk '{print $1}' | sort | comm -13 "$dir/netns.before" - | while read -r n; do
      ip netns del "$n" 2>/dev/null || true
    done
  fi
  if [[ -f "$dir/logs.before" ]]; then
    local d
    for d in /var/log/pods /var/log/containers; do
      ls "$d" 2>/dev/null | sort | comm -13 "$dir/logs.before" - | while read -r n; do
        # The containers' logs are kept in DIR/pod-logs (the links of /var/log/containers are not).
        [[ $d != /var/log/pods ]] || { mkdir -p "$dir/pod-logs" && cp -r "$d/$n" "$dir/pod-logs/"; }
        rm -rf "${d:?}/$n"
      done || true
    done
  fi
  ip route del "$SERVICE_CIDR" dev "$NODE_BRIDGE" 2>/dev/null || true
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
  if [[ -f "$dir/sysctls.saved" ]]; then
    while IFS= read -r kv; do sysctl -q -w "$kv" >/dev/null 2>&1 || true; done <"$dir/sysctls.saved"
    rm -f "$dir/sysctls.saved"
  fi
}

case "${1:-}" in
  build) build ;;
  build-node) build kube-apiserver kube-controller-manager kubelet kube-scheduler kube-proxy ;;
  up) up "${2:-}" ;;
  unpack) unpack "${2:-}" ;;
  version) version ;;
  down) down "${2:-}" ;;
  node-check) node_check ;;
  node-up) node_up "${2:-}" ;;
  node-import) node_import "${2:-}" "${3:-}" ;;
  node-down) node_down "${2:-}" ;;
  *) echo "usage: $0 build | build-node | up DIR | down DIR | node-check | node-up DIR | node-import DIR ARCHIVE | node-down DIR" >&2; exit 2 ;;
esac
