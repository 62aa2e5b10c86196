# syntax=docker/dockerfile:1
# helm-locker's image: docker build -t helm-locker:0.1.0 .
# The runtime stage is `FROM scratch`: two static binaries and the license, running as UID 65532.
# scripts/image.sh builds the same runtime stage without pulling anything (no registry needed):
# it compiles the binaries on the host and passes them in with --build-arg BINARIES=<local image>.
ARG BINARIES=builder

# --- builder: dependencies first, in their own layer, so a source change rebuilds only ours.
FROM rust:1.95-bookworm AS builder
WORKDIR /src
# Static glibc binaries: nothing to load at run time, so the runtime stage needs no base image.
# (The locker reaches the API server at the IP in KUBERNETES_SERVICE_HOST: no NSS lookups.)
ENV RUSTFLAGS="-C target-feature=+crt-static"
# The `image` profile (Cargo.toml): release without debug info, stripped. (--target keeps the
# flag off build scripts and proc macros, which must stay dynamic.)
COPY Cargo.toml Cargo.lock ./
COPY certs-gen/Cargo.toml certs-gen/Cargo.toml
COPY core/Cargo.toml core/Cargo.toml
# Empty targets with the manifests' names: compiles every dependency once.
RUN mkdir -p src certs-gen/src core/src core/benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs core/src/lib.rs \
 && echo 'fn main() {}' > certs-gen/src/main.rs && touch certs-gen/src/lib.rs \
 && echo 'fn main() {}' > core/benches/core.rs \
 && cargo build --locked --profile image --target x86_64-unknown-linux-gnu --workspace \
      --bin helm-locker --bin certs-gen \
 && rm -rf src certs-gen/src core/src core/benches
COPY src src
COPY core/src core/src
COPY certs-gen/src certs-gen/src
COPY core/benches core/benches
# certs-gen embeds the webhook configurations (include_str!).
COPY webhook-config webhook-config
RUN touch src/main.rs src/lib.rs core/src/lib.rs certs-gen/src/lib.rs certs-gen/src/main.rs \
 && cargo build --locked --profile image --target x86_64-unknown-linux-gnu --workspace \
      --bin helm-locker --bin certs-gen \
 && install -D -t /usr/local/bin target/x86_64-unknown-linux-gnu/image/helm-locker \
      target/x86_64-unknown-linux-gnu/image/certs-gen

# --- where the runtime stage takes the binaries from: the builder above, or (scripts/image.sh)
# an image holding the same two files in /usr/local/bin.
FROM ${BINARIES} AS binaries

# --- runtime
FROM scratch AS runtime
COPY --from=binaries /usr/local/bin/helm-locker /usr/local/bin/helm-locker
COPY --from=binaries /usr/local/bin/certs-gen /usr/local/bin/certs-gen
COPY LICENSE /usr/share/doc/helm-locker/LICENSE
USER 65532:65532
# 8443: webhook (HTTPS); 8080: admin (/healthz, /readyz, /metrics).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/helm-locker", "serve"]
