// make mixin: alerts/quota-alerts.yaml
local mixin = import '../mixin.libsonnet';

'# Generated from quota-exporter-mixin/ by `make mixin`; do not edit.\n'
+ std.manifestYamlDoc(mixin.prometheusAlerts, indent_array_in_object=false, quote_keys=false)
+ '\n'
