# syntax=docker/dockerfile:1
# helm-locker's image: docker build -t helm-locker:0.1.0 .
# The runtime is distroless (glibc, CA certificates, no shell), running as UID 65532.

# --- builder: dependencies first, in their own layer, so a source change rebuilds only ours.
FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY certs-gen/Cargo.toml certs-gen/Cargo.toml
COPY core/Cargo.toml core/Cargo.toml
# Empty targets with the manifests' names: compiles every dependency once.
RUN mkdir -p src certs-gen/src core/src core/benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs core/src/lib.rs \
 && echo 'fn main() {}' > certs-gen/src/main.rs && touch certs-gen/src/lib.rs \
 && echo 'fn main() {}' > core/benches/core.rs \
 && cargo build --release --locked --bin helm-locker --bin certs-gen \
 && rm -rf src certs-gen/src core/src core/benches
COPY src src
COPY core/src core/src
COPY certs-gen/src certs-gen/src
COPY core/benches core/benches
# certs-gen embeds the webhook configurations (include_str!).
COPY webhook-config webhook-config
RUN touch src/main.rs src/lib.rs core/src/lib.rs certs-gen/src/lib.rs certs-gen/src/main.rs \
 && cargo build --release --locked --bin helm-locker --bin certs-gen \
 && strip target/release/helm-locker target/release/certs-gen

# --- runtime
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/helm-locker /usr/local/bin/helm-locker
COPY --from=builder /src/target/release/certs-gen /usr/local/bin/certs-gen
COPY LICENSE /usr/share/doc/helm-locker/LICENSE
USER 65532:65532
# 8443: webhook (HTTPS); 8080: admin (/healthz, /readyz, /metrics).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/helm-locker", "serve"]
