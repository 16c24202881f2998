// make mixin: dashboards/*.json (jsonnet -m dashboards)
local mixin = import '../mixin.libsonnet';

mixin.grafanaDashboards
