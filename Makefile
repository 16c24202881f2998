# quota_exporter: `make run` starts the exporter on this host, `make test` runs every test.
# Everything the project needs is installed by these targets; apt-get only in `deps-apt`.

GO        ?= go
VERSION   ?= $(shell cat VERSION)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BIN       := bin/quota_exporter
ARGS      ?=
# Three Go modules of our own (the other go.mod files are small test and demo programs, each
# built on its own), so that the exporter's go.mod lists only what the exporter links:
#   - go.mod: the exporter and its tests (`go mod tidy` keeps it exact);
#   - tools/go.mod (and tools/alertmanager/go.mod, tools/helm/go.mod): pinned command-line tools (promtool,
#     prometheus, jsonnet, jb (jsonnet-bundler), alertmanager, helm) run with `go tool -modfile`; their
#     hundreds of dependencies, and alertmanager's and helm's conflicting versions, stay out of the
#     exporter's build; tools/ociimage/go.mod: the release image builder (go-containerregistry as a library);
#   - test/go.mod: heavy test-only libraries (Prometheus' PromQL parser, grafana-foundation-sdk,
#     k8s.io/api, the Prometheus Operator types) for the mixin, example and end-to-end checks.
#     Its pins are hand-chosen (Operator v0.94.0: v0.95.0 needs a module the proxy refuses):
#     do not run `go mod tidy` there.
TOOLS     := $(GO) tool -modfile=$(CURDIR)/tools/go.mod
# golangci-lint in a module of its own (its dependencies stay out of the others); config .golangci.yml.
GOLANGCI  := $(GO) tool -modfile=$(CURDIR)/tools/golangci/go.mod golangci-lint
AM_TOOLS  := $(GO) tool -modfile=$(CURDIR)/tools/alertmanager/go.mod
# Helm (the chart's lint and template tests) in its own module: its k8s.io dependencies stay out
# of tools/go.mod.
HELM      := $(GO) tool -modfile=$(CURDIR)/tools/helm/go.mod helm
VERSION_PKG := github.com/prometheus/common/version
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
LDFLAGS    = -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
             -X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildUser=make \
             -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)
export CGO_ENABLED ?= 0
# Real-cgroup, JVM and C tests run as root and take a while; one package at a time keeps
# them from fighting over this machine's two cores.
GOTEST    := $(GO) test -count=1 -p 1 -timeout 20m

.PHONY: all build image release release-binaries release-tag-check test-release run diagnose generate test test-unit test-v2 test-kubenode fixtures-kubenode fixtures-kubenode-crio fixtures-v2 test-mixin test-examples test-chart test-e2e test-bench-node test-hostile lint check bench bench-node bench-node-v2 bench-precision record-workloads mixin examples chart demo tools deps-apt fuzz clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./exporter/cmd/quota_exporter

# Release artefacts (docs/release.md), all under bin/release/: static binaries per architecture
# and container images built without a container engine (tools/ociimage, go-containerregistry).
# They take the commit's time as build date, so the same commit gives the same files and image
# digests. `make image` is the host's architecture only, at a stable path:
# bin/release/quota-exporter-image-linux-$(HOST_ARCH).tar (import with `ctr -n k8s.io images
# import`, `docker load` or `podman load`).
IMAGE_REPO     ?= ghcr.io/quota-exporter/quota-exporter
IMAGE_TAGS     ?= $(IMAGE_REPO):$(VERSION) quota-exporter:$(VERSION)
RELEASE_DIR    ?= bin/release
RELEASE_ARCHES := amd64 arm64
HOST_ARCH      := $(shell $(GO) env GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
SOURCE_URL     := https://github.com/quota-exporter/quota_exporter
image release release-binaries release-binary-% image-%: BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y%m%d-%H:%M:%S)
IMAGE_CREATED = $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
IMAGE_LABELS = \
  -label org.opencontainers.image.title=quota_exporter \
  -label 'org.opencontainers.image.description=Prometheus exporter: CPU quotas, throttling and memory limits of containers, and the runtimes inside them' \
  -label org.opencontainers.image.version=$(VERSION) \
  -label org.opencontainers.image.revision=$(shell git rev-parse HEAD 2>/dev/null || echo unknown) \
  -label org.opencontainers.image.created=$(IMAGE_CREATED) \
  -label org.opencontainers.image.source=$(SOURCE_URL) \
  -label org.opencontainers.image.url=$(SOURCE_URL) \
  -label org.opencontainers.image.documentation=$(SOURCE_URL)/blob/v$(VERSION)/README.md \
  -label org.opencontainers.image.licenses=Apache-2.0

