package v2

import (
	"context"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// TestGoMemLimit (cgroup v2; the v1 case is exporter/cmd/quota_exporter's
// TestGoMemLimitFromCgroup): the exporter in a scope under a slice whose memory.max is
// 192 MiB, the scope itself unlimited, runs with GOMEMLIMIT 0.9 of the slice's limit
// (automemlimit walks the ancestors); one in the root cgroup keeps the runtime's default.
func TestGoMemLimit(t *testing.T) {
	host := vm.Find(t)
	dir := t.TempDir()
	bins := filepath.Join(dir, "bins")
	testenv.BuildExporter(t, filepath.Join(bins, "quota_exporter"))
	im, err := imageWith(host, dir, bins, "quota_exporter")
	if err != nil {
		t.Fatal(err)
	}
	const flags = "--no-collector.throttle --no-collector.process --no-collector.jvm --no-collector.go --no-collector.malloc --no-collector.smaps"
	script := `mkcg exporter.slice/exporter.scope
echo 201326592 > $CG/exporter.slice/memory.max
runin exporter.slice/exporter.scope /bin/quota_exporter --web.listen-address=127.0.0.1:10140 ` + flags + ` > /tmp/limited.log 2>&1
/bin/quota_exporter --web.listen-address=127.0.0.1:10141 ` + flags + ` > /tmp/root.log 2>&1 &
for port in 10140 10141; do j=0; while [ $j -lt 120 ] && ! wget -q -O /dev/null http://127.0.0.1:$port/metrics; do j=$((j+1)); sleep 0.5; done; done
section limited wget -q -O - http://127.0.0.1:10140/metrics
section unlimited wget -q -O - http://127.0.0.1:10141/metrics
section logs cat /tmp/limited.log /tmp/root.log
`
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := host.Run(ctx, im, script)
	if err != nil {
		console := ""
		if res != nil {
			console = res.Console
		}
		t.Fatalf("VM: %v\n%s", err, console)
	}
	re := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`)
	for section, want := range map[string]float64{"limited": math.Floor(0.9 * 201326592), "unlimited": math.MaxInt64} {
		m := re.FindStringSubmatch(res.Section(section))
		if m == nil {
			t.Errorf("%s: no go_gc_gomemlimit_bytes\n%s", section, res.Section("logs"))
			continue
		}
		got, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("%s: GOMEMLIMIT %.0f", section, got)
		if got != want {
			t.Errorf("%s: go_gc_gomemlimit_bytes %.0f, want %.0f\n%s", section, got, want, res.Section("logs"))
		}
	}
}
