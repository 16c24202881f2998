// Small helpers shared by rules, alerts and dashboards.
{
  // '10m' -> 600. Prometheus durations with a single unit (s, m, h, d, w).
  seconds(d)::
    local units = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
    local n = std.parseInt(std.substr(d, 0, std.length(d) - 1));
    n * units[d[std.length(d) - 1]],

  // ['job', 'instance'] -> 'job, instance'
  labels(ls):: std.join(', ', ls),

  // printf arguments that rebuild the alert's own label matchers in a template:
  // (fmtPart, args) = ('job=%q,instance=%q', '$labels.job $labels.instance').
  labelMatchers(ls):: {
    fmt: std.join(',', ['%s=%%q' % l for l in ls]),
    args: std.join(' ', ['$labels.%s' % l for l in ls]),
  },
}