image: image-$(HOST_ARCH)

# Everything a release publishes (docs/release.md): per architecture the binary's archive
# (quota_exporter-VERSION.linux-ARCH.tar.gz: binary, LICENSE, NOTICE, README.md, CHANGELOG.md) and the
# image tarball, and sha256sums.txt over all of them.
release: release-tag-check $(addprefix image-,$(RELEASE_ARCHES))
	@set -e; cd $(RELEASE_DIR); for a in $(RELEASE_ARCHES); do \
	  d=quota_exporter-$(VERSION).linux-$$a; rm -rf $$d; mkdir $$d; \
	  cp linux-$$a/quota_exporter $(CURDIR)/LICENSE $(CURDIR)/NOTICE $(CURDIR)/README.md $(CURDIR)/CHANGELOG.md $$d/; \
	  tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -cf - $$d | gzip -n -9 >$$d.tar.gz; \
	  rm -rf $$d; done; \
	sha256sum quota_exporter-$(VERSION).linux-*.tar.gz quota-exporter-image-linux-*.tar >sha256sums.txt; \
	cat sha256sums.txt; ls -l quota_exporter-$(VERSION).linux-*.tar.gz quota-exporter-image-linux-*.tar linux-*/quota_exporter

release-binaries: $(addprefix release-binary-,$(RELEASE_ARCHES))

# A tagged HEAD must carry the tag VERSION names (docs/release.md); an untagged one builds as is.
release-tag-check:
	@tag=$$(git describe --exact-match --tags HEAD 2>/dev/null || true); \
	  if [ -n "$$tag" ] && [ "$$tag" != "v$(VERSION)" ]; then echo "release: HEAD is tagged $$tag but VERSION says $(VERSION)"; exit 1; fi

# Static (CGO_ENABLED=0) and reproducible (-trimpath, no VCS stamp, fixed build date).
release-binary-%:
	GOOS=linux GOARCH=$* CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' \
	  -o $(RELEASE_DIR)/linux-$*/quota_exporter ./exporter/cmd/quota_exporter

image-%: release-binary-% bin/ociimage
	bin/ociimage -binary $(RELEASE_DIR)/linux-$*/quota_exporter -arch $* \
	  -created $(IMAGE_CREATED) $(addprefix -tag ,$(IMAGE_TAGS)) $(IMAGE_LABELS) \
	  -o $(RELEASE_DIR)/quota-exporter-image-linux-$*.tar

bin/ociimage: tools/ociimage/main.go tools/ociimage/go.mod tools/ociimage/go.sum
	cd tools/ociimage && $(GO) build -trimpath -o ../../bin/ociimage .

# Regenerates the BPF objects and their Go loaders (bpf2go, pinned in tools/go.mod) from the C
# under exporter/internal/*/bpf/. Needs clang and libbpf-dev (make deps-apt); the generated
# *_bpfel.go and *_bpfel.o files are committed, so build and test need neither.
generate:
	$(GO) generate ./exporter/...

# Starts the exporter against this host with built-in defaults (root sees every process).
run: build
	./$(BIN) $(ARGS)

# One diagnosis of this host (docs/diagnose.md): findings worst first, each with its evidence and
# the fix computed for the workload; exit 1 on warnings, 2 on critical findings. Root sees every
# process: `sudo make diagnose`, or e.g. `make diagnose ARGS='--all --format markdown'`.
diagnose: build
	./$(BIN) diagnose $(ARGS)

