# quota_exporter: a static binary on an empty base image, for the host's architecture.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY VERSION Makefile ./
COPY exporter ./exporter
# The build context has no .git: pass the commit, or build_info says revision="unknown":
#   docker build --build-arg REVISION=$(git rev-parse --short HEAD) .
# (make image builds the same image without a container engine: docs/release.md.)
ARG REVISION=unknown
RUN make build CGO_ENABLED=0 REVISION=$REVISION

FROM scratch
COPY --from=build /src/bin/quota_exporter /bin/quota_exporter
# Non-root by default: the cgroup collectors (cpu, memory, throttle) need nothing more.
# The process, jvm, go, malloc and smaps collectors read other processes' /proc files and
# need root with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: run with --user 0 and those
# capabilities (see README "Privileges" and examples/).
USER 65534:65534
EXPOSE 10137
LABEL org.opencontainers.image.title=quota_exporter \
      org.opencontainers.image.source=https://github.com/quota-exporter/quota_exporter \
      org.opencontainers.image.licenses=Apache-2.0
ENTRYPOINT ["/bin/quota_exporter"]
