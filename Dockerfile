# syntax=docker/dockerfile:1
# servingsnap: the four binaries, static, in a distroless image, run as a
# non-root user. Build and run (README.md):
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t servingsnap .
#   docker run --rm -p 127.0.0.1:8815:8815 -v "$PWD/out/demo/snapshots:/data:ro" servingsnap
#
# The default command serves every dataset under /data (mount the snapshot
# root there, read-only is enough) with snapserve, the server binary that links
# no lake readers (it starts in milliseconds); the tools are beside it: run one
# with --entrypoint, e.g. docker run --entrypoint snapbuild servingsnap build ... Not built in CI (.ci/run), which has no
# container runtime; internal/lint/docker_test.go checks what it can.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG VERSION=dev
# CGO_ENABLED=0: a static binary that needs no libc in the final image.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/snapserve /out/snapbuild /out/snapinspect /out/snapverify /usr/local/bin/
# distroless' nonroot user (65532:65532); the snapshots are only read.
USER 65532:65532
# 8815: Arrow Flight; 9815: /metrics, /healthz, /readyz.
EXPOSE 8815 9815
# Inside the container all addresses must be bound to be reachable; what is
# exposed beyond the host is docker run's -p (publish on 127.0.0.1, as the
# README does, or configure --tls-cert/--tls-key before publishing wider).
ENTRYPOINT ["/usr/local/bin/snapserve"]
CMD ["--root", "/data", "--addr", "0.0.0.0:8815", "--http-addr", "0.0.0.0:9815"]