# Every test: lint, the exporter's unit and real-system tests, the cgroup v2 VM tests, the mixin checks, the deployment
# examples and the Helm chart, the end-to-end test (workloads, exporter, Prometheus, Alertmanager;
# root), the real-node benchmark's smoke run, the hostile node (issue 29), the release artefacts (both architectures' binaries
# and images) and a real Kubernetes node (kubelet, containerd, runc) running the DaemonSet.
test: lint deps-apt tools test-unit test-v2 test-mixin test-examples test-chart test-e2e test-bench-node test-hostile test-release test-kubenode

test-unit: build
	$(GOTEST) ./...

# Mixin and dashboard checks (rendered output up to date, promtool, PromQL parsing, Grafana types, dashboard
# links, jb install of the mixin into an empty project).
test-mixin:
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && mkdir -p $$tmp/dashboards $$tmp/alerts && \
	  $(TOOLS) jsonnet -m $$tmp/dashboards quota-exporter-mixin/render/dashboards.jsonnet >/dev/null && \
	  $(TOOLS) jsonnet -S quota-exporter-mixin/render/alerts.jsonnet >$$tmp/alerts/quota-alerts.yaml && \
	  $(TOOLS) jsonnet -S quota-exporter-mixin/render/rules.jsonnet >$$tmp/alerts/quota-rules.yaml && \
	  diff -r dashboards $$tmp/dashboards && diff alerts/quota-alerts.yaml $$tmp/alerts/quota-alerts.yaml && \
	  diff alerts/quota-rules.yaml $$tmp/alerts/quota-rules.yaml || { echo "rendered mixin is stale: run make mixin"; exit 1; }
	$(TOOLS) jsonnetfmt --test $$(find quota-exporter-mixin examples/kube-prometheus test/examples/testdata -name '*.jsonnet' -o -name '*.libsonnet' | sort) || { echo "jsonnetfmt would change the files above"; exit 1; }
	@for f in $$(find quota-exporter-mixin -name '*.jsonnet' -o -name '*.libsonnet' | sort); do $(TOOLS) jsonnet-lint $$f || exit 1; done
	$(TOOLS) promtool check rules alerts/quota-rules.yaml alerts/quota-alerts.yaml
	@# promtool runs one test file on one core, and alerts_test.yaml takes minutes (every firing alert's
	@# description queries run at every step): its groups in two halves and the other files run side by side.
	@# The seven 6-hour memory-creep cases are most of the work; the groups named "a ..." hold four of them,
	@# the rest three (measured side by side: 98 s and 106 s; split at "r ..." before, 41 s and 163 s).
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  $(TOOLS) jsonnet -S -m $$tmp quota-exporter-mixin/tests/ksm.jsonnet >/dev/null && cp quota-exporter-mixin/tests/ksm_test.yaml $$tmp/ && \
	  mkdir $$tmp/batch && $(TOOLS) jsonnet -S -m $$tmp/batch quota-exporter-mixin/tests/batch.jsonnet >/dev/null && \
	  cp quota-exporter-mixin/tests/batch_test.yaml $$tmp/batch/ && \
	  t=quota-exporter-mixin/tests; \
	  $(TOOLS) promtool test rules --run '^a' $$t/alerts_test.yaml >$$tmp/a.log 2>&1 & groupsA=$$!; \
	  $(TOOLS) promtool test rules --run '^[^a]' $$t/alerts_test.yaml >$$tmp/rest.log 2>&1 & rest=$$!; \
	  $(TOOLS) promtool test rules $$t/exporter_missing_test.yaml $$tmp/ksm_test.yaml $$tmp/batch/batch_test.yaml >$$tmp/other.log 2>&1 & other=$$!; \
	  rc=0; for p in $$groupsA $$rest $$other; do wait $$p || rc=1; done; \
	  for f in a rest other; do echo "== promtool test rules ($$f)"; cat $$tmp/$$f.log; done; exit $$rc
	cd test && $(GO) test -count=1 ./mixin/ ./precision/

