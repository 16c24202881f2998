package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"
)

// Sample is one element of an instant query result (vector or scalar).
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query against the stack's Prometheus.
func (s *Stack) Query(ctx context.Context, q string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.promGet(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(vec))
		for _, v := range vec {
			out = append(out, Sample{Labels: v.Metric, Value: parseValue(v.Value[1])})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, err
		}
		return []Sample{{Value: parseValue(v[1])}}, nil
	default:
		return nil, fmt.Errorf("query %q: unexpected result type %s", q, data.ResultType)
	}
}

func parseValue(v any) float64 {
	s, _ := v.(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// PromAlert is an alert as Prometheus's /api/v1/alerts shows it (pending or firing).
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Alerts lists Prometheus's active alerts.
func (s *Stack) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := s.promGet(ctx, "/api/v1/alerts", &data)
	return data.Alerts, err
}

// RuleCount is the number of rules Prometheus loaded.
func (s *Stack) RuleCount(ctx context.Context) (int, error) {
	var data struct {
		Groups []struct {
			Rules []json.RawMessage `json:"rules"`
		} `json:"groups"`
	}
	if err := s.promGet(ctx, "/api/v1/rules", &data); err != nil {
		return 0, err
	}
	n := 0
	for _, g := range data.Groups {
		n += len(g.Rules)
	}
	return n, nil
}

func (s *Stack) promGet(ctx context.Context, path string, data any) error {
	resp, err := httpGet(ctx, s.PromURL+path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}
