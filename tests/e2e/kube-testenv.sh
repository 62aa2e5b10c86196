#!/usr/bin/env bash
# kube-testenv.sh: a real Kubernetes control plane on loopback, for tests.
# (helm-locker's copy of the shared tool, so the end-to-end suite runs outside this workplace.)
#
#   kube-testenv.sh build            build kube-apiserver + kube-controller-manager (cached)
#   kube-testenv.sh up DIR           start etcd, kube-apiserver and kube-controller-manager;
#                                    writes DIR/kubeconfig (admin) and DIR/env (exports)
#   kube-testenv.sh down DIR         stop what `up DIR` started
#
# Everything comes from Debian's archive by package name: etcd-server and golang-go
# as binaries, and the source package `kubernetes` (1.20.x, vendored Go modules), from
# which kube-apiserver and kube-controller-manager are compiled in GOPATH mode.
# No pods run (no kubelet, no scheduler); every API object and every controller that
# writes to them (deployment, replicaset, garbage collector, namespace, ...) is real.
#
# Users (static tokens, see DIR/tokens.csv):
#   admin  / admintoken  group system:masters
#   alice  / alicetoken  group devs   (no RBAC grants; bind roles as a test needs)
#   system:kube-controller-manager / kcmtoken  (the controller manager's own identity)
set -euo pipefail

CACHE="${KUBE_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-testenv}"
BIN="$CACHE/bin"

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

build() {
  need_pkgs
  if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" ]]; then
    log "cached binaries in $BIN"; return
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
  for cmd in kube-apiserver kube-controller-manager; do
    log "compiling $cmd (several minutes on two cores)"
    go build -o "$BIN/$cmd" "./cmd/$cmd"
  done
  rm -rf "$work"
  log "built into $BIN"
}

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

up() {
  local dir="${1:?usage: kube-testenv.sh up DIR}"
  build
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  local etcd_port peer_port api_port
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  printf 'admintoken,admin,admin,system:masters\nalicetoken,alice,alice,devs\nkcmtoken,system:kube-controller-manager,kcm\n' \
    >"$dir/tokens.csv"
  etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
    >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" --cert-dir "$dir/pki" \
    --secure-port "$api_port" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none --authorization-mode RBAC --token-auth-file "$dir/tokens.csv" \
    --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.0.0.0/24 \
    --disable-admission-plugins ServiceAccount >"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
  local kc="$dir/kubeconfig"
  kubectl config --kubeconfig="$kc" set-cluster local --server="https://127.0.0.1:$api_port" \
    --insecure-skip-tls-verify=true >/dev/null
  kubectl config --kubeconfig="$kc" set-credentials admin --token=admintoken >/dev/null
  kubectl config --kubeconfig="$kc" set-context local --cluster=local --user=admin >/dev/null
  kubectl config --kubeconfig="$kc" use-context local >/dev/null
  for _ in $(seq 1 60); do
    kubectl --kubeconfig="$kc" get --raw /readyz >/dev/null 2>&1 && break
    sleep 1
  done
  kubectl --kubeconfig="$kc" get --raw /readyz >/dev/null || { log "apiserver not ready; see $dir/apiserver.log"; exit 1; }
  # The controller manager runs as itself, each controller under its own service account,
  # as kubeadm sets it up: their writes reach webhooks as system:serviceaccount:kube-system:*.
  local kcm_kc="$dir/controller-manager.kubeconfig"
  kubectl config --kubeconfig="$kcm_kc" set-cluster local --server="https://127.0.0.1:$api_port" \
    --insecure-skip-tls-verify=true >/dev/null
  kubectl config --kubeconfig="$kcm_kc" set-credentials kcm --token=kcmtoken >/dev/null
  kubectl config --kubeconfig="$kcm_kc" set-context local --cluster=local --user=kcm >/dev/null
  kubectl config --kubeconfig="$kcm_kc" use-context local >/dev/null
  "$BIN/kube-controller-manager" --kubeconfig "$kcm_kc" --leader-elect=false --port=0 \
    --bind-address 127.0.0.1 --secure-port 0 --controllers '*' --use-service-account-credentials=true \
    --service-account-private-key-file "$dir/sa.key" --root-ca-file "$dir/pki/apiserver.crt" \
    >"$dir/controller-manager.log" 2>&1 &
  echo $! >"$dir/controller-manager.pid"
  printf 'export KUBECONFIG=%s\nexport KUBE_TESTENV_API=https://127.0.0.1:%s\n' "$kc" "$api_port" >"$dir/env"
  log "up: KUBECONFIG=$kc"
}

down() {
  local dir="${1:?usage: kube-testenv.sh down DIR}"
  for p in controller-manager apiserver etcd; do
    [[ -f "$dir/$p.pid" ]] || continue
    kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
    rm -f "$dir/$p.pid"
  done
}

case "${1:-}" in
  build) build ;;
  up) up "${2:-}" ;;
  down) down "${2:-}" ;;
  *) echo "usage: $0 build | up DIR | down DIR" >&2; exit 2 ;;
esac