# The release artefacts (make release into bin/release), then test/release checks them: each
# image's config (entrypoint, user, labels, architecture), its binary (ELF machine, static,
# version and revision), the archives and the checksums.
test-release: release
	cd test && QUOTA_RELEASE_DIR=$(CURDIR)/$(RELEASE_DIR) $(GOTEST) ./release/...

# Deployment-example checks: Kubernetes manifests decoded strictly, compose file, configs.
test-examples:
	cd test && $(GOTEST) ./examples/...

# The Helm chart: helm lint and helm template for each charts/quota-exporter/ci/*-values.yaml,
# every object decoded strictly and checked (privileges, probes, monitors, rules, dashboards, RBAC,
# a real exporter with the rendered web config, the PodMonitor's relabelling in a real Prometheus),
# and the embedded mixin files up to date.
test-chart:
	cd test && $(GOTEST) ./chart/...

# The seed scenarios in real cgroups, scraped by a real Prometheus, paged through a real
# Alertmanager (root; fails on CI without it).
test-e2e: build
	cd test && $(GOTEST) ./e2e/...

# The real-node benchmark's smoke test: one run at N = 100 with short windows that asserts only
# that it completes and removes every cgroup and process it created (root; fails on CI without).
test-bench-node: build
	cd test && BENCHNODE_EXPORTER=$(CURDIR)/$(BIN) $(GOTEST) ./benchnode/...

# A hostile node (issue 29; root, v1 cgroups, FUSE): make build's binary with its default collectors (and a second
# with --collector.gopause) under the DaemonSet's limits (256 MiB, 500m), beside a calm pod and tenants planting every
# class of issue 29, scraped every 15 s for HOSTILE_DURATION; fails on an OOM kill, a late scrape, a peak above the
# documented bound, a calm pod whose series stop, or a pod's identity on another's cgroups. HOSTILE_CLASSES=a,b runs
# some classes only (none: the calm node alone); see test/hostile. The full run: make test-hostile HOSTILE_DURATION=5m
HOSTILE_DURATION ?= 90s
test-hostile: build
	cd test && HOSTILE_EXPORTER=$(CURDIR)/$(BIN) HOSTILE_DURATION=$(HOSTILE_DURATION) $(GOTEST) -v ./hostile/...

# Real Kubernetes nodes (root; docs/cgroups.md "A real kubelet"): etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler on this host (built from the Go module proxy by
# test/kubenode/k8sbuild, cached in /var/cache/quota_exporter/k8s), the exporter applied from
# examples/kubernetes and the chart, workloads as pods, Prometheus and Alertmanager, with the same
# assertions on each node: v1-cgroupfs, a kubelet, containerd and runc on this host's cgroup v1
# hierarchy (cgroupfs driver); v2-systemd, a qemu VM with Debian's cloud kernel (cgroup v2),
# systemd, containerd with runc and crun and the kubelet with the systemd driver, then a second
# kubelet there with kind's cgroup root (the VM's root filesystem built once by mmdebstrap, cached
# in /var/cache/quota_exporter/kubenode-vmroot). The exporter's image is make image's tarball.
# The VM node runs under software emulation (KVM does not boot here): by default the whole v2
# suite, then the kind kubelet (about 8 min warm on a quiet machine; a loaded one slows the VM
# several times); KUBENODE_VM=kind runs only the kind part (about 5 min), KUBENODE_VM=0 no VM
# (docs/cgroups.md "The cgroup v2 node").
KUBENODE_VM ?= all
KUBENODE_RUN := ^(TestKubeNode|TestFakePath|TestLockup|TestCRIOHelpers)$$/^(v1-cgroupfs$(if $(filter 0,$(KUBENODE_VM)),,|v2-systemd))$$$(if $(filter kind,$(KUBENODE_VM)),/^kind$$)
# The failed checks are printed again at the very end: the nodes' logs follow a failure.
test-kubenode: deps-apt tools image
	rm -f bin/kubenode-failures.txt
	cd test && KUBENODE_EXPORTER_IMAGE=$(CURDIR)/$(RELEASE_DIR)/quota-exporter-image-linux-$(HOST_ARCH).tar \
	  KUBENODE_EXPORTER_REF=quota-exporter:$(VERSION) KUBENODE_FAILURES=$(CURDIR)/bin/kubenode-failures.txt \
	  $(GO) test -count=1 -p 1 -timeout $(if $(filter all,$(KUBENODE_VM)),75m,30m) -v \
	  -run '$(KUBENODE_RUN)' ./kubenode/... || { cat bin/kubenode-failures.txt 2>/dev/null; exit 1; }

