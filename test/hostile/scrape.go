package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Prometheus's scrape, as the chart and examples/prometheus configure it: every 15 s with a
// 10 s timeout, which Prometheus sends in X-Prometheus-Scrape-Timeout-Seconds.
const (
	ScrapeInterval = 15 * time.Second
	ScrapeTimeout  = 10 * time.Second
)

// Sample is one line of the text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
	Series string // the line up to the value: name and labels as sent
}

// Scrape is one scrape's outcome.
type Scrape struct {
	At       time.Duration // since the run began
	Duration time.Duration
	Status   int
	Err      error
	Bytes    int
	Samples  []Sample
}

// OK tells whether the scrape answered 200 within the timeout.
func (s *Scrape) OK() bool {
	return s.Err == nil && s.Status == http.StatusOK && s.Duration <= ScrapeTimeout
}

// scrapeOnce fetches /metrics as Prometheus does (gzip accepted, the timeout header set),
// giving up at the scrape timeout.
func scrapeOnce(ctx context.Context, client *http.Client, addr string, begin time.Time) *Scrape {
	s := &Scrape{At: time.Since(begin)}
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		s.Err = err
		return s
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(ScrapeTimeout.Seconds(), 'f', -1, 64))
	t0 := time.Now()
	defer func() { s.Duration = time.Since(t0) }()
	resp, err := client.Do(req)
	if err != nil {
		s.Err = err
		return s
	}
	defer resp.Body.Close()
	s.Status = resp.StatusCode
	body, err := io.ReadAll(resp.Body)
	s.Bytes = len(body)
	if err != nil {
		s.Err = err
		return s
	}
	if resp.StatusCode != http.StatusOK {
		s.Err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
		return s
	}
	s.Samples, s.Err = parseText(body)
	return s
}

// parseText parses the text exposition format line by line (a parser into metric families
// would merge duplicate series, which are one of the findings).
func parseText(body []byte) ([]Sample, error) {
	var out []Sample
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return out, fmt.Errorf("%w: %.200q", err, line)
		}
		out = append(out, s)
	}
	return out, nil
}

var errBadLine = errors.New("malformed exposition line")

func parseLine(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, errBadLine
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		j := 1
		for {
			for j < len(rest) && (rest[j] == ',' || rest[j] == ' ') {
				j++
			}
			if j >= len(rest) {
				return s, errBadLine
			}
			if rest[j] == '}' {
				j++
				break
			}
			eq := strings.IndexByte(rest[j:], '=')
			if eq < 0 || j+eq+1 >= len(rest) || rest[j+eq+1] != '"' {
				return s, errBadLine
			}
			name := rest[j : j+eq]
			j += eq + 2
			var v strings.Builder
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				v.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return s, errBadLine
			}
			j++ // closing quote
			s.Labels[name] = v.String()
		}
		s.Series = s.Name + rest[:j]
		rest = rest[j:]
	} else {
		s.Series = s.Name
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, errBadLine
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, errBadLine
	}
	s.Value = v
	return s, nil
}

// newClient is Prometheus's side: gzip accepted, a fresh connection when one breaks.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: ScrapeTimeout}
}
