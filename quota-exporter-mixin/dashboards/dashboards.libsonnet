// grafanaDashboards: file name -> dashboard, rendered to dashboards/*.json by `make mixin`.
local cpu = import 'cpu.libsonnet';
local memory = import 'memory.libsonnet';
local overview = import 'overview.libsonnet';
local runtime = import 'runtime.libsonnet';

{
  grafanaDashboards+:: {
    'quota-overview.json': overview.new($._config),
    'quota-cpu-throttling.json': cpu.new($._config),
    'quota-runtime-pauses.json': runtime.new($._config),
    'quota-memory.json': memory.new($._config),
  },
}