# Rewrites the fixture hosts recorded from the VM node's real cgroup tree (the whole v2 suite)
# (exporter/collector/testdata/hosts/v2-kubelet-systemd and v2-kubelet-kind, their pod log entries in
# testdata/podlogs-kubelet) and then their golden scrapes. test-kubenode fails when the node's files
# or their formats drift from the committed trees.
fixtures-kubenode: deps-apt tools image
	cd test && QUOTA_KUBENODE_FIXTURE_UPDATE=1 KUBENODE_EXPORTER_IMAGE=$(CURDIR)/$(RELEASE_DIR)/quota-exporter-image-linux-$(HOST_ARCH).tar \
	  KUBENODE_EXPORTER_REF=quota-exporter:$(VERSION) $(GO) test -count=1 -p 1 -timeout 75m -v -run '^TestKubeNode$$/^v2-systemd$$' ./kubenode/...
	cd exporter && $(GO) test -count=1 -run 'TestGoldenScrape/v2-kubelet' ./collector/ -update

# The CRI-O node's tree (exporter/collector/testdata/hosts/v2-kubelet-crio): the v2 VM node with CRI-O in place of
# containerd (crun by default, conmon in the pod's slice), kind's workloads and a static pod; it checks the layout and
# the names, then records. CRI-O is not packaged here and the Go module proxy refuses it, so make test never runs this:
# CRIO=<dir> names a build of crio and pinns made elsewhere (docs/cgroups.md "CRI-O" says how this one was built).
fixtures-kubenode-crio: deps-apt tools image
	@test -x "$(CRIO)/crio" -a -x "$(CRIO)/pinns" || { echo "CRIO=<directory with crio and pinns> is required"; exit 1; }
	cd test && QUOTA_KUBENODE_FIXTURE_UPDATE=1 KUBENODE_CRIO=$(abspath $(CRIO)) \
	  KUBENODE_EXPORTER_IMAGE=$(CURDIR)/$(RELEASE_DIR)/quota-exporter-image-linux-$(HOST_ARCH).tar \
	  KUBENODE_EXPORTER_REF=quota-exporter:$(VERSION) $(GO) test -count=1 -p 1 -timeout 45m -v -run '^TestKubeNode$$/^v2-crio$$' ./kubenode/...
	cd exporter && $(GO) test -count=1 -run 'TestGoldenScrape/v2-kubelet-crio' ./collector/ -update

# Alert precision on real workloads (issue 25, docs/precision.md; root): issue 25's archetypes and the seed cases,
# each the one container of its own kubepods-style pod in real v1 cgroups, the exporter scraped every 15 s by a real
# Prometheus with the rendered rules and kubernetes-mixin's CPUThrottlingHigh over the exporter's counters, for
# PRECISION_DURATION (>= 20m: the rules' real `for`). The archetypes run in PRECISION_GROUPS, one after the other
# (together they want more than this 2-core host's CPU). Prints pages per archetype (bin/precision-<group>.md).
# BASELINE=<git rev> runs that revision's exporter and rendered rules beside them on the same cgroups (the before).
# record-workloads runs the same and rewrites the replay test's fixtures (test/precision/testdata/group<N>).
PRECISION_DURATION ?= 20m
PRECISION_GROUPS ?= 1 2
BASELINE ?=
define precision_run
	@set -e; args=""; if [ -n '$(BASELINE)' ]; then \
	  b=$$(mktemp -d); git archive '$(BASELINE)' | tar -x -C $$b; \
	  (cd $$b && CGO_ENABLED=0 $(GO) build -trimpath -o $$b/quota_exporter.bin ./exporter/cmd/quota_exporter); \
	  args="-baseline-exporter $$b/quota_exporter.bin -baseline-rules $$b/alerts"; fi; \
	mkdir -p bin; cd test; for g in $(PRECISION_GROUPS); do \
	  $(GO) run ./precision/cmd/precision -root .. -group $$g -duration $(PRECISION_DURATION) -out ../bin/precision-$$g.md $(1) $$args; done
