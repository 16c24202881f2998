package precision

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Manifest describes a recording: when it started, how often the exporter was scraped, and
// which cgroups (and Kubernetes names) each scenario ran in.
type Manifest struct {
	Started   time.Time           `json:"started"`
	Interval  string              `json:"interval"` // scrape interval, e.g. "15s"
	Duration  string              `json:"duration"`
	Revision  string              `json:"revision"` // the exporter's git revision
	Instance  string              `json:"instance"` // the instance label the series get
	Scenarios map[string]Identity `json:"scenarios"`
	Note      string              `json:"note,omitempty"`
}

// Identity is where a scenario ran: its container cgroup and Kubernetes names.
type Identity struct {
	Cgroup    string `json:"cgroup"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
}

// recordedAt starts each exposition in a recording: "# RECORDED_AT <unix milliseconds>".
const recordedAt = "# RECORDED_AT "

// Recorder appends expositions, each stamped with the time of its scrape, to a gzip file.
type Recorder struct {
	f  *os.File
	gz *gzip.Writer
}

// NewRecorder creates path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	return &Recorder{f: f, gz: gz}, nil
}

// Add writes one exposition, keeping only the lines Keep accepts.
func (r *Recorder) Add(at time.Time, exposition []byte) error {
	fmt.Fprintf(r.gz, "%s%d\n", recordedAt, at.UnixMilli())
	for _, line := range bytes.SplitAfter(exposition, []byte("\n")) {
		if Keep(string(line)) {
			if _, err := r.gz.Write(line); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close flushes the file.
func (r *Recorder) Close() error {
	err := r.gz.Close()
	if e := r.f.Close(); err == nil {
		err = e
	}
	return err
}

// Keep drops what no rule reads: the Go runtime's and the HTTP handler's own metrics.
func Keep(line string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
	return !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_")
}

// Scrape is one recorded exposition.
type Scrape struct {
	At   time.Time
	Body []byte
}

// ReadRecording reads a gzip recording back into its scrapes.
func ReadRecording(path string) ([]Scrape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var out []Scrape
	s := bufio.NewReader(gz)
	for {
		line, err := s.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, recordedAt); ok {
			ms, perr := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if perr != nil {
				return nil, fmt.Errorf("%s: bad %q", path, line)
			}
			out = append(out, Scrape{At: time.UnixMilli(ms)})
		} else if len(out) > 0 {
			out[len(out)-1].Body = append(out[len(out)-1].Body, line...)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ReadManifest reads a recording's manifest.
func ReadManifest(path string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}
