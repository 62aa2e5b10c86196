#!/usr/bin/env bash
# The image, built on this machine without pulling anything (no registry, no Docker daemon):
#
#   scripts/image.sh     builds helm-locker:<version> with buildah from the Dockerfile's own runtime
#                        stage (FROM scratch, USER 65532:65532, ENTRYPOINT helm-locker serve), prints
#                        its size, runs `helm-locker --version` in it, and writes
#                        target/image/helm-locker-<version>.tar (docker-archive: `docker load -i`,
#                        `ctr images import`; tests/e2e/test_node.py imports it into its node).
#
# Where a registry is reachable, `docker build -t helm-locker:<version> .` builds the same runtime
# stage from the Dockerfile's builder stage (rust:1.95-bookworm). Here the same two static binaries
# are compiled on the host (`cargo build --profile image`, glibc linked statically) and handed to the
# runtime stage with --build-arg BINARIES=<a local image holding them in /usr/local/bin>; the builder
# stage is then unused and never pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
tag=helm-locker:$version
# A target directory of its own: other RUSTFLAGS would otherwise rebuild target/release.
export CARGO_TARGET_DIR=${IMAGE_TARGET_DIR:-$PWD/target/image}
archive=$CARGO_TARGET_DIR/helm-locker-$version.tar

if ! command -v buildah >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
fi

start=$(date +%s)
RUSTFLAGS='-C target-feature=+crt-static' cargo build --locked --profile image \
  --target x86_64-unknown-linux-gnu --workspace --bin helm-locker --bin certs-gen
bin=$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/image
for b in helm-locker certs-gen; do
  if ldd "$bin/$b" 2>&1 | grep -q '=>'; then
    echo "image.sh: $bin/$b is dynamically linked; a FROM scratch image cannot run it" >&2; exit 1
  fi
done

# The binaries, where the Dockerfile's builder stage installs them.
ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah copy -q "$ctr" "$bin/helm-locker" "$bin/certs-gen" /usr/local/bin/ >/dev/null
buildah commit -q --rm "$ctr" "localhost/helm-locker-binaries:$version" >/dev/null
trap - EXIT

previous=$(buildah images -q "localhost/$tag" 2>/dev/null || true)
buildah bud -q --layers=false --build-arg "BINARIES=localhost/helm-locker-binaries:$version" \
  -t "$tag" -f Dockerfile . >/dev/null
# (-f: bud leaves a working container of the `binaries` stage behind)
buildah rmi -f "localhost/helm-locker-binaries:$version" >/dev/null
# The image this build replaced, now untagged.
[[ -z $previous || $previous == $(buildah images -q "localhost/$tag") ]] || buildah rmi "$previous" >/dev/null 2>&1 || true
rm -f "$archive"
# Named as `docker build -t helm-locker:<version>` names it (docker.io/library/...), which is what
# the chart's default image.repository resolves to on a node.
buildah push -q "localhost/$tag" "docker-archive:$archive:docker.io/library/$tag" >/dev/null

# Run the entrypoint's binary in the image, as the image's user, with no network.
run=$(buildah from -q "localhost/$tag")
trap 'buildah rm "$run" >/dev/null 2>&1 || true' EXIT
got=$(buildah run --network none "$run" -- /usr/local/bin/helm-locker --version)
user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "localhost/$tag")
entrypoint=$(buildah inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "localhost/$tag")
[[ $got == "helm-locker $version" ]] || { echo "image.sh: --version printed '$got'" >&2; exit 1; }

size=$(buildah images --format '{{.Size}}' "localhost/$tag" | head -n1)
echo "image: $tag (localhost/$tag in buildah's storage), $size; archive $archive $(du -h "$archive" | cut -f1)"
echo "  user $user, entrypoint $entrypoint"
echo "  helm-locker $(du -h "$bin/helm-locker" | cut -f1), certs-gen $(du -h "$bin/certs-gen" | cut -f1) (static, stripped)"
echo "  in the image: $got"
echo "  built in $(($(date +%s) - start)) s"