endef
bench-precision: tools
	$(call precision_run,)
record-workloads: tools
	$(call precision_run,-record precision/testdata/group$$g)

# Regenerates the Kubernetes manifests that embed the rendered rules and dashboards.
examples: mixin
	cd test && $(GO) run ./examples/cmd/genk8s -root ..

# Copies the rendered mixin into the Helm chart (charts/quota-exporter/files: the PrometheusRule
# and dashboard ConfigMaps read it; test-chart fails when it is stale), then lints the chart.
chart: mixin
	rm -rf charts/quota-exporter/files && mkdir -p charts/quota-exporter/files/alerts charts/quota-exporter/files/dashboards
	cp alerts/*.yaml charts/quota-exporter/files/alerts/
	cp dashboards/*.json charts/quota-exporter/files/dashboards/
	$(HELM) lint --strict charts/quota-exporter --kube-version 1.37.0

# The seed scenarios live on this host (root): workloads, exporter, Prometheus, Alertmanager on
# loopback; streams alerts; Ctrl-C or DEMO_DURATION stops and cleans up.
DEMO_DURATION ?= 0s
demo: build tools
	cd test && $(GO) run ./e2e/cmd/demo -root .. -duration $(DEMO_DURATION)

lint:
	$(GOLANGCI) run ./...
	@out=$$(gofmt -l test tools); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	cd test && $(GOLANGCI) run ./...
	cd tools/ociimage && $(GOLANGCI) run ./...

# The edit loop: formatting, vet, and the tests that need nothing but Go (-short skips those that need
# root, cgroups, a compiler or a JDK: testutil.SkipShort). Seconds to a couple of minutes; make test runs all.
check:
	@out=$$(gofmt -l exporter test tools); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -short -count=1 ./exporter/...

bench:
	@echo "== make bench: see docs/performance.md; -count 3 because other work makes timings noisy (read the best); root-only benchmarks skip unless root (fail under CI=true)"
	@echo "== cgroup scrape vs read floor (100/1000/5000 cgroups)"
	$(GO) test -run '^$$' -benchmem -count $(or $(BENCHCOUNT),3) -timeout 30m -benchtime 10x -bench '^Benchmark(Scrape|ScrapeWalkPerCollector|Discover|ReadFloor|ReadFloorRaw|ReadFloorRawAt)$$' ./exporter/collector/
	@echo "== throttling sampler: one window over 1000 cgroups (fixture; real v1 kernfs, root)"
	$(GO) test -run '^$$' -benchmem -count $(or $(BENCHCOUNT),3) -timeout 30m -benchtime 1s -bench '^BenchmarkSamplerWindow' ./exporter/collector/
	@echo "== process and runtime collectors: 500 fixture processes; this host with 4 real JVMs (root, JDK)"
	$(GO) test -run '^$$' -benchmem -count $(or $(BENCHCOUNT),3) -timeout 30m -benchtime 10x -bench '^Benchmark(ScrapeProcesses|ScrapeRealJVMs)$$' ./exporter/collector/
	@echo "== the scrape's response built into memory: 20 000 series, about 2.9 MB"
	$(GO) test -run '^$$' -benchmem -count $(or $(BENCHCOUNT),3) -timeout 30m -bench '^BenchmarkScrapeResponse$$' ./exporter/cmd/quota_exporter/
	@echo "== parsers, budgets, procread.Map"
	$(GO) test -run '^$$' -benchmem -count $(or $(BENCHCOUNT),3) -timeout 30m -bench . -skip '^BenchmarkTargetOverhead$$' ./exporter/internal/...
	@echo "== gopause: the watched program's throughput without and with the uprobes (root; interleaved A/B pinned to one CPU, medians of 10 rounds; ~2 min)"
	$(GO) test -v -run '^$$' -count 1 -timeout 30m -benchtime 1x -bench '^BenchmarkTargetOverhead$$' ./exporter/internal/gopause/

# The exporter on real v1 cgroups (root; docs/performance.md "Real node"): N quota cgroups with
# processes, the real binary with its defaults, idle CPU, scrape cost, memory, series, response size
# and the read floor; node_exporter side by side (pinned in tools/go.mod; NODE_EXPORTER= skips it).
# Rerun on another build: make bench-node EXPORTER=path/to/quota_exporter N=1000
N               ?= 100,1000,3000
EXPORTER        ?= $(BIN)
NODE_EXPORTER   ?= bin/node_exporter
BENCH_NODE_ARGS ?=
bench-node: build
	@if [ "$$(id -u)" != 0 ]; then \
	  if [ "$$CI" = true ]; then echo "bench-node: needs root (creates v1 cgroups)"; exit 1; fi; \
	  echo "bench-node: skipped: needs root (creates v1 cgroups)"; exit 0; fi; \
	set -e; cd test && $(GO) build -o ../bin/benchnode ./benchnode/cmd/benchnode && cd ..; \
	if [ '$(NODE_EXPORTER)' = bin/node_exporter ]; then cd tools && $(GO) build -o ../bin/node_exporter github.com/prometheus/node_exporter && cd ..; fi; \
	./bin/benchnode -n '$(N)' -exporter '$(EXPORTER)' $(if $(NODE_EXPORTER),-node-exporter '$(NODE_EXPORTER)') $(BENCH_NODE_ARGS)

# The same benchmark inside the cgroup v2 VM (test/v2, qemu; root): N_V2 real v2 quota
# cgroups, the exporter with its defaults, the floor of the same v2 files. Times are those of
# the emulated CPU (TCG here): compare them with the floor of the same run. Results in bin/bench-node-v2/.
N_V2 ?= 1000
bench-node-v2: deps-apt
	cd test && QUOTA_BENCH_V2=1 QUOTA_BENCH_V2_N=$(N_V2) QUOTA_BENCH_V2_OUT=$(CURDIR)/bin/bench-node-v2 \
	  $(GO) test -count=1 -timeout 45m -v -run '^TestBenchNodeInVM$$' ./v2/

# Renders dashboards/*.json and alerts/*.yaml from quota-exporter-mixin/, and the thresholds
# diagnose shares with the alerts (exporter/internal/diagnose/mixin_thresholds.json).
mixin:
	rm -f dashboards/*.json
	$(TOOLS) jsonnet -m dashboards quota-exporter-mixin/render/dashboards.jsonnet
	$(TOOLS) jsonnet -S quota-exporter-mixin/render/alerts.jsonnet >alerts/quota-alerts.yaml
	$(TOOLS) jsonnet -S quota-exporter-mixin/render/rules.jsonnet >alerts/quota-rules.yaml
	cd exporter/internal/diagnose && $(GO) generate .

# Pinned Go tools (jsonnet, promtool, prometheus, alertmanager, helm), built once into the Go cache.
tools:
	cd tools && $(GO) build -o /dev/null tool
	cd tools/alertmanager && $(GO) build -o /dev/null tool
	cd tools/helm && $(GO) build -o /dev/null tool

# The only apt-get in the project (root; a no-op when everything is present, or when not root: the
# tests that need the parts then skip locally and fail under CI=true). Shared libraries the malloc
# tests preload (jemalloc, tcmalloc); for the cgroup v2 VM tests qemu, a static busybox, and the
# kernel package linux-image-cloud-amd64 depends on, downloaded and unpacked into VM_KERNEL_DIR;
# clang and libbpf-dev for make generate (the BPF programs); capsh (libcap2-bin) for the tests that run
# the exporter with only a pod's capabilities; containerd, runc, etcd-server and the
# CNI plugins (a bridge for pod IPs) for the real Kubernetes node of make test-kubenode (the
# Kubernetes binaries come from the Go module proxy, test/kubenode/k8sbuild). Their services are
# not started (no systemd here): test/kubenode runs its own containerd and etcd. mmdebstrap builds
# the root filesystem of test-kubenode's cgroup v2 VM node (systemd, containerd, runc, crun from
# Debian's packages; cached in /var/cache/quota_exporter/kubenode-vmroot).
VM_KERNEL_DIR := /var/cache/quota_exporter/kernel
deps-apt:
	@missing=""; \
	  [ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || missing="$$missing libjemalloc2"; \
	  ls /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 >/dev/null 2>&1 || missing="$$missing libtcmalloc-minimal4"; \
	  command -v qemu-system-x86_64 >/dev/null || missing="$$missing qemu-system-x86"; \
	  dpkg -s busybox-static >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	  command -v clang >/dev/null || missing="$$missing clang"; \
	  command -v capsh >/dev/null || missing="$$missing libcap2-bin"; \
	  [ -e /usr/include/bpf/bpf_helpers.h ] || missing="$$missing libbpf-dev"; \
	  command -v containerd >/dev/null || missing="$$missing containerd"; \
	  command -v runc >/dev/null || missing="$$missing runc"; \
	  command -v etcd >/dev/null || missing="$$missing etcd-server"; \
	  command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	  [ -x /usr/lib/cni/bridge ] || missing="$$missing containernetworking-plugins"; \
	  kernel=$$(ls $(VM_KERNEL_DIR)/root/boot/vmlinuz-*-cloud-amd64 2>/dev/null | head -n 1); \
	  if [ -z "$$missing" ] && [ -n "$$kernel" ]; then :; \
	  elif [ "$$(id -u)" != 0 ]; then echo "deps-apt: not root; missing:$$missing $${kernel:-cloud-kernel}; their tests will skip"; \
	  else apt-get update -qq && \
	    { [ -z "$$missing" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; } && \
	    { [ -n "$$kernel" ] || { pkg=$$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $$2; exit}') && \
	      [ -n "$$pkg" ] && rm -rf $(VM_KERNEL_DIR) && mkdir -p $(VM_KERNEL_DIR) && cd $(VM_KERNEL_DIR) && \
	      apt-get download -qq -o APT::Sandbox::User=root $$pkg && dpkg -x $${pkg}_*.deb root && rm -f $${pkg}_*.deb && \
	      echo "deps-apt: kernel $$pkg unpacked into $(VM_KERNEL_DIR)/root"; }; }; fi

# The cgroup v2 tests: a qemu VM (Debian's cloud kernel, busybox initramfs, TCG unless KVM
# really boots) with the systemd-driver Kubernetes layout, real programs and the exporter.
# Needs make deps-apt; about 1-2 minutes on a 2-core machine.
test-v2: deps-apt
	cd test && $(GOTEST) ./v2/...

# Rewrites the fixture host copied from the v2 VM's own cgroup files
# (exporter/collector/testdata/hosts/v2-vm-kubernetes) and then its golden scrape. test-v2
# fails when the committed tree's files or formats drift from the VM's.
fixtures-v2: deps-apt
	cd test && QUOTA_V2_FIXTURE_UPDATE=1 $(GO) test -count=1 -run 'TestFixtureMatchesVM' ./v2/
	cd exporter && $(GO) test -count=1 -run 'TestGoldenScrape/v2-vm-kubernetes' ./collector/ -update

# Short fuzzing of every parser (FUZZTIME each).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./exporter/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x $$pkg || exit 1; \
	  done; done

clean:
	rm -rf bin
